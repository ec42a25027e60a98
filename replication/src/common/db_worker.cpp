#include "db_worker.hpp"

#include <common/thread_name.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <system_error>

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

db_worker::db_worker(database& db, flush_fn flush)
    : db_(db), flush_(flush ? std::move(flush) : flush_fn(fdatasync_errno)) {
    flusher_ = std::thread([this] { flusher_loop(); });
    try {
        thread_ = std::thread([this] { loop(); });
    } catch (...) {
        {
            std::lock_guard l(fm_);
            flusher_stopping_ = true;
        }
        fcv_.notify_one();
        flusher_.join();
        throw;
    }
}

db_worker::~db_worker() {
    stop();
}

void db_worker::stop() {
    // From a job's answer on the flusher thread, stop() would wait for that
    // very thread.
    if (std::this_thread::get_id() == flusher_.get_id() || std::this_thread::get_id() == thread_.get_id())
        throw std::logic_error("db_worker::stop() called from one of its own threads (a job or its answer)");
    {
        std::lock_guard l(m_);
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    {
        std::lock_guard l(fm_);
        flusher_stopping_ = true;
    }
    fcv_.notify_one();
    if (flusher_.joinable()) flusher_.join();
}

db_worker::stats db_worker::get_stats() const noexcept {
    auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    stats s;
    s.commits = get(commits_);
    s.jobs = get(jobs_);
    s.flushes = get(flushes_);
    s.work_seconds = static_cast<double>(get(work_ns_)) / 1e9;
    s.commit_seconds = static_cast<double>(get(commit_ns_)) / 1e9;
    s.flush_seconds = static_cast<double>(get(flush_ns_)) / 1e9;
    return s;
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
    // Commits' syncs are the flusher's; a checkpoint still flushes the WAL
    // before it writes the database file (wal_vfs.hpp).
    wal_sync_deferral::install(&deferral_);
    // The transaction's own statements, prepared once (on this thread, and
    // finalized on it when the loop ends, before the database closes).
    struct prepared_sql {
        const char* sql;
        std::optional<statement> s{};
    };
    prepared_sql begin_sql{"BEGIN IMMEDIATE"}, savepoint_sql{"SAVEPOINT steadfast_job"},
        release_sql{"RELEASE steadfast_job"}, rollback_to_sql{"ROLLBACK TO steadfast_job"}, commit_sql{"COMMIT"};
    auto exec = [this](prepared_sql& p) {
        if (!p.s) p.s.emplace(db_.handle(), p.sql);
        db_.exec(*p.s, p.sql);
    };
    for (;;) {
        std::deque<job> group;
        {
            std::unique_lock l(m_);
            cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) {  // stopping, nothing left
                // Every answer out before a late job is answered shut_down
                // (submit): they keep their order.
                l.unlock();
                {
                    std::unique_lock fl(fm_);
                    idle_cv_.wait(fl, [&] { return to_flush_.empty() && !flusher_busy_; });
                }
                l.lock();
                if (queue_.empty()) {
                    exited_ = true;
                    break;
                }
            }
            group.swap(queue_);
        }
        std::vector<std::optional<db_failure>> errors(group.size());
        {
            // After a failed flush nothing runs: what the log holds is unknown.
            std::unique_lock l(fm_);
            if (flush_failed_) {
                const db_failure f = *flush_failed_;
                l.unlock();
                after_flush_failed();
                for (auto& j : group)
                    if (j.rolled_back) j.rolled_back();
                release(committed{std::move(group), std::move(errors), f, false});
                continue;
            }
        }
        std::optional<db_failure> commit_error;
        using clock = std::chrono::steady_clock;
        const auto started = clock::now();
        auto committing = started;
        // While the group runs, no commit but its own COMMIT: a job whose
        // statement ended the transaction (ROLLBACK, INSERT OR ROLLBACK, a
        // COMMIT of its own) must not go on writing in autocommit mode, one
        // statement at a time, behind the group's back.
        bool committing_group = false;
        sqlite3_commit_hook(
            db_.handle(), [](void* ours) -> int { return *static_cast<bool*>(ours) ? 0 : 1; }, &committing_group);
        try {
            exec(begin_sql);
            for (std::size_t i = 0; i < group.size(); ++i) {
                exec(savepoint_sql);
                try {
                    const bool keep = group[i].work(db_);
                    // The job ended the transaction and returned as if
                    // nothing happened: the jobs before it went with it
                    // (the catch below fails the group).
                    if (sqlite3_get_autocommit(db_.handle()))
                        throw db_error(std::string("this job ") + transaction_ended_text +
                                           "; nothing of its group commit is stored",
                                       db_apply_failed);
                    if (!keep) exec(rollback_to_sql);
                } catch (const std::exception& e) {
                    // A full disk or an I/O error can make SQLite roll the
                    // whole transaction back: every job of the group is
                    // undone, and fails with this error (not with the
                    // missing savepoint's).
                    errors[i] = failure_of(e);
                    if (sqlite3_get_autocommit(db_.handle())) {
                        // Ended by the job's own code, not by the storage:
                        // the other jobs fail for its sake, and say so.
                        if (errors[i]->code == make_db_error_code(db_apply_failed))
                            throw db_error(std::string("another job of this group commit ") + transaction_ended_text +
                                               "; nothing of this job was stored",
                                           make_db_error_code(db_group_ended));
                        throw db_error(e.what(), errors[i]->code);
                    }
                    exec(rollback_to_sql);
                } catch (...) {
                    // Not a std::exception (an embedding program's throw 42):
                    // the job fails, the thread goes on.
                    errors[i] =
                        db_failure{make_db_error_code(db_job_threw), "the job threw something not a std::exception"};
                    if (sqlite3_get_autocommit(db_.handle())) throw db_error(errors[i]->what, errors[i]->code);
                    exec(rollback_to_sql);
                }
                exec(release_sql);
            }
            committing = clock::now();
            committing_group = true;
            exec(commit_sql);
            committing_group = false;
            commits_.fetch_add(1, std::memory_order_relaxed);
            jobs_.fetch_add(group.size(), std::memory_order_relaxed);
        } catch (const std::exception& e) {
            commit_error = failure_of(e);
            try {
                db_.exec("ROLLBACK");
            } catch (...) {
            }
        }
        sqlite3_commit_hook(db_.handle(), nullptr, nullptr);
        {
            const auto ended = clock::now();
            auto ns = [](clock::duration d) { return static_cast<std::uint64_t>(std::chrono::nanoseconds(d).count()); };
            if (committing == started) committing = ended;  // failed before COMMIT: all of it was work
            work_ns_.fetch_add(ns(committing - started), std::memory_order_relaxed);
            commit_ns_.fetch_add(ns(ended - committing), std::memory_order_relaxed);
        }
        // A flush before a checkpoint's database write that failed (in this
        // COMMIT, whose result SQLite's automatic checkpoint does not change):
        // what was committed since the last good flush is unknown.
        if (const int err = deferral_.failed_errno(); err != 0) {
            // Even when the group failed anyway (the failed flush made SQLite
            // roll it back): no later group may run.
            const db_failure f = flush_failure(err);
            if (!commit_error) commit_error = f;
            {
                std::lock_guard l(fm_);
                if (!flush_failed_) flush_failed_ = f;
            }
            after_flush_failed();
        }
        // Told on this thread before the next group runs (the --stdin reader
        // keeps what it stores a prefix of its input by it).
        for (std::size_t i = 0; i < group.size(); ++i)
            if ((errors[i] || commit_error) && group[i].rolled_back) group[i].rolled_back();
        // A failed commit owes nothing (SQLite ignores its frames), but its
        // answer still waits behind the groups before it.
        const bool owes = deferral_.take_owed() && !commit_error;
        release(committed{std::move(group), std::move(errors), std::move(commit_error), owes});
    }
    wal_sync_deferral::install(nullptr);
    bool failed = false;
    {
        std::lock_guard l(fm_);
        failed = flush_failed_.has_value();
    }
    if (failed) after_flush_failed();  // before the connection closes: no checkpoint then
}

