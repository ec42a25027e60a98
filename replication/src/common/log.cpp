#include "log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

namespace steadfast::app {

namespace {
std::string app_name = "steadfast";
std::shared_ptr<spdlog::logger> logger;
bool owned = false;          // made here (the daemons', or an embedding program's that registered none)
std::once_flag logger_made;  // an embedded node's first line may come from any of its threads

spdlog::level::level_enum to_spdlog(level l) {
    return l == level::debug  ? spdlog::level::debug
           : l == level::info ? spdlog::level::info
           : l == level::warn ? spdlog::level::warn
                              : spdlog::level::err;
}
const char* name_of(level l) {  // (spdlog's names, as the lines have always said)
    return l == level::debug ? "debug" : l == level::info ? "info" : l == level::warn ? "warning" : "error";
}
}  // namespace

// A program embedding the nodes may register a logger named "steadfast" in
// spdlog's registry before the first line: it is used as it is (its sinks,
// pattern and level; each message is one whole JSON object). Otherwise the
// lines go to standard error through a logger of the library's own, kept
// out of spdlog's registry, so that the program's spdlog::set_pattern() or
// set_level() for its own loggers leaves the JSON lines as they are.
void init_log(std::string_view app, level min) {
    app_name = std::string(app);
    if (!logger) {
        logger = spdlog::get("steadfast");
        if (!logger) {
            logger = std::make_shared<spdlog::logger>("steadfast", std::make_shared<spdlog::sinks::stderr_sink_mt>());
            logger->set_pattern("%v");
            logger->flush_on(spdlog::level::info);
            owned = true;
        }
    }
    if (owned) logger->set_level(to_spdlog(min));
}

void log(level l, std::string_view event, nlohmann::json fields) {
    std::call_once(logger_made, [] {
        if (!logger) init_log(app_name);
    });
    if (!logger->should_log(to_spdlog(l))) return;
    // The whole line, its time (UTC, milliseconds) and level first.
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char head[96];
    std::snprintf(head, sizeof head, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":\"%s\",",
                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000), name_of(l));
    nlohmann::json line = {{"app", app_name}, {"event", event}};
    if (fields.is_object())
        for (auto& [k, v] : fields.items()) line[k] = std::move(v);
    std::string body = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    body.replace(0, 1, head);  // the object's brace: the head opens it
    logger->log(to_spdlog(l), "{}", body);
}

std::optional<std::uint64_t> log_limiter::allow_at(std::chrono::steady_clock::time_point at) noexcept {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    std::int64_t last = logged_at_ns_.load(std::memory_order_relaxed);
    const bool due = last == 0 || now - last >= std::chrono::nanoseconds(std::chrono::seconds(1)).count();
    if (!due || !logged_at_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
        held_.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    return held_.exchange(0, std::memory_order_relaxed);
}

void log_limited(log_limiter& limiter, level l, std::string_view event, nlohmann::json fields) {
    const auto held = limiter.allow();
    if (!held) return;
    fields["also_failed_since_last_line"] = *held;
    log(l, event, std::move(fields));
}

}  // namespace steadfast::app
