#include "db_worker.hpp"

namespace steadfast::app {

db_worker::db_worker(database& db) : db_(db), thread_([this] { loop(); }) {}

db_worker::~db_worker() { stop(); }

void db_worker::stop() {
    {
        std::lock_guard l(m_);
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
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
        try {
            db_.exec("BEGIN IMMEDIATE");
            for (std::size_t i = 0; i < group.size(); ++i) {
                db_.exec("SAVEPOINT job");
                try {
                    const bool keep = group[i].work(db_);
                    if (!keep) db_.exec("ROLLBACK TO job");
                } catch (const std::exception& e) {
                    errors[i] = e.what();
                    db_.exec("ROLLBACK TO job");
                }
                db_.exec("RELEASE job");
            }
            db_.exec("COMMIT");
            commits_.fetch_add(1, std::memory_order_relaxed);
        } catch (const std::exception& e) {
            commit_error = e.what();
            try {
                db_.exec("ROLLBACK");
            } catch (...) {
            }
        }
        for (std::size_t i = 0; i < group.size(); ++i) {
            const std::string& err = !commit_error.empty() ? commit_error : errors[i];
            group[i].done(err.empty() ? std::string{} : err);
        }
    }
}

}  // namespace steadfast::app
