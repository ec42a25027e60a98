#include "readiness.hpp"

#include <nlohmann/json.hpp>

namespace steadfast::app {

namespace asio = boost::asio;

asio::awaitable<std::string> recheck_storage(storage_health& storage, db_worker& worker, asio::any_io_executor ex,
                                             std::size_t probe_bytes) {
    if (storage.disk_low()) co_return storage.low_message();
    if (!storage.commit_failing()) co_return std::string{};
    auto probe = [probe_bytes](database& db, bool&) {
        db.probe_write(probe_bytes);
        return true;
    };
    auto r = co_await worker.run<bool>(ex, std::move(probe));
    std::string err = r.has_error() ? r.error().what : std::string{};
    if (err.empty()) {
        worker.post(
            [](database& db) {
                db.touch();  // the probe's bytes go again
                return true;
            },
            [](const db_failure*) {});
        storage.commit_ok();
    } else {
        storage.commit_failed(err);
    }
    co_return err;
}

asio::awaitable<http::response> not_ready(std::string status, std::string error) {
    co_return http::response::json(503, nlohmann::json{{"status", status}, {"error", error}}.dump());
}

asio::awaitable<http::response> readiness(const char* not_ready, storage_health& storage, db_worker& worker,
                                          asio::any_io_executor ex, std::size_t probe_bytes) {
    if (not_ready) co_return http::response::json(503, nlohmann::json{{"status", not_ready}}.dump());
    if (storage.disk_low())
        co_return http::response::json(503, nlohmann::json{{"status", storage_health::low_disk_space},
                                                           {"available", storage.available()},
                                                           {"min_free_space", storage.min_free()}}
                                                .dump());
    // Awaited into a local: with g++ 12.2, `if (!(co_await f()).empty())`
    // here corrupted the frame's result (free(): invalid pointer at the end).
    const std::string failed = co_await recheck_storage(storage, worker, ex, probe_bytes);
    if (!failed.empty())
        co_return http::response::json(503, nlohmann::json{{"status", storage_health::storage_failed}}.dump());
    co_return http::response::json(200, "{\"status\":\"ready\"}");
}

}  // namespace steadfast::app
