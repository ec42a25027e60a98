#include "commit_flusher.hpp"

#include "wal_vfs.hpp"
#include <common/thread_name.hpp>

#include <algorithm>
#include <chrono>

namespace steadfast::app {

commit_flusher::commit_flusher(wal_sync_deferral& deferral, flush_fn flush, describe_fn describe)
    : deferral_(deferral), flush_(std::move(flush)), describe_(std::move(describe)), thread_([this] { loop(); }) {}

commit_flusher::~commit_flusher() {
    stop();
}

void commit_flusher::stop() {
    {
        std::lock_guard l(m_);
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void commit_flusher::release(db_committed c) {
    {
        std::lock_guard l(m_);
        // After a failed flush nothing is answered from here: a group that
        // read what the lost flush covered fails with it (the thread answers).
        if (c.owes_flush || busy_ || !to_flush_.empty() || failed_) {
            to_flush_.push_back(std::move(c));
            cv_.notify_one();
            return;
        }
    }
    // Nothing to flush and nothing before it unanswered (sync_mode::off, a
    // group that wrote nothing): answered from here, without a hand-off.
    c.answer(std::nullopt);
}

void commit_flusher::wait_idle() {
    std::unique_lock l(m_);
    idle_cv_.wait(l, [&] { return to_flush_.empty() && !busy_; });
}

std::optional<db_failure> commit_flusher::failure() const {
    std::lock_guard l(m_);
    return failed_;
}

void commit_flusher::fail(const db_failure& f) {
    std::lock_guard l(m_);
    if (!failed_) failed_ = f;
}

void commit_flusher::loop() {
    name_this_thread("sf-db-flush");
    for (;;) {
        std::deque<db_committed> batch;
        std::optional<db_failure> failed;
        {
            std::unique_lock l(m_);
            cv_.wait(l, [&] { return stopping_ || !to_flush_.empty(); });
            if (to_flush_.empty()) return;  // stopping, all answered
            batch.swap(to_flush_);
            busy_ = true;
            failed = failed_;
        }
        const bool owed = std::any_of(batch.begin(), batch.end(), [](const db_committed& c) { return c.owes_flush; });
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
                std::lock_guard l(m_);
                if (!failed_) failed_ = describe_(any);
                failed = failed_;
            }
        }
        for (auto& c : batch) c.answer(failed);
        std::lock_guard l(m_);
        busy_ = false;
        if (to_flush_.empty()) idle_cv_.notify_all();
    }
}

}  // namespace steadfast::app
