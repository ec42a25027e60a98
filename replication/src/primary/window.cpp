#include "window.hpp"

#include <steadfast/replication/envelope.hpp>

namespace steadfast::primary::window {

bool joins(const std::deque<pending_message>& rows, std::uint64_t end, const pending_message& m) {
    return end != 0 && m.seq == end + 1 && rows.size() < in_memory_rows && m.payload.size() <= in_memory_payload;
}

fresh fresh_rows(std::uint64_t end, std::uint64_t after, const std::vector<pending_message>& rows) {
    if (end == 0 || after > end) return {rows.size(), true};  // not this window's continuation: read again
    std::size_t i = 0;
    while (i < rows.size() && rows[i].seq <= end) ++i;
    if (i == rows.size()) return {i, false};                 // all of them joined while it ran
    if (rows[i].seq != end + 1) return {rows.size(), true};  // a hole (cannot happen): read again
    return {i, true};                                        // rows the window lacked: there may be more
}

std::vector<pending_message> take_batch(std::deque<pending_message>& rows, std::size_t max, std::size_t body_limit,
                                        std::string_view stream, std::uint64_t epoch) {
    std::vector<pending_message> batch;
    std::size_t bytes = envelope::batch_prefix.size() + envelope::batch_suffix.size();
    while (!rows.empty() && batch.size() < max) {
        const auto& m = rows.front();
        const std::size_t sz = envelope::encoded_size(m.id, stream, m.seq, epoch, m.payload.size()) + 1;
        if (!batch.empty() && bytes + sz > body_limit) break;
        bytes += sz;
        batch.push_back(std::move(rows.front()));
        rows.pop_front();
    }
    return batch;
}

}  // namespace steadfast::primary::window
