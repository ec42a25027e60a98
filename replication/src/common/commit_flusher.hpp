// db_worker's second thread: it flushes the WAL beside the next group and
// answers the groups committed before each flush, in commit order.
//
// The database thread commits a group (its WAL frames written, its sync left
// to this part by wal_sync_deferral) and hands it over with release(); this
// thread fdatasyncs the WAL once for everything handed over since its last
// flush began, then answers those groups. A group that owes no flush and has
// nothing unanswered before it is answered at once, on the releasing thread.
// A flush that fails fails its groups and every later one: what the log
// holds past the last good flush is unknown.
#pragma once

#include "db_job.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace steadfast::app {

class wal_sync_deferral;

class commit_flusher {
public:
    /// Flushes a file to disk: 0, or the errno of the failure.
    using flush_fn = std::function<int(int fd)>;
    /// What a failed flush (its errno) makes every job fail with.
    using describe_fn = std::function<db_failure(int err)>;
    /// Starts the thread. `deferral` is the database thread's: its
    /// descriptor is what is flushed, and a failure either side hears is
    /// shared through it.
    commit_flusher(wal_sync_deferral& deferral, flush_fn flush, describe_fn describe);
    ~commit_flusher();  // stop()
    commit_flusher(const commit_flusher&) = delete;
    commit_flusher& operator=(const commit_flusher&) = delete;

    /// Answers what it was given (flushing as needed), then joins the
    /// thread. Idempotent.
    void stop();
    /// Hands a committed group to its callers, in commit order.
    void release(db_committed c);
    /// Waits until every group released so far has been answered.
    void wait_idle();
    /// The failure every later job fails with, once a flush failed.
    std::optional<db_failure> failure() const;
    /// Records a failed flush the database thread heard (before a
    /// checkpoint), unless one is recorded already.
    void fail(const db_failure& f);
    std::thread::id thread_id() const noexcept { return thread_.get_id(); }
    /// Flushes so far, and their time.
    std::uint64_t flushes() const noexcept { return flushes_.load(std::memory_order_relaxed); }
    std::uint64_t flush_ns() const noexcept { return flush_ns_.load(std::memory_order_relaxed); }

private:
    void loop();

    wal_sync_deferral& deferral_;
    flush_fn flush_;
    describe_fn describe_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::condition_variable idle_cv_;  // everything given has been answered
    std::deque<db_committed> to_flush_;
    bool busy_ = false;      // it holds groups it has not answered yet
    bool stopping_ = false;  // the database thread has left: drain, then leave
    std::optional<db_failure> failed_;
    std::atomic<std::uint64_t> flushes_{0}, flush_ns_{0};
    std::thread thread_;  // last: started once everything above exists
};

}  // namespace steadfast::app
