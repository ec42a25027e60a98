// Whether the outbox can take a write, and what the log and the series say
// about it: free space above the watermark (storage_health), and the last
// commit worked (false from a failed one until a write succeeds). Failed
// publishes are logged at most once a second (a client retrying at once
// would write thousands of lines a second) and counted in the line that says
// the storage recovered. The daemon's intake and primary_node share it.
#pragma once

#include <common/log.hpp>
#include <common/storage_health.hpp>
#include <primary/metrics.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace steadfast::primary {

class outbox_health {
public:
    /// What a refused publish becomes, for the log's notes: the daemon's
    /// HTTP answers, or an embedding program's error codes.
    struct notes {
        std::string failed;    // e.g. "answered 503, nothing stored"
        std::string disk_low;  // e.g. "publishes are answered 507 and /ready 503 until space is freed"
    };
    outbox_health(boost::asio::any_io_executor ex, const std::string& dir, std::uint64_t min_free, metrics& m, notes n);
    void start() { storage_.start(); }
    void stop() { storage_.stop(); }

    /// A publish's commit failed (checks the watermark again).
    void publish_failed(const std::string& stream, const std::string& error);
    /// A write to the outbox succeeded: after a failure, say that it works
    /// again (once).
    void works() { storage_.commit_ok(); }
    app::storage_health& storage() noexcept { return storage_; }

private:
    // Once a transition: a disk under the watermark, or a failed commit;
    // then recovered, counting the publishes refused meanwhile.
    void changed(bool ok, const std::string& why);

    metrics& m_;
    notes notes_;
    app::storage_health storage_;
    std::uint64_t failed_ = 0;          // since the last recovery
    app::log_limiter failures_logged_;  // publish_failed lines
};

}  // namespace steadfast::primary
