// flag: a condition set and cleared from code, from any thread.
#pragma once

#include <steadfast/conditions/condition.hpp>

#include <boost/asio/dispatch.hpp>

namespace steadfast {

class flag : public condition {
public:
    flag(executor_type ex, std::string name, bool initial = false)
        : condition(std::move(ex), std::move(name), initial) {}

    /// Thread-safe: the change is made on the condition's executor (at once
    /// when called from it, else dispatched there).
    void set(bool v = true) {
        boost::asio::dispatch(get_executor(),
                              [self = std::static_pointer_cast<flag>(shared_from_this()), v] { self->assign(v); });
    }
    void clear() { set(false); }
};

inline std::shared_ptr<flag> make_flag(condition::executor_type ex, std::string name, bool initial = false) {
    return std::make_shared<flag>(std::move(ex), std::move(name), initial);
}

/// Ready-made: the primary learned that a newer epoch exists. observe() every
/// epoch seen (from a peer's answer); the condition turns true for good when
/// one is newer than ours. Thread-safe like flag::set.
class epoch_fence : public condition {
public:
    epoch_fence(executor_type ex, std::uint64_t own_epoch)
        : condition(std::move(ex), "demoted", false), own_(own_epoch) {}
    std::uint64_t own_epoch() const noexcept { return own_; }
    /// The newest epoch observed (own_epoch() until a newer one is); read it
    /// on the condition's executor.
    std::uint64_t newest_seen() const noexcept { return newest_; }
    void observe(std::uint64_t seen) {
        if (seen <= own_) return;
        boost::asio::dispatch(get_executor(), [self = std::static_pointer_cast<epoch_fence>(shared_from_this()), seen] {
            if (seen > self->newest_) self->newest_ = seen;
            self->assign(true);
        });
    }

private:
    std::uint64_t own_;
    std::uint64_t newest_ = own_;
};

inline std::shared_ptr<epoch_fence> make_demoted(condition::executor_type ex, std::uint64_t own_epoch) {
    return std::make_shared<epoch_fence>(std::move(ex), own_epoch);
}

}  // namespace steadfast
