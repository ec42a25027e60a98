#include "holds.hpp"

namespace steadfast::secondary {

using namespace std::chrono_literals;

bool stream_holds::held(const std::string& stream) const {
    auto b = blocked_.find(stream);
    return b != blocked_.end() && b->second.rfind("conflict", 0) == 0;
}

bool stream_holds::applied(const std::string& stream) {
    if (!blocked_.erase(stream)) return false;
    gaps_.erase(stream);
    repair_asked_.erase(stream);
    return true;
}

bool stream_holds::blocked(const std::string& stream, const std::string& why) {
    auto& b = blocked_[stream];
    if (b == why) return false;
    b = why;
    return true;
}

stream_holds::gap_step stream_holds::gap(const std::string& stream, std::uint64_t expected, std::uint64_t first,
                                         bool new_fetch, time_point now) {
    gap_step step;
    auto& g = gaps_.try_emplace(stream, gap_seen{now, 0}).first->second;
    if (new_fetch) ++g.times;
    if (first > expected && (g.next_held == 0 || first < g.next_held)) g.next_held = first;
    // Both need the gap seen in 5 fetches (a nak'd delivery comes back after
    // a second): a secondary paused (SIGSTOP) through a passing gap does not
    // act on its first look after it resumes.
    if (g.times < 5) return step;
    step.lasting = now - g.since > 300s;
    if (now - g.since > 10s) {
        auto [at, fresh] = repair_asked_.emplace(stream, now);
        if (fresh || now - at->second >= 15s) {
            at->second = now;
            step.ask_repair = true;
            step.from = expected;
            step.to = g.next_held > expected ? g.next_held - 1 : expected;
            ++repair_requests_;
        }
    }
    return step;
}

std::chrono::seconds stream_holds::nak_delay(const std::string& stream, bool is_gap) const {
    return !is_gap || repair_asked_.count(stream) ? 5s : 1s;
}

bool stream_holds::restart(time_point now) {
    gaps_.clear();
    repair_asked_.clear();
    if (last_restart_ != time_point{} && now - last_restart_ < 60s) return false;
    last_restart_ = now;
    return true;
}

}  // namespace steadfast::secondary
