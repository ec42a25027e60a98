// What db_worker's parts hand each other: a job, its failure as a value, a
// committed group on its way to its callers, and the queue of jobs waiting
// for the database thread.
#pragma once

#include <boost/assert/source_location.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::app {

class database;

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

/// One piece of work for the database thread.
struct db_job {
    std::uint64_t id = 0;  // async_run's, for a cancellation to find it (0: none)
    std::function<bool(database&)> work;
    std::function<void(const db_failure*)> done;  // nullptr: it worked
    std::function<void()> rolled_back;            // post()'s, may be empty
};

/// A committed group on its way to its callers: answered after the flush
/// that covers it (owes_flush), or at once when nothing before it waits.
struct db_committed {
    std::deque<db_job> jobs;
    std::vector<std::optional<db_failure>> errors;  // each job's own
    std::optional<db_failure> commit_error;         // the whole group's
    bool owes_flush = false;

    /// Each job's answer: its own error first (it failed whatever came
    /// after), then the commit's, then `flush_error`.
    void answer(const std::optional<db_failure>& flush_error);
};

/// The jobs waiting for the database thread, from any thread. Once closed
/// (the thread has left) it takes nothing more.
class db_job_queue {
public:
    /// Queues `j` (moved from) and wakes the taker; false, `j` untouched,
    /// once closed.
    bool push(db_job& j);
    /// Removes job `id` if it is still waiting (true: it will never run).
    bool drop(std::uint64_t id);
    std::size_t size() const;
    /// Waits for jobs and takes them all, in order; empty once stop() was
    /// called and nothing waits.
    std::deque<db_job> take();
    /// take() no longer waits for more once the queue is empty.
    void stop();
    /// Closes it if nothing waits (true); false if a job came meanwhile.
    bool close_if_empty();

private:
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<db_job> jobs_;
    bool stopping_ = false;
    bool closed_ = false;
};

}  // namespace steadfast::app
