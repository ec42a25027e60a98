// What the secondary acknowledged, marked in the outbox: sending goes on at
// once, and the outbox is marked on the database thread soon after, at most
// every 10 ms per stream (a burst of acknowledgements costs one transaction,
// and the event loop is not woken per message). Queued marks are finished
// before exit; a mark lost to a crash only means that the secondary answers
// "duplicate" after the restart.
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "outbox.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace steadfast::primary {

class acknowledger {
public:
    acknowledger(boost::asio::any_io_executor ex, outbox& out, app::db_worker& worker)
        : ex_(std::move(ex)), out_(out), worker_(worker) {}

    /// `stream` is acknowledged up to `upto` (lower than before while a
    /// rewind resends: the outbox keeps the highest, and learns the latest).
    void acknowledged(const std::string& stream, std::uint64_t upto);
    /// `stream` retired: a last mark, then nothing of it stays in memory.
    void forget(const std::string& stream);
    /// At stop: every stream's last mark is queued now.
    void flush();

private:
    // Shared with the timer, so that it survives the stream's entry.
    struct mark {
        std::atomic<std::uint64_t> target{0};  // the highest seq acknowledged
        std::atomic<std::uint64_t> last{0};    // the latest acknowledgement's
        bool scheduled = false;
    };
    void schedule(const std::string& stream, const std::shared_ptr<mark>& t);
    void write(const std::string& stream, const std::shared_ptr<mark>& t);
    void failed(const std::string& stream, const std::string& error);

    boost::asio::any_io_executor ex_;
    outbox& out_;
    app::db_worker& worker_;
    std::map<std::string, std::shared_ptr<mark>> marks_;
    app::log_limiter failures_logged_;  // ack_failed (the database thread's and the flusher's)
};

}  // namespace steadfast::primary
