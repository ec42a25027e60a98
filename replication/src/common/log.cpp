#include "log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <string>

namespace steadfast::app {

namespace {
std::string app_name = "steadfast";
std::shared_ptr<spdlog::logger> logger;
std::once_flag logger_made;  // an embedded node's first line may come from any of its threads
}  // namespace

void init_log(std::string_view app, level min) {
    app_name = std::string(app);
    if (!logger) {
        // A program embedding the nodes may have made it (spdlog's registry).
        logger = spdlog::get("steadfast");
    }
    if (!logger) {
        logger = spdlog::stderr_logger_mt("steadfast");
        // The message is a whole JSON object but for its leading fields.
        logger->set_pattern("{\"ts\":\"%Y-%m-%dT%H:%M:%S.%eZ\",\"level\":\"%l\",%v", spdlog::pattern_time_type::utc);
    }
    logger->set_level(min == level::debug  ? spdlog::level::debug
                      : min == level::info ? spdlog::level::info
                      : min == level::warn ? spdlog::level::warn
                                           : spdlog::level::err);
    logger->flush_on(spdlog::level::info);
}

void log(level l, std::string_view event, nlohmann::json fields) {
    std::call_once(logger_made, [] {
        if (!logger) init_log(app_name);
    });
    nlohmann::json line = {{"app", app_name}, {"event", event}};
    if (fields.is_object())
        for (auto& [k, v] : fields.items()) line[k] = std::move(v);
    std::string body = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    body.erase(0, 1);  // the pattern opened the object
    switch (l) {
        case level::debug:
            logger->debug("{}", body);
            break;
        case level::info:
            logger->info("{}", body);
            break;
        case level::warn:
            logger->warn("{}", body);
            break;
        case level::error:
            logger->error("{}", body);
            break;
    }
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
