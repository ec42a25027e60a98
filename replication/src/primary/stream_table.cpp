#include "stream_table.hpp"

#include <algorithm>

namespace steadfast::primary {

stream_state* stream_table::find(const std::string& stream) {
    auto it = streams_.find(stream);
    return it == streams_.end() ? nullptr : &it->second;
}

const stream_state* stream_table::find(const std::string& stream) const {
    auto it = streams_.find(stream);
    return it == streams_.end() ? nullptr : &it->second;
}

stream_state& stream_table::add(const std::string& stream, std::uint64_t acked, std::uint64_t acked_max,
                                std::uint64_t pending) {
    auto& st = streams_.try_emplace(stream, c_, stream, acked, acked_max, pending).first->second;
    m_.streams.Set(static_cast<double>(streams_.size()));
    return st;
}

void stream_table::erase(const std::string& stream) {
    streams_.erase(stream);
    m_.streams.Set(static_cast<double>(streams_.size()));
}

void stream_table::committed(std::uint64_t n) {
    pending_ += n;
    m_.depth.Set(static_cast<double>(pending_));
}

void stream_table::delivered(std::uint64_t n) {
    pending_ -= std::min(pending_, n);
    m_.depth.Set(static_cast<double>(pending_));
}

void stream_table::block(const std::string& stream, const std::string& reason) {
    const auto& fsm = streams_.at(stream).fsm;
    blocked_[stream] = {reason, fsm.pending(), fsm.head_at_ms()};
    m_.blocks.Increment();
    m_.blocked.Set(static_cast<double>(blocked_.size()));
}

bool stream_table::committed_while_blocked(const std::string& stream, std::uint64_t n) {
    auto b = blocked_.find(stream);
    if (b == blocked_.end()) return false;
    b->second.pending += n;
    return true;
}

std::optional<std::string> stream_table::blocked(const std::string& stream) const {
    auto it = blocked_.find(stream);
    if (it == blocked_.end()) return std::nullopt;
    return it->second.reason;
}

std::uint64_t stream_table::blocked_pending() const {
    std::uint64_t n = 0;
    for (auto& [s, b] : blocked_) n += b.pending;
    return n;
}

bool stream_table::has_pending(const std::string& stream) const {
    if (auto it = streams_.find(stream); it != streams_.end() && it->second.fsm.pending() > 0) return true;
    auto b = blocked_.find(stream);
    return b != blocked_.end() && b->second.pending > 0;
}

std::size_t stream_table::busy_streams() const {
    return static_cast<std::size_t>(std::count_if(streams_.begin(), streams_.end(),
                                                  [](const auto& kv) { return kv.second.fsm.pending() > 0; })) +
           static_cast<std::size_t>(
               std::count_if(blocked_.begin(), blocked_.end(), [](const auto& kv) { return kv.second.pending > 0; }));
}

void stream_table::refresh_metrics(std::int64_t now) {
    struct candidate {
        const std::string* stream;
        std::uint64_t pending;
        std::int64_t head_at_ms;  // 0: not known (counted as new)
    };
    std::vector<candidate> c;
    for (const auto& [stream, st] : streams_)
        if (st.fsm.pending() > 0) c.push_back({&stream, st.fsm.pending(), st.fsm.head_at_ms()});
    for (const auto& [stream, b] : blocked_)
        if (b.pending > 0) c.push_back({&stream, b.pending, b.head_at_ms});
    auto age_of = [now](std::int64_t head_at_ms) {
        return head_at_ms > 0 ? static_cast<double>(std::max<std::int64_t>(now - head_at_ms, 0)) / 1000.0 : 0.0;
    };
    double oldest = 0;
    for (const auto& x : c) oldest = std::max(oldest, age_of(x.head_at_ms));
    m_.oldest_age.Set(oldest);
    if (c.size() > max_stream_series) {
        // The oldest heads first; then the most pending; then by name.
        auto older = [](const candidate& a, const candidate& b) {
            const auto ka = a.head_at_ms > 0 ? a.head_at_ms : INT64_MAX;
            const auto kb = b.head_at_ms > 0 ? b.head_at_ms : INT64_MAX;
            if (ka != kb) return ka < kb;
            if (a.pending != b.pending) return a.pending > b.pending;
            return *a.stream < *b.stream;
        };
        std::nth_element(c.begin(), c.begin() + max_stream_series, c.end(), older);
        c.resize(max_stream_series);
    }
    std::sort(c.begin(), c.end(), [](const candidate& a, const candidate& b) { return *a.stream < *b.stream; });
    // Series of streams no longer among them go (both sorted by name: one walk).
    auto next = c.begin();
    for (auto it = exposed_.begin(); it != exposed_.end();) {
        while (next != c.end() && *next->stream < it->first) ++next;
        if (next != c.end() && *next->stream == it->first) {
            ++it;
            continue;
        }
        m_.stream_pending.Remove(it->second.pending);
        m_.stream_age.Remove(it->second.age);
        it = exposed_.erase(it);
    }
    for (const auto& x : c) {
        auto it = exposed_.find(*x.stream);
        if (it == exposed_.end())
            it = exposed_
                     .emplace(*x.stream, series{&m_.stream_pending.Add({{"stream", *x.stream}}),
                                                &m_.stream_age.Add({{"stream", *x.stream}})})
                     .first;
        it->second.pending->Set(static_cast<double>(x.pending));
        it->second.age->Set(age_of(x.head_at_ms));
    }
}

std::vector<std::string> stream_table::streams_with_series() const {
    std::vector<std::string> v;
    for (const auto& [s, _] : exposed_) v.push_back(s);
    return v;
}

}  // namespace steadfast::primary
