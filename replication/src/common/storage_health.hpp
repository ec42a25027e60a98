// Whether a daemon's storage can take a write: a free-space watermark on the
// data directory's filesystem (statvfs, checked every second, like
// Elasticsearch's flood-stage watermark) and the outcome of the last commit.
// Owned by the io thread. It decides and reports transitions; the owner logs
// them, answers /ready and refuses writes while it is not ok.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace steadfast::app {

/// Bytes an unprivileged writer may still use on the filesystem holding
/// `dir` (statvfs: f_bavail * f_frsize), or nullopt with `error` set.
std::optional<std::uint64_t> available_bytes(const std::string& dir, std::string& error);

class storage_health {
public:
    struct settings {
        std::string dir;                        // the data directory
        std::uint64_t min_free = 0;             // 0: no watermark
        std::chrono::milliseconds every{1000};  // how often the watermark is checked
        // Free bytes on dir's filesystem; tests pass their own.
        std::function<std::optional<std::uint64_t>(const std::string&, std::string&)> free_space = available_bytes;
    };
    /// The words for a state that is not ok, in /health, /ready and the logs
    /// of both daemons (one home: operators' alerts match them).
    static constexpr const char* low_disk_space = "low_disk_space";
    static constexpr const char* storage_failed = "storage_failed";
    /// Called on every change of ok(), with why when it turned false:
    /// low_disk_space or the failed commit's error.
    using on_change = std::function<void(bool ok, const std::string& why)>;

    storage_health(boost::asio::any_io_executor ex, settings s, on_change cb);

    /// Checks the watermark now, then every `every` until stop().
    void start();
    void stop();

    bool ok() const noexcept { return !disk_low_ && !commit_failing_; }
    bool disk_low() const noexcept { return disk_low_; }
    bool commit_failing() const noexcept { return commit_failing_; }
    /// "ok", low_disk_space or storage_failed (a full disk named first).
    const char* state() const noexcept { return disk_low_ ? low_disk_space : commit_failing_ ? storage_failed : "ok"; }
    /// As of the last check (0 before one, or when statvfs failed).
    std::uint64_t available() const noexcept { return available_; }
    std::uint64_t min_free() const noexcept { return s_.min_free; }

    /// Checks the watermark now (after a failed commit, say); returns disk_low().
    /// Also samples available() with no watermark (for metrics).
    bool check_disk();
    /// disk_low(), checked again now when the free space was within twice the
    /// watermark at the last check (a burst of writes must not pass a
    /// watermark sampled a second ago; far above it, no system call).
    bool disk_low_now();
    /// A commit failed: not ok until one works; the watermark is checked again now.
    void commit_failed(const std::string& error);
    void commit_ok();

    /// Why writes are refused while disk_low(), for an answer or a log line.
    std::string low_message() const;
    /// The fields of the storage_failed line an owner logs when ok() turned
    /// false with `why` (as on_change gives it): the error, and under the
    /// watermark the free space and the watermark.
    nlohmann::json failure_fields(const std::string& why) const;

private:
    void arm();
    void update(bool disk_low, bool commit_failing, const std::string& why);

    settings s_;
    on_change cb_;
    boost::asio::steady_timer timer_;
    bool disk_low_ = false, commit_failing_ = false, stopped_ = false;
    std::uint64_t available_ = 0;
};

}  // namespace steadfast::app
