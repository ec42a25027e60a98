// A watchable whose value is read from a shared object (a breaker, a
// limiter), refreshed on the condition's executor each time that object
// tells of a change, and also when time alone would change it (a break
// ends, tokens refill): the reading says when to look again, and a timer on
// the condition's executor does. On a multi-threaded io_context, give it a
// strand (as for every watchable).
#pragma once

#include <steadfast/engine/detail/change_listener.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace steadfast::detail {

/// What a condition reads: its value, and (if time alone will change it)
/// how long until it should read again.
struct condition_reading {
    bool value = false;
    std::optional<std::chrono::nanoseconds> again_in;
};

template <class Timer, class Executor>
class timed_condition final : public watchable, public std::enable_shared_from_this<timed_condition<Timer, Executor>> {
public:
    /// `keep`: the object read (kept alive as long as the condition).
    timed_condition(std::string name, const Executor& ex, std::shared_ptr<const void> keep,
                    std::function<condition_reading()> read)
        : watchable(std::move(name)), ex_(ex), timer_(ex), keep_(std::move(keep)), read_(std::move(read)) {}

    ~timed_condition() override {
        if (owner_) owner_->remove(entry_);
    }

    /// Read now from the object itself (thread-safe: it takes the object's
    /// lock), so that an attempt gated on it never sees a stale value;
    /// subscribers are told on the executor of every change from what was
    /// last told, and of a value other than what any reader read since (a
    /// reader that saw false is told when it turns true, even if no
    /// notification ever said false, and whatever other readers read).
    bool value() const override {
        const bool v = read_().value;
        (v ? read_true_ : read_false_).store(true, std::memory_order_relaxed);
        return v;
    }

    /// Registers with `owner` and schedules the first refresh (which arms the
    /// timer if time alone will change the value). Called once, by the owner.
    /// (`keep` holds the owner, and so `owner`, alive as long as this.)
    void start(listener_list& owner) {
        told_ = read_().value;
        auto poster = [ex = ex_, w = this->weak_from_this()] {
            boost::asio::post(ex, [w] {
                if (auto self = w.lock()) self->refresh();
            });
        };
        entry_ = owner.add(this->weak_from_this(), poster);
        owner_ = &owner;
        poster();
    }

private:
    // On the executor: reads, arms the timer if asked, tells subscribers of a change.
    void refresh() {
        const condition_reading r = read_();
        if (r.again_in) {
            // Rounded up: a coarser clock than nanoseconds must not wake early
            // and read again in a loop.
            timer_.expires_after(std::chrono::ceil<typename Timer::duration>(*r.again_in));
            timer_.async_wait([w = this->weak_from_this()](const boost::system::error_code& ec) {
                if (auto self = w.lock(); self && !ec) self->refresh();
            });
        } else {
            timer_.cancel();
        }
        // Told when it differs from what was told last, and also when some
        // reader read the other value since (it may be waiting for this one,
        // subscribed after its read): one reader's value() must not hide a
        // change from another (two retries gated on one breaker).
        const bool read_other = (r.value ? read_false_ : read_true_).exchange(false, std::memory_order_relaxed);
        if (r.value != told_ || read_other) {
            told_ = r.value;
            notify(r.value);
        }
    }

    Executor ex_;
    typename Timer::template rebind_executor<Executor>::other timer_;
    std::shared_ptr<const void> keep_;
    std::function<condition_reading()> read_;
    bool told_ = false;                            // the value last told (on the executor)
    mutable std::atomic<bool> read_true_{false};   // value() read true since it was last told false
    mutable std::atomic<bool> read_false_{false};  // value() read false since it was last told true
    listener_list* owner_ = nullptr;
    std::uint64_t entry_ = 0;
};

}  // namespace steadfast::detail
