#include "db_worker.hpp"

#include <chrono>

namespace steadfast::app {

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
        queue_.push_back(std::move(j));
    }
    cv_.notify_one();
}

void db_worker::loop() {
    for (;;) {
        std::deque<job> group;
        {
            std::unique_lock l(m_);
            cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, nothing left
            group.swap(queue_);
        }
        std::vector<std::string> errors(group.size());
        std::string commit_error;
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
                    if (sqlite3_get_autocommit(db_.handle())) throw db_error(e.what());
                    errors[i] = e.what();
                    db_.exec("ROLLBACK TO job");
                }
                db_.exec("RELEASE job");
            }
            committing = clock::now();
            db_.exec("COMMIT");
            commits_.fetch_add(1, std::memory_order_relaxed);
            jobs_.fetch_add(group.size(), std::memory_order_relaxed);
        } catch (const std::exception& e) {
            commit_error = e.what();
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
            const std::string& err = !errors[i].empty() ? errors[i] : commit_error;
            group[i].done(err.empty() ? std::string{} : err);
        }
    }
}

}  // namespace steadfast::app
