// What the secondary acknowledged, marked in the outbox: sending goes on at
// once, and the outbox is marked on the database thread soon after: every
// 10 ms at most, one job for every stream acknowledged since (a burst of
// acknowledgements on 16 streams costs one timer and one job, not 16, and
// the event loop is not woken per message). A write that fails (a full disk)
// is tried again a second later, with whatever was acknowledged since, until
// it is stored; a retired stream's mark too. Queued marks are finished before
// exit; a mark lost to a crash (or still failing at exit) only means that the
// secondary answers "duplicate" after the restart.
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "outbox.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

class acknowledger {
public:
    /// `retry`: how long after a failed write it is tried again.
    acknowledger(boost::asio::any_io_executor ex, outbox& out, app::db_worker& worker,
                 std::chrono::milliseconds retry = std::chrono::seconds(1))
        : out_(out), worker_(worker), timer_(std::move(ex)), retry_(retry) {}
    acknowledger(const acknowledger&) = delete;  // (life_ holds its address)
    acknowledger& operator=(const acknowledger&) = delete;

    /// `stream` is acknowledged up to `upto` (lower than before while a
    /// rewind resends: the outbox keeps the highest, and learns the latest).
    void acknowledged(const std::string& stream, std::uint64_t upto);
    /// `stream` retired: its mark, if not written yet, is queued now, and
    /// nothing of it stays in memory.
    void forget(const std::string& stream);
    /// At stop: every stream's last mark is queued now.
    void flush();
    /// The highest seq acknowledged on `stream` that this acknowledger still
    /// holds (0: none), stored or not: a stream starting again reads its
    /// position from the outbox, which is behind it while a write fails.
    std::uint64_t held(std::string_view stream) const;
    /// Streams whose marks are kept in memory (the active ones, and retired
    /// ones whose write failed and is not stored yet).
    std::size_t size() const noexcept { return marks_.size(); }

private:
    struct mark {
        std::uint64_t target = 0;   // the highest seq acknowledged
        std::uint64_t last = 0;     // the latest acknowledgement's
        std::uint64_t version = 0;  // the acknowledger's count when it last changed
        std::uint64_t stored = 0;   // the latest version known stored
        bool dirty = false;         // not queued for the database since it changed
        bool retired = false;       // forgotten, kept only until its last write is stored
    };
    struct write_one {
        std::string stream;
        std::uint64_t target, last, version;
        bool retired;
    };
    using writes = std::shared_ptr<const std::vector<write_one>>;
    /// Writes the dirty marks after `delay`, unless a write is due already.
    void arm(std::chrono::milliseconds delay);
    /// `at_stop`: flush()'s, whose failure is always logged.
    void write_dirty(bool at_stop = false);
    void set_dirty(std::string_view stream, mark& m);
    void write(std::vector<write_one> marks, bool at_stop = false);
    /// On the event loop, after a write: a failed one's marks are dirty again
    /// (unless something newer replaced them); a retired mark stored is gone.
    void after_write(const writes& w, bool ok);

    outbox& out_;
    app::db_worker& worker_;
    boost::asio::steady_timer timer_;  // armed while a mark is dirty
    std::chrono::milliseconds retry_;
    bool scheduled_ = false;
    std::uint64_t versions_ = 0;
    std::map<std::string, mark, std::less<>> marks_;
    std::vector<std::string> dirty_;  // the streams whose marks turned dirty since the last write_dirty()
    // ack_failed (from the database thread and the flusher, which may answer
    // after this object is gone)
    std::shared_ptr<app::log_limiter> failures_logged_ = std::make_shared<app::log_limiter>();
    // Handlers queued on the event loop (the timer's, a write's answer) ask
    // it whether this object is still there.
    std::shared_ptr<acknowledger*> life_ = std::make_shared<acknowledger*>(this);
};

}  // namespace steadfast::primary
