// The database thread: SQLite work runs here, never on the event loop.
//
// Three parts, each with its own state: the jobs waiting (db_job_queue), the
// group runner (this class: the database thread), and the flusher
// (commit_flusher: the second thread, which answers the groups).
//
// Group commit: every job queued while the previous group was committing runs
// in one transaction (each in a savepoint of its own when there are several),
// so one fsync covers
// them all; each caller is answered only after that commit is on disk.
//
// The fsync runs beside the next group, not before it (with sync_mode::full):
// the database thread commits a group (its WAL frames written, wal_vfs.hpp's
// deferred sync) and goes on to the next one, while a second thread, the
// flusher, fdatasyncs the WAL and then answers every group committed before
// that flush began, in commit order. Nothing a job computed (a read included)
// leaves before the flush that covers it, so callers see what they saw when
// the commit itself waited for the disk, at the cost of one thread hand-off;
// the disk's flush no longer stops the database thread. A flush that fails
// fails its groups and every later job: what the log holds past the last good
// flush is unknown (Linux may drop the pages of a failed write-back), so the
// process must restart and recover from what the disk holds.
#pragma once

#include "commit_flusher.hpp"
#include "db_job.hpp"
#include "sqlite.hpp"
#include "wal_vfs.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>

namespace steadfast::app {

class db_worker {
public:
    /// Flushes a file to disk: 0, or the errno of the failure. The default
    /// is fdatasync(2); tests give one that blocks or fails.
    using flush_fn = std::function<int(int fd)>;
    explicit db_worker(database& db, flush_fn flush = {});
    ~db_worker();  // stop()
    /// Finishes the queued jobs (their completions are posted as usual), then
    /// joins the threads. Idempotent. Call it before destroying what queued
    /// jobs refer to; never from a job or its answer (std::logic_error).
    void stop();
    db_worker(const db_worker&) = delete;
    db_worker& operator=(const db_worker&) = delete;

    /// Runs `fn(db, keep)` on the database thread in the current group's
    /// transaction. Setting `keep = false` rolls back just this job's changes
    /// (its value is still delivered). A db_error thrown by `fn` fails the job.
    /// Completes on the caller's executor, after the commit.
    template <class R, class Fn>
    boost::asio::awaitable<db_result<R>> run(boost::asio::any_io_executor ex, Fn fn) {
        // The initiation captures only raw pointers: g++ 12 miscompiles
        // non-trivial captures of an initiation that use_awaitable moves into
        // its by-value coroutine parameter (a shared_ptr was released twice).
        struct state {
            boost::asio::any_io_executor ex;
            Fn fn;
        };
        auto* st = new state{std::move(ex), std::move(fn)};
        return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(db_result<R>)>(
            [this, st](auto handler) {
                std::unique_ptr<state> owned(st);
                using H = decltype(handler);
                auto h = std::make_shared<H>(std::move(handler));
                auto value = std::make_shared<std::optional<R>>();
                db_job j;
                j.work = [fn = std::move(owned->fn), value](database& db) mutable {
                    bool keep = true;
                    value->emplace(fn(db, keep));
                    return keep;
                };
                j.done = [h, value, ex = owned->ex](const db_failure* err) {
                    db_result<R> r = err ? db_result<R>(boost::system::in_place_error, *err)
                                         : db_result<R>(boost::system::in_place_value, std::move(**value));
                    auto hex = boost::asio::get_associated_executor(*h, ex);
                    boost::asio::post(hex, boost::asio::append(std::move(*h), std::move(r)));
                };
                submit(j);
            },
            boost::asio::use_awaitable);
    }

