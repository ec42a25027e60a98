#include "window.hpp"

#include <steadfast/replication/envelope.hpp>

#include <iterator>

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

namespace steadfast::primary {

bool send_window::settled(std::uint64_t acked) const noexcept {
    return end_ != 0 && !more_maybe_ && acked != UINT64_MAX && acked >= end_;
}

void send_window::forget() noexcept {
    rows_.clear();
    end_ = 0;
    ++gen_;  // a read or read-ahead still running is for the old window
}

void send_window::committed(pending_message* one, bool online) {
    // Not while the secondary is away: what comes then is not added in
    // memory to what a read already holds.
    if (one && online && window::joins(rows_, end_, *one)) {
        end_ = one->seq;
        rows_.push_back(std::move(*one));
    } else {
        more_maybe_ = true;
    }
}

void send_window::read(std::uint64_t acked, std::vector<pending_message>& rows) {
    end_ = rows.empty() ? acked : rows.back().seq;
    more_maybe_ = !rows.empty();
    rows_.assign(std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
}

// Without the rows that joined the window in memory while it ran
// (window::fresh_rows). A failed one is dropped: the next read of the window
// tries again and reports the error.
void send_window::take_read_ahead() {
    auto& ra = next_;
    if (!ra || ra->running) return;
    if (ra->gen == gen_ && end_) {
        const auto f =
            ra->failed ? window::fresh{ra->rows.size(), true} : window::fresh_rows(end_, ra->after, ra->rows);
        if (f.read_again) more_maybe_ = true;
        if (f.from < ra->rows.size()) {
            end_ = ra->rows.back().seq;
            const auto from = ra->rows.begin() + static_cast<std::ptrdiff_t>(f.from);
            rows_.insert(rows_.end(), std::make_move_iterator(from), std::make_move_iterator(ra->rows.end()));
        }
    }
    ra->rows.clear();
    ra->failed = false;
    ra->gen = ~std::uint64_t{0};  // taken
}

bool send_window::start_read_ahead(std::size_t max) {
    if (max <= 1 || rows_.size() >= max || reading_ahead() || !end_ || !more_maybe_) return false;
    if (!next_) next_ = std::make_shared<read_ahead>();
    next_->running = true;
    next_->gen = gen_;
    next_->after = end_;
    next_->rows.clear();
    next_->failed = false;
    // The read sees every commit answered before it ends; a later one joins
    // the window in memory or sets more_maybe_ again.
    more_maybe_ = false;
    return true;
}

}  // namespace steadfast::primary
