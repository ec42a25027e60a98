// The pair's conditions: what a primary observes of its peers, built on the
// general conditions library (steadfast/conditions.hpp).
//   - epoch_fence (make_demoted): a newer primary exists; true for good;
//   - make_secondary_online: a probe of the secondary's health.
#pragma once

#include <steadfast/conditions/condition.hpp>
#include <steadfast/conditions/probe.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <memory>

namespace steadfast {

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

/// Ready-made: "secondary-online", from a probe of the secondary's health.
template <class Timer = boost::asio::steady_timer>
std::shared_ptr<probe_condition<Timer>> make_secondary_online(condition::executor_type ex,
                                                              typename probe_condition<Timer>::check_fn check,
                                                              probe_options o = {}) {
    return make_probe<Timer>(std::move(ex), "secondary-online", std::move(check), std::move(o));
}

}  // namespace steadfast
