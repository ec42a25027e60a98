#include "db_job.hpp"

#include "sqlite.hpp"

#include <algorithm>

namespace steadfast::app {

void throw_exception_from_error(const db_failure& f, const boost::source_location&) {
    throw db_error(f.what, f.code);
}

void db_committed::answer(const std::optional<db_failure>& flush_error) {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const std::optional<db_failure>& err = errors[i] ? errors[i] : (commit_error ? commit_error : flush_error);
        jobs[i].done(err ? &*err : nullptr);
    }
}

bool db_job_queue::push(db_job& j) {
    std::lock_guard l(m_);
    if (closed_) return false;
    jobs_.push_back(std::move(j));
    cv_.notify_one();
    return true;
}

bool db_job_queue::drop(std::uint64_t id) {
    std::lock_guard l(m_);
    const auto it = std::find_if(jobs_.begin(), jobs_.end(), [id](const db_job& j) { return j.id == id; });
    if (it == jobs_.end()) return false;
    jobs_.erase(it);
    return true;
}

std::size_t db_job_queue::size() const {
    std::lock_guard l(m_);
    return jobs_.size();
}

std::deque<db_job> db_job_queue::take() {
    std::unique_lock l(m_);
    cv_.wait(l, [&] { return stopping_ || !jobs_.empty(); });
    std::deque<db_job> group;
    group.swap(jobs_);
    return group;
}

void db_job_queue::stop() {
    {
        std::lock_guard l(m_);
        stopping_ = true;
    }
    cv_.notify_one();
}

bool db_job_queue::close_if_empty() {
    std::lock_guard l(m_);
    if (!jobs_.empty()) return false;
    closed_ = true;
    return true;
}

}  // namespace steadfast::app
