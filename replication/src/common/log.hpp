// One structured log line per notable event, as JSON on standard error:
//   {"ts":"2026-11-30T05:40:01.123Z","level":"info","app":"primary","event":"delivered","stream":"s","seq":12}
// Built on spdlog (Debian's libspdlog-dev): its thread-safe sinks and level
// filtering; the line itself, its time and level included, is written here
// as one JSON object, so that a logger an embedding program supplies (named
// "steadfast" in spdlog's registry) carries it whole in its own pattern.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace steadfast::app {

enum class level { debug, info, warn, error };

/// Sets the program name put in every line and the minimum level (again
/// later, to change them).
void init_log(std::string_view app, level min = level::info);
void log(level l, std::string_view event, nlohmann::json fields = nlohmann::json::object());

/// At most one line a second for an event that can come fast (a failing
/// disk fails every write): allow() is the number of lines held back since
/// the last one when a line may be logged now, else nullopt (and this one is
/// counted). From any thread.
class log_limiter {
public:
    std::optional<std::uint64_t> allow() noexcept { return allow_at(std::chrono::steady_clock::now()); }
    /// The same at `now` (tests pass made-up times).
    std::optional<std::uint64_t> allow_at(std::chrono::steady_clock::time_point now) noexcept;
    /// Forgets the lines held back (told elsewhere, such as a recovery).
    void reset() noexcept { held_.store(0, std::memory_order_relaxed); }

private:
    std::atomic<std::int64_t> logged_at_ns_{0};  // steady clock; 0: never
    std::atomic<std::uint64_t> held_{0};
};

/// log() through `limiter`: the line goes out (with
/// "also_failed_since_last_line", the lines held back) if `limiter` allows
/// one now, else it is counted.
void log_limited(log_limiter& limiter, level l, std::string_view event, nlohmann::json fields);

}  // namespace steadfast::app
