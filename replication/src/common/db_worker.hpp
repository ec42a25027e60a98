// The database thread: SQLite work runs here, never on the event loop.
//
// Group commit: every job queued while the previous group was committing runs
// in one transaction (each in a savepoint of its own), so one fsync covers
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

/// Why a job failed: the error (db_category(): SQLite's result code, or
/// db_job_threw for an exception of the job's own) and the whole message
/// (SQLite's, with what it names: the statement, the file).
struct db_failure {
    boost::system::error_code code;
    std::string what;
};
/// boost::system::result's value() on a failed job: throws db_error.
[[noreturn]] void throw_exception_from_error(const db_failure& f, const boost::source_location& loc);

/// A job's outcome: its value, or why it failed.
template <class R>
using db_result = boost::system::result<R, db_failure>;
/// What a failed job's log line says: its message (nullopt: it worked).
template <class R>
std::optional<std::string> failed(const db_result<R>& r) {
    if (r.has_value()) return std::nullopt;
    return r.error().what;
}

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
                job j;
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
                submit(std::move(j));
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
                job j;
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
                        if (alive.lock() && drop(id))
                            finish(db_result<R>(boost::system::in_place_error,
                                                db_failure{boost::asio::error::operation_aborted,
                                                           "cancelled before the database thread took it"}));
                    });
                }
                submit(std::move(j));
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
        submit(job{0, std::move(work), std::move(done), std::move(rolled_back)});
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
    struct job {
        std::uint64_t id = 0;  // async_run's, for a cancellation to find it (0: none)
        std::function<bool(database&)> work;
        std::function<void(const db_failure*)> done;  // nullptr: it worked
        std::function<void()> rolled_back;            // post()'s, may be empty
    };
    // A committed group on its way to its callers: answered after the flush
    // that covers it (owes_flush), or at once when nothing before it waits.
    struct committed {
        std::deque<job> jobs;
        std::vector<std::optional<db_failure>> errors;  // each job's own
        std::optional<db_failure> commit_error;         // the whole group's
        bool owes_flush = false;
    };
    void submit(job j);
    /// Removes job `id` if it is still queued (true: it will never run).
    bool drop(std::uint64_t id);
    void loop();
    void flusher_loop();
    /// Hands a committed group to its callers, in commit order.
    void release(committed c);
    static void answer(committed& c, const std::optional<db_failure>& flush_error);
    /// The database thread's first sight of a failed flush: no checkpoint may
    /// copy the log into the database file any more (not even at close).
    void after_flush_failed();
    db_failure flush_failure(int err) const;

    database& db_;
    flush_fn flush_;
    wal_sync_deferral deferral_;  // the database thread's; the flusher reads its fd
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<job> queue_;
    std::atomic<std::uint64_t> last_id_{0};
    std::shared_ptr<void> alive_ = std::make_shared<int>(0);  // weakly held by cancellation slots
    bool stopping_ = false;
    bool exited_ = false;  // the thread has left: a job submitted now is answered at once (shut_down)
    std::atomic<std::uint64_t> commits_{0}, jobs_{0}, work_ns_{0}, commit_ns_{0}, flushes_{0}, flush_ns_{0};
    // The flusher's side: groups committed and not yet answered, in order.
    std::mutex fm_;
    std::condition_variable fcv_;
    std::condition_variable idle_cv_;  // the flusher has answered all it was given
    std::deque<committed> to_flush_;
    bool flusher_busy_ = false;               // it holds groups it has not answered yet
    bool flusher_stopping_ = false;           // the database thread has left: drain, then leave
    std::optional<db_failure> flush_failed_;  // once set, every later job fails with it
    bool checkpoints_off_ = false;            // after_flush_failed() done (database thread only)
    std::thread flusher_;
    std::thread thread_;  // last: started once everything above exists
};

}  // namespace steadfast::app
