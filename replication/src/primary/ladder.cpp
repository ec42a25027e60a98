#include "ladder.hpp"

#include "../common/engine_reason.hpp"

#include <algorithm>

namespace steadfast::primary {

ladder_plan plan_next_step(schedule current, std::uint64_t head_seq, const backoff& ladder,
                           std::chrono::nanoseconds server_wait, std::int64_t now_ms) {
    ladder_plan p;
    p.next = current.is_for(head_seq) ? current : schedule{};
    p.next.head_seq = head_seq;
    ++p.next.attempts;
    const auto steps = std::max<std::uint64_t>(1, ladder.steps());
    const auto step = std::min<std::uint64_t>(p.next.attempts, steps);
    const std::chrono::nanoseconds longest = ladder.base_delay(steps, {});
    if (server_wait > longest) {
        p.retry_after_bounded = true;
        server_wait = longest;
    }
    p.delay = std::chrono::duration_cast<std::chrono::milliseconds>(std::max(ladder.base_delay(step, {}), server_wait));
    p.next.next_at_ms = now_ms + p.delay.count();
    return p;
}

std::optional<std::string> ladder_problem(const std::string& ladder) {
    backoff b;
    try {
        if (ladder.find_first_not_of(" \t,") != std::string::npos) {
            std::string t = ladder;
            t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ' ' || c == '\t'; }), t.end());
            if (t.front() == ',' || t.back() == ',' || t.find(",,") != std::string::npos)
                return "an empty step between commas in \"" + ladder + "\"";
        }
        b = backoff::schedule(ladder);
    } catch (const std::exception& e) {
        return app::engine_reason(e);
    }
    for (std::uint32_t i = 1; i <= b.steps(); ++i)
        if (b.base_delay(i, {}) < std::chrono::milliseconds(100))
            return "step " + std::to_string(i) +
                   " is shorter than 100ms; the ladder is the slow retry after the quick ones";
    return std::nullopt;
}

}  // namespace steadfast::primary
