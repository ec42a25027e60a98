#include "db_worker.hpp"

#include <common/thread_name.hpp>

#include <algorithm>
#include <chrono>
#include <optional>

namespace steadfast::app {

namespace {
// A job's exception as a failure: a database error keeps SQLite's code.
db_failure failure_of(const std::exception& e) {
    if (const auto* d = dynamic_cast<const db_error*>(&e)) return {d->code(), e.what()};
    // A job's own error code (an embedding program's writes): kept, unless
    // it says "no error" (the job still failed).
    if (const auto* s = dynamic_cast<const boost::system::system_error*>(&e); s && s->code())
        return {s->code(), e.what()};
    return {make_db_error_code(db_job_threw), e.what()};
}
}  // namespace

void throw_exception_from_error(const db_failure& f, const boost::source_location&) {
    throw db_error(f.what, f.code);
}

db_worker::db_worker(database& db) : db_(db), thread_([this] { loop(); }) {}

db_worker::~db_worker() {
    stop();
}

void db_worker::stop() {
    {
        std::lock_guard l(m_);
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
}

db_worker::stats db_worker::get_stats() const noexcept {
    auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    return {get(commits_), get(jobs_), static_cast<double>(get(work_ns_)) / 1e9,
            static_cast<double>(get(commit_ns_)) / 1e9};
}

std::size_t db_worker::queued() const {
    std::lock_guard l(m_);
    return queue_.size();
}

void db_worker::submit(job j) {
    {
        std::lock_guard l(m_);
        if (!exited_) {
            queue_.push_back(std::move(j));
            cv_.notify_one();
            return;
        }
    }
    // The thread has stopped: nothing would ever run it.
    // Answered at once rather than never (a caller would wait for good).
    const db_failure f{boost::asio::error::shut_down, "the database thread has stopped"};
    j.done(&f);
}

bool db_worker::drop(std::uint64_t id) {
    std::lock_guard l(m_);
    const auto it = std::find_if(queue_.begin(), queue_.end(), [id](const job& j) { return j.id == id; });
    if (it == queue_.end()) return false;
    queue_.erase(it);
    return true;
}

void db_worker::loop() {
    name_this_thread("sf-database");
    for (;;) {
        std::deque<job> group;
        {
            std::unique_lock l(m_);
            cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) {  // stopping, nothing left
                exited_ = true;
                return;
            }
            group.swap(queue_);
        }
        std::vector<std::optional<db_failure>> errors(group.size());
        std::optional<db_failure> commit_error;
        using clock = std::chrono::steady_clock;
        const auto started = clock::now();
        auto committing = started;
        try {
            db_.exec("BEGIN IMMEDIATE");
            for (std::size_t i = 0; i < group.size(); ++i) {
                db_.exec("SAVEPOINT job");
                try {
                    const bool keep = group[i].work(db_);
                    if (!keep) db_.exec("ROLLBACK TO job");
                } catch (const std::exception& e) {
                    // A full disk or an I/O error can make SQLite roll the
                    // whole transaction back: every job of the group is
                    // undone, and fails with this error (not with the
                    // missing savepoint's).
                    errors[i] = failure_of(e);
                    if (sqlite3_get_autocommit(db_.handle())) throw db_error(e.what(), errors[i]->code);
                    db_.exec("ROLLBACK TO job");
                } catch (...) {
                    // Not a std::exception (an embedding program's throw 42):
                    // the job fails, the thread goes on.
                    errors[i] =
                        db_failure{make_db_error_code(db_job_threw), "the job threw something not a std::exception"};
                    if (sqlite3_get_autocommit(db_.handle())) throw db_error(errors[i]->what, errors[i]->code);
                    db_.exec("ROLLBACK TO job");
                }
                db_.exec("RELEASE job");
            }
            committing = clock::now();
            db_.exec("COMMIT");
            commits_.fetch_add(1, std::memory_order_relaxed);
            jobs_.fetch_add(group.size(), std::memory_order_relaxed);
        } catch (const std::exception& e) {
            commit_error = failure_of(e);
            try {
                db_.exec("ROLLBACK");
            } catch (...) {
            }
        }
        {
            const auto ended = clock::now();
            auto ns = [](clock::duration d) { return static_cast<std::uint64_t>(std::chrono::nanoseconds(d).count()); };
            if (committing == started) committing = ended;  // failed before COMMIT: all of it was work
            work_ns_.fetch_add(ns(committing - started), std::memory_order_relaxed);
            commit_ns_.fetch_add(ns(ended - committing), std::memory_order_relaxed);
        }
        for (std::size_t i = 0; i < group.size(); ++i) {
            // A job's own error first (it failed whatever came after).
            const std::optional<db_failure>& err = errors[i] ? errors[i] : commit_error;
            group[i].done(err ? &*err : nullptr);
        }
    }
}

}  // namespace steadfast::app