void db_worker::answer(committed& c, const std::optional<db_failure>& flush_error) {
    for (std::size_t i = 0; i < c.jobs.size(); ++i) {
        // A job's own error first (it failed whatever came after), then the
        // commit's, then the flush's.
        const std::optional<db_failure>& err =
            c.errors[i] ? c.errors[i] : (c.commit_error ? c.commit_error : flush_error);
        c.jobs[i].done(err ? &*err : nullptr);
    }
}

db_failure db_worker::flush_failure(int err) const {
    return db_failure{make_db_error_code(SQLITE_IOERR_FSYNC),
                      "cannot flush \"" + db_.path() + "-wal\" to disk: " + std::generic_category().message(err) +
                          "; commits since the last flush may not be on disk, so every write fails until the "
                          "process restarts and recovers from what the disk holds"};
}

void db_worker::after_flush_failed() {
    if (checkpoints_off_) return;
    checkpoints_off_ = true;
    sqlite3_wal_autocheckpoint(db_.handle(), 0);
    sqlite3_db_config(db_.handle(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

void db_worker::release(committed c) {
    {
        std::lock_guard l(fm_);
        // After a failed flush nothing is answered from here: a group that
        // read what the lost flush covered fails with it (the flusher answers).
        if (c.owes_flush || flusher_busy_ || !to_flush_.empty() || flush_failed_) {
            to_flush_.push_back(std::move(c));
            fcv_.notify_one();
            return;
        }
    }
    // Nothing to flush and nothing before it unanswered (sync_mode::off, a
    // group that wrote nothing): answered from here, without a hand-off.
    answer(c, std::nullopt);
}

void db_worker::flusher_loop() {
    name_this_thread("sf-db-flush");
    for (;;) {
        std::deque<committed> batch;
        std::optional<db_failure> failed;
        {
            std::unique_lock l(fm_);
            fcv_.wait(l, [&] { return flusher_stopping_ || !to_flush_.empty(); });
            if (to_flush_.empty()) return;  // stopping, all answered
            batch.swap(to_flush_);
            flusher_busy_ = true;
            failed = flush_failed_;
        }
        const bool owed = std::any_of(batch.begin(), batch.end(), [](const committed& c) { return c.owes_flush; });
        // After a failed flush, a later one proves nothing (the pages it
        // dropped are not written again): those groups fail too.
        if (owed && !failed) {
            using clock = std::chrono::steady_clock;
            const auto t0 = clock::now();
            const int err = flush_(deferral_.fd());
            flushes_.fetch_add(1, std::memory_order_relaxed);
            flush_ns_.fetch_add(static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count()),
                                std::memory_order_relaxed);
            // A failure heard by the database thread's flush before a
            // checkpoint counts too: this flush may have found nothing left
            // to write after it.
            const int any = err != 0 ? err : deferral_.failed_errno();
            if (any != 0) {
                deferral_.fail(any);  // the database thread's flushes before checkpoints refuse too
                failed = flush_failure(any);
                std::lock_guard l(fm_);
                if (!flush_failed_) flush_failed_ = failed;
                failed = flush_failed_;
            }
        }
        for (auto& c : batch) answer(c, failed);
        std::lock_guard l(fm_);
        flusher_busy_ = false;
        if (to_flush_.empty()) idle_cv_.notify_all();
    }
}

}  // namespace steadfast::app
