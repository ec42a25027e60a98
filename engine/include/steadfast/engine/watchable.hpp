// watchable: an observable boolean state that the engine can gate on or stop
// on without polling. steadfast::conditions implements it (flags, probes,
// deadlines, combinators); the engine only needs value() and change callbacks.
//
// Threading: a watchable belongs to one executor (or strand). value(),
// subscribe() and the callbacks all run there, and so must the retries that
// use it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace steadfast {

class watchable {
public:
    /// RAII registration of a change callback. Unsubscribes on destruction.
    /// Registration allocates nothing (the node is this object); keep it in place.
    class subscription {
    public:
        subscription() = default;
        subscription(const subscription&) = delete;
        subscription& operator=(const subscription&) = delete;
        ~subscription() { reset(); }
        void reset() noexcept;
        bool active() const noexcept { return owner_ != nullptr; }

    private:
        friend class watchable;
        watchable* owner_ = nullptr;
        subscription* prev_ = nullptr;
        subscription* next_ = nullptr;
        std::function<void(bool)> fn_;
    };

    explicit watchable(std::string name) : name_(std::move(name)) {}
    watchable(const watchable&) = delete;
    watchable& operator=(const watchable&) = delete;
    virtual ~watchable();

    virtual bool value() const = 0;
    const std::string& name() const noexcept { return name_; }

    /// Calls `fn(new_value)` after every change of value() until `s` is reset
    /// or destroyed. `s` must not already be active.
    void subscribe(subscription& s, std::function<void(bool)> fn);

    std::size_t subscriber_count() const noexcept { return count_; }
    /// How many times the value turned true so far. Readable from any thread:
    /// an operation started elsewhere compares it once it runs on the
    /// watchable's executor, so a brief true in between is not missed.
    std::uint64_t rises() const noexcept { return rises_.load(std::memory_order_acquire); }

protected:
    /// Implementations call this after their value changed. Callbacks may
    /// subscribe or unsubscribe anything, including themselves; a change made
    /// from a callback is delivered once the current round is over.
    void notify(bool v);

private:
    std::string name_;
    subscription* head_ = nullptr;
    subscription* cursor_ = nullptr;  // the next node notify() will visit
    std::size_t count_ = 0;
    std::atomic<std::uint64_t> rises_{0};
    bool notifying_ = false;
    bool pending_ = false;
    bool pending_value_ = false;
};

}  // namespace steadfast
