#include "window.hpp"

namespace steadfast::primary::window {

bool joins(const std::deque<pending_message>& rows, std::uint64_t end, const pending_message& m) {
    return end != 0 && m.seq == end + 1 && rows.size() < in_memory_rows && m.payload.size() <= in_memory_payload;
}

fresh fresh_rows(std::uint64_t end, std::uint64_t after, const std::vector<pending_message>& rows) {
    if (end == 0 || after > end) return {rows.size(), true};  // not this window's continuation: read again
    std::size_t i = 0;
    while (i < rows.size() && rows[i].seq <= end) ++i;
    if (i == rows.size()) return {i, false};  // all of them joined while it ran
    if (rows[i].seq != end + 1) return {rows.size(), true};  // a hole (cannot happen): read again
    return {i, true};  // rows the window lacked: there may be more
}

}  // namespace steadfast::primary::window
