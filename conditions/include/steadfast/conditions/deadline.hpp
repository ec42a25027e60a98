// deadline_condition: false until a point in time on the engine's clock, then
// true. Templated on the timer, so tests run it on steadfast::manual_timer.
#pragma once

#include <steadfast/conditions/condition.hpp>

#include <boost/asio/steady_timer.hpp>

#include <cstdint>

namespace steadfast {

template <class Timer = boost::asio::steady_timer>
class deadline_condition : public condition {
public:
    using time_point = typename Timer::time_point;

    deadline_condition(executor_type ex, std::string name, time_point at)
        : condition(ex, std::move(name), Timer::clock_type::now() >= at), timer_(ex, at) {}

    /// Arms the timer; make_deadline() calls it. Call on the condition's executor.
    void start() {
        if (value()) return;
        // A wait that had already completed when the deadline moved cannot be
        // cancelled any more: its generation tells it that it is stale.
        timer_.async_wait([weak = weak_from_this(), gen = generation_](error_code ec) {
            if (ec) return;  // moved or destroyed
            auto self = std::static_pointer_cast<deadline_condition>(weak.lock());
            if (self && gen == self->generation_) self->assign(true);
        });
    }

    /// Moves the deadline (a later one turns the condition false again, and
    /// the old deadline no longer turns it true).
    void expires_at(time_point at) {
        ++generation_;
        timer_.expires_at(at);
        assign(Timer::clock_type::now() >= at);
        start();
    }
    time_point expiry() const { return timer_.expiry(); }

private:
    Timer timer_;
    std::uint64_t generation_ = 0;
};

template <class Timer = boost::asio::steady_timer>
std::shared_ptr<deadline_condition<Timer>> make_deadline(condition::executor_type ex, std::string name,
                                                         typename Timer::time_point at) {
    auto c = std::make_shared<deadline_condition<Timer>>(std::move(ex), std::move(name), at);
    c->start();
    return c;
}

}  // namespace steadfast
