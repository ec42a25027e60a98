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

db_worker::db_worker(database& db, flush_fn flush)
    : db_(db), flusher_(deferral_, flush ? std::move(flush) : flush_fn(fdatasync_errno), [this](int err) {
          return flush_failure(err);
      }) {
    try {
        thread_ = std::thread([this] { loop(); });
    } catch (...) {
        flusher_.stop();
        throw;
    }
}

db_worker::~db_worker() {
    stop();
}

void db_worker::stop() {
    // From a job's answer on the flusher thread, stop() would wait for that
    // very thread.
    if (std::this_thread::get_id() == flusher_.thread_id() || std::this_thread::get_id() == thread_.get_id())
        throw std::logic_error("db_worker::stop() called from one of its own threads (a job or its answer)");
    queue_.stop();
    if (thread_.joinable()) thread_.join();
    flusher_.stop();
}

db_worker::stats db_worker::get_stats() const noexcept {
    auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    stats s;
    s.commits = get(commits_);
    s.jobs = get(jobs_);
    s.flushes = flusher_.flushes();
    s.work_seconds = static_cast<double>(get(work_ns_)) / 1e9;
    s.commit_seconds = static_cast<double>(get(commit_ns_)) / 1e9;
    s.flush_seconds = static_cast<double>(flusher_.flush_ns()) / 1e9;
    return s;
}

std::size_t db_worker::queued() const {
    return queue_.size();
}

void db_worker::submit(db_job& j) {
    if (queue_.push(j)) return;
    // The thread has stopped: nothing would ever run it.
    // Answered at once rather than never (a caller would wait for good).
    const db_failure f{boost::asio::error::shut_down, "the database thread has stopped"};
    j.done(&f);
}

// The transaction's own statements, prepared once (on the database thread,
// and finalized on it when its loop ends, before the database closes).
struct db_worker::group_statements {
    struct prepared {
        const char* sql;
        std::optional<statement> s{};
    };
    prepared begin{"BEGIN IMMEDIATE"}, savepoint{"SAVEPOINT steadfast_job"}, release{"RELEASE steadfast_job"},
        rollback_to{"ROLLBACK TO steadfast_job"}, rollback{"ROLLBACK"}, commit{"COMMIT"};
    void exec(database& db, prepared& p) {
        if (!p.s) p.s.emplace(db.handle(), p.sql);
        db.exec(*p.s, p.sql);
    }
};

void db_worker::loop() {
    name_this_thread("sf-database");
    // Commits' syncs are the flusher's; a checkpoint still flushes the WAL
    // before it writes the database file (wal_vfs.hpp).
    wal_sync_deferral::install(&deferral_);
    {
        group_statements sql;  // finalized at the end of this block, on this thread
        for (;;) {
            std::deque<db_job> group = queue_.take();
            if (group.empty()) {  // stopping, nothing left
                // Every answer out before a late job is answered shut_down
                // (submit): they keep their order.
                flusher_.wait_idle();
                if (queue_.close_if_empty()) break;
                continue;
            }
            if (std::optional<db_failure> f = flusher_.failure()) {
                // After a failed flush nothing runs: what the log holds is unknown.
                after_flush_failed();
                for (auto& j : group)
                    if (j.rolled_back) j.rolled_back();
                const std::size_t n = group.size();
                flusher_.release(
                    db_committed{std::move(group), std::vector<std::optional<db_failure>>(n), std::move(f), false});
                continue;
            }
            flusher_.release(run_group(std::move(group), sql));
        }
    }
    wal_sync_deferral::install(nullptr);
    if (flusher_.failure()) after_flush_failed();  // before the connection closes: no checkpoint then
}

db_committed db_worker::run_group(std::deque<db_job> group, group_statements& sql) {
    std::vector<std::optional<db_failure>> errors(group.size());
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
    // A group of one job needs no savepoint: the transaction is the job's
    // own, and rolling it back undoes just that job. (A savepoint's journal
    // is kept in memory only up to 64 KiB, then spills to a temporary file:
    // the secondary's requests, a group each, wrote some 25 pages there.)
    const bool alone = group.size() == 1;
    bool undone = false;  // alone, and rolled back: nothing to commit
    auto undo = [&] {
        if (!alone) return sql.exec(db_, sql.rollback_to);
        sql.exec(db_, sql.rollback);
        undone = true;
    };
    try {
        sql.exec(db_, sql.begin);
        for (std::size_t i = 0; i < group.size(); ++i) {
            if (!alone) sql.exec(db_, sql.savepoint);
            try {
                const bool keep = group[i].work(db_);
                // The job ended the transaction and returned as if
                // nothing happened: the jobs before it went with it
                // (the catch below fails the group).
                if (sqlite3_get_autocommit(db_.handle()))
                    throw db_error(
                        std::string("this job ") + transaction_ended_text + "; nothing of its group commit is stored",
                        db_apply_failed);
                if (!keep) undo();
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
                undo();
            } catch (...) {
                // Not a std::exception (an embedding program's throw 42):
                // the job fails, the thread goes on.
                errors[i] =
                    db_failure{make_db_error_code(db_job_threw), "the job threw something not a std::exception"};
                if (sqlite3_get_autocommit(db_.handle())) throw db_error(errors[i]->what, errors[i]->code);
                undo();
            }
            if (!alone) sql.exec(db_, sql.release);
        }
        committing = clock::now();
        if (!undone) {
            committing_group = true;
            sql.exec(db_, sql.commit);
            committing_group = false;
            commits_.fetch_add(1, std::memory_order_relaxed);  // (a lone job rolled back: no commit)
        }
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
        flusher_.fail(f);
        after_flush_failed();
    }
    // Told on this thread before the next group runs (the --stdin reader
    // keeps what it stores a prefix of its input by it).
    for (std::size_t i = 0; i < group.size(); ++i)
        if ((errors[i] || commit_error) && group[i].rolled_back) group[i].rolled_back();
    // A failed commit owes nothing (SQLite ignores its frames), but its
    // answer still waits behind the groups before it.
    const bool owes = deferral_.take_owed() && !commit_error;
    return db_committed{std::move(group), std::move(errors), std::move(commit_error), owes};
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

}  // namespace steadfast::app
