// Change notification for the engine's shared objects (circuit_breaker,
// concurrency_limit, rate_limit) to their conditions
// (detail/timed_condition.hpp). A listener is a function that posts to the
// condition's own executor, holding the condition weakly: the condition is
// never locked, kept alive or destroyed on the thread that made the change.
// Nothing here includes Asio.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace steadfast::detail {

class listener_list {
public:
    /// `tell` runs on the changing thread, outside the owner's lock, while
    /// `alive` has not expired; it must only post. Returns the id remove()
    /// takes.
    std::uint64_t add(std::weak_ptr<const void> alive, std::function<void()> tell) {
        std::lock_guard lock(m_);
        prune();
        list_.push_back({++last_, std::move(alive), std::move(tell)});
        any_.store(true, std::memory_order_release);
        return last_;
    }
    /// A listener leaving (its destructor): what `tell` holds (an executor)
    /// goes now, not at the owner's next change.
    void remove(std::uint64_t id) {
        std::function<void()> gone;  // destroyed outside the lock
        std::lock_guard lock(m_);
        const auto it = std::find_if(list_.begin(), list_.end(), [id](const entry& e) { return e.id == id; });
        if (it == list_.end()) return;
        gone = std::move(it->tell);
        list_.erase(it);
        any_.store(!list_.empty(), std::memory_order_release);
    }
    /// Tells every listener still alive; forgets the others.
    void tell() {
        // Read without the lock: a listener added meanwhile reads the state
        // itself when it starts.
        if (!any_.load(std::memory_order_acquire)) return;
        // Under the lock: a listener leaving (remove(), from its destructor)
        // waits until its post is made, so that the executor it posts to
        // (whose io_context its owner destroys after it) is never used once
        // it has gone. A tell only posts: it cannot come back here.
        std::lock_guard lock(m_);
        prune();
        for (const auto& e : list_) e.tell();
    }

private:
    struct entry {
        std::uint64_t id;
        std::weak_ptr<const void> alive;
        std::function<void()> tell;
    };
    void prune() {
        std::erase_if(list_, [](const entry& e) { return e.alive.expired(); });
        any_.store(!list_.empty(), std::memory_order_release);
    }
    std::mutex m_;
    std::vector<entry> list_;
    std::uint64_t last_ = 0;
    std::atomic<bool> any_{false};
};

}  // namespace steadfast::detail