    /// The same, with any completion token: completion signature
    /// `void(db_result<R>)`, on the handler's associated executor (else
    /// `ex`), never inline, after the commit. Per-operation cancellation
    /// (terminal, partial and total alike): a job the database thread has not
    /// taken yet is dropped, never runs, and completes with a db_failure of
    /// `operation_aborted`; a job already in its group completes as usual (a
    /// transaction is not cut short). The cancellation slot is cleared on the
    /// handler's executor before the handler runs, so emit cancellations from
    /// that executor (as Asio's rules for slots ask).
    // The default token: deferred (any_io_executor has no default of its own
    // in Boost 1.81), which a coroutine can co_await.
    template <class R, class Fn, class CompletionToken = boost::asio::deferred_t>
    auto async_run(boost::asio::any_io_executor ex, Fn fn, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(db_result<R>)>(
            [this](auto handler, boost::asio::any_io_executor run_ex, Fn job_fn) {
                using H = decltype(handler);
                auto slot = boost::asio::get_associated_cancellation_slot(handler);
                auto hex = boost::asio::get_associated_executor(handler, run_ex);
                auto h = std::make_shared<H>(std::move(handler));
                auto value = std::make_shared<std::optional<R>>();
                // Completes on the handler's executor: the slot is cleared
                // there first, then the handler runs.
                // Outstanding work on the executor until the answer is posted
                // (the event loop does not run out of work meanwhile).
                auto work = boost::asio::prefer(hex, boost::asio::execution::outstanding_work.tracked);
                auto finish = [h, work, slot](db_result<R> r) mutable {
                    boost::asio::post(work, [h, slot, r = std::move(r)]() mutable {
                        if (slot.is_connected()) slot.clear();
                        std::move (*h)(std::move(r));
                    });
                };
                db_job j;
                j.id = ++last_id_;
                j.work = [fn = std::move(job_fn), value](database& db) mutable {
                    bool keep = true;
                    value->emplace(fn(db, keep));
                    return keep;
                };
                j.done = [finish, value](const db_failure* err) mutable {
                    finish(err ? db_result<R>(boost::system::in_place_error, *err)
                               : db_result<R>(boost::system::in_place_value, std::move(**value)));
                };
                if (slot.is_connected()) {
                    // A weak hold on the worker: a cancellation after it is
                    // gone finds nothing to drop.
                    slot.assign([this, alive = std::weak_ptr<void>(alive_), id = j.id,
                                 finish](boost::asio::cancellation_type type) mutable {
                        if (type == boost::asio::cancellation_type::none) return;
                        if (alive.lock() && queue_.drop(id))
                            finish(db_result<R>(boost::system::in_place_error,
                                                db_failure{boost::asio::error::operation_aborted,
                                                           "cancelled before the database thread took it"}));
                    });
                }
                submit(j);
            },
            token, std::move(ex), std::move(fn));
    }

    /// From any thread: runs `work(db)` in the next group and then, once its
    /// commit is on disk, `done(failure)` (null on success; else why, as a
    /// value: db_category()'s code, SQLITE_IOERR_FSYNC when the disk failed
    /// to flush, and the message) on the database thread or the flusher's,
    /// in submission order. For producers
    /// that are not coroutines, such as the stdin reader. `rolled_back`, when
    /// given, runs on the database thread as soon as the job's changes are
    /// known not to commit (its own failure, or its group's failed COMMIT),
    /// before the next group runs; `done` may come later, behind the flush
    /// of the groups before.
    void post(std::function<bool(database&)> work, std::function<void(const db_failure*)> done,
              std::function<void()> rolled_back = {}) {
        db_job j{0, std::move(work), std::move(done), std::move(rolled_back)};
        submit(j);
    }

    /// Jobs waiting (for metrics and back-pressure).
    std::size_t queued() const;
    /// What the threads have done so far (for metrics and benchmarks): group
    /// commits, the jobs they held, the time spent running jobs and in COMMIT
    /// (the WAL write; the fsync when it is not deferred), and the flusher's
    /// fsyncs (each covers every group committed before it began) and their
    /// time.
    struct stats {
        std::uint64_t commits = 0, jobs = 0, flushes = 0;
        double work_seconds = 0, commit_seconds = 0, flush_seconds = 0;
    };
    stats get_stats() const noexcept;

private:
    /// Queues `j` (moved from); answered shut_down at once if the database
    /// thread has left.
    void submit(db_job& j);
    void loop();
    struct group_statements;  // the transaction's own statements, prepared once
    /// Runs a group in one transaction, each job in a savepoint of its own
    /// (a job alone: the transaction is its own); each job's error and the
    /// group's, as values.
    db_committed run_group(std::deque<db_job> group, group_statements& sql);
    /// The database thread's first sight of a failed flush: no checkpoint may
    /// copy the log into the database file any more (not even at close).
    void after_flush_failed();
    db_failure flush_failure(int err) const;

    database& db_;
    wal_sync_deferral deferral_;  // the database thread's; the flusher reads its fd
    db_job_queue queue_;
    std::atomic<std::uint64_t> last_id_{0};
    std::shared_ptr<void> alive_ = std::make_shared<int>(0);  // weakly held by cancellation slots
    std::atomic<std::uint64_t> commits_{0}, jobs_{0}, work_ns_{0}, commit_ns_{0};
    bool checkpoints_off_ = false;  // after_flush_failed() done (database thread only)
    commit_flusher flusher_;        // its thread starts here, before the database thread
    std::thread thread_;            // last: started once everything above exists
};

}  // namespace steadfast::app
