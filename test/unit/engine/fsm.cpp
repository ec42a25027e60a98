// The decision loop (detail::retry_fsm) on its own: no io_context, no timer,
// no clock. Each test plays the driver: it feeds events and checks actions.
#include <steadfast/engine/detail/retry_fsm.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
using detail::retry_action;
using detail::retry_event;
using detail::retry_fsm;
using act = retry_action::type;

namespace {

struct toggle : watchable {
    explicit toggle(bool v = false) : watchable("toggle"), v_(v) {}
    bool value() const override { return v_; }
    void set(bool v) {
        v_ = v;
        notify(v);
    }
    bool v_;
};

retry_event at(std::chrono::nanoseconds elapsed) {
    retry_event ev;
    ev.elapsed = elapsed;
    return ev;
}

retry_event failed(std::chrono::nanoseconds elapsed, error_code ec = boost::asio::error::connection_refused) {
    retry_event ev = at(elapsed);
    ev.outcome = classification::retryable(ec);
    return ev;
}

retry_event succeeded(std::chrono::nanoseconds elapsed) {
    return at(elapsed);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_fsm)

BOOST_AUTO_TEST_CASE(instant_success_is_one_attempt_and_done) {
    const auto p = retry_policy{};
    retry_fsm fsm(p);
    BOOST_TEST((fsm.resume(at(0s)).what == act::attempt));
    BOOST_TEST(fsm.context().number == 1u);
    BOOST_TEST(fsm.context().previous == nullptr);
    BOOST_TEST(!fsm.watch_attempt());
    BOOST_TEST((fsm.resume(succeeded(1ms)).what == act::done));
    BOOST_TEST((fsm.summary().reason == stop_reason::success));
    BOOST_TEST(fsm.summary().attempts == 1u);
    BOOST_TEST((fsm.summary().elapsed == 1ms));
    // A finished FSM stays finished.
    BOOST_TEST((fsm.resume(at(2ms)).what == act::done));
}

BOOST_AUTO_TEST_CASE(sleeps_the_backoff_then_gives_up_with_the_last_error) {
    const auto p = retry_policy{}.with_backoff(backoff::fixed(100ms)).with_stop(stop::max_attempts(3));
    retry_fsm fsm(p);
    BOOST_TEST((fsm.resume(at(0s)).what == act::attempt));
    auto a = fsm.resume(failed(1ms));
    BOOST_TEST((a.what == act::sleep));
    BOOST_TEST((a.at == 100ms));
    BOOST_TEST((fsm.resume(at(101ms)).what == act::attempt));
    BOOST_TEST(fsm.context().number == 2u);
    BOOST_TEST((fsm.context().elapsed == 101ms));
    BOOST_TEST((fsm.resume(failed(102ms)).what == act::sleep));
    BOOST_TEST((fsm.resume(at(202ms)).what == act::attempt));
    BOOST_TEST((fsm.resume(failed(203ms, boost::asio::error::timed_out)).what == act::done));
    BOOST_TEST((fsm.summary().reason == stop_reason::attempts_exhausted));
    BOOST_TEST(fsm.summary().attempts == 3u);
    BOOST_TEST((fsm.summary().last_error == boost::asio::error::timed_out));
}

BOOST_AUTO_TEST_CASE(zero_delay_yields_and_permanent_stops) {
    const auto p = retry_policy{}.with_backoff(backoff::fixed(0s)).with_stop(stop::never());
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    BOOST_TEST((fsm.resume(failed(0s)).what == act::yield));
    BOOST_TEST((fsm.resume(at(0s)).what == act::attempt));
    retry_event perm = at(0s);
    perm.outcome = classification::permanent(boost::asio::error::host_not_found);
    BOOST_TEST((fsm.resume(perm).what == act::done));
    BOOST_TEST((fsm.summary().reason == stop_reason::permanent));
}

BOOST_AUTO_TEST_CASE(cancellation_wins_before_an_attempt_and_after_a_success) {
    const auto p = retry_policy{}.with_backoff(backoff::fixed(1s));
    {
        retry_fsm fsm(p);
        retry_event ev = at(0s);
        ev.cancelled = true;
        BOOST_TEST((fsm.resume(ev).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
        BOOST_TEST(fsm.summary().attempts == 0u);
    }
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        BOOST_TEST((fsm.resume(failed(1ms)).what == act::sleep));
        retry_event woken = at(2ms);  // the sleep was cancelled
        woken.cancelled = true;
        BOOST_TEST((fsm.resume(woken).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
    }
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        retry_event late = succeeded(1ms);  // a success that arrived after cancellation
        late.cancelled = true;
        BOOST_TEST((fsm.resume(late).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
        BOOST_TEST((fsm.summary().last_error == boost::asio::error::operation_aborted));
    }
}

BOOST_AUTO_TEST_CASE(stop_when_holds_or_was_seen_briefly) {
    auto stop_now = std::make_shared<toggle>(false);
    const auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::never()).with_stop_when(stop_now);
    {
        retry_fsm fsm(p);
        BOOST_TEST((fsm.resume(at(0s)).what == act::attempt));
        BOOST_TEST(fsm.watch_attempt());  // a stop-when can cut an attempt short
        BOOST_TEST((fsm.stop_when() == stop_now.get()));
        stop_now->set(true);
        BOOST_TEST((fsm.resume(failed(1ms)).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::condition));
        stop_now->set(false);
    }
    {
        // Set, then cleared during the sleep: the driver's subscription saw
        // it; the retry stops for the condition, not as "cancelled".
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        BOOST_TEST((fsm.resume(failed(1ms)).what == act::sleep));
        fsm.stop_seen();
        retry_event woken = at(2ms);
        BOOST_TEST((fsm.resume(woken).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::condition));
    }
    {
        // A success is a success even if stop-when turned true meanwhile.
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        fsm.stop_seen();
        BOOST_TEST((fsm.resume(succeeded(1ms)).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::success));
    }
}

BOOST_AUTO_TEST_CASE(the_gate_waits_until_open_or_the_deadline) {
    auto open = std::make_shared<toggle>(false);
    const auto p = retry_policy{}.with_stop(stop::max_elapsed(10s)).with_attempt_when(open);
    {
        retry_fsm fsm(p);
        auto a = fsm.resume(at(0s));
        BOOST_TEST((a.what == act::wait_gate));
        BOOST_TEST((a.at == 10s));  // the deadline, as time since the start
        BOOST_TEST((fsm.gate() == open.get()));
        a = fsm.resume(at(1s));  // woken for nothing (opened and closed again)
        BOOST_TEST((a.what == act::wait_gate));
        open->set(true);
        BOOST_TEST((fsm.resume(at(2s)).what == act::attempt));
        BOOST_TEST((fsm.context().time_left == 8s));
        open->set(false);
    }
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        retry_event ran_out = at(10s);
        ran_out.expired = true;
        BOOST_TEST((fsm.resume(ran_out).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::deadline));
        BOOST_TEST(fsm.summary().attempts == 0u);
    }
    {
        // No deadline: the gate waits without a limit.
        const auto gated = retry_policy{}.with_attempt_when(open);
        retry_fsm fsm(gated);
        auto a = fsm.resume(at(0s));
        BOOST_TEST((a.what == act::wait_gate));
        BOOST_TEST((a.at == std::chrono::nanoseconds::max()));
    }
}

BOOST_AUTO_TEST_CASE(no_attempt_once_the_deadline_is_reached) {
    const auto p = retry_policy{}.with_backoff(backoff::fixed(0s)).with_stop(stop::max_elapsed(1s));
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    BOOST_TEST((fsm.resume(failed(999ms)).what == act::yield));
    BOOST_TEST((fsm.resume(at(1s)).what == act::done));  // an attempt would get a zero timeout
    BOOST_TEST((fsm.summary().reason == stop_reason::deadline));
    BOOST_TEST(fsm.summary().attempts == 1u);
}

BOOST_AUTO_TEST_CASE(a_timeout_is_a_retryable_attempt_timeout) {
    const auto p =
        retry_policy{}.with_backoff(backoff::fixed(0s)).with_attempt_timeout(50ms).with_stop(stop::max_attempts(2));
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    BOOST_TEST(fsm.watch_attempt());
    BOOST_TEST((fsm.context().timeout == 50ms));
    retry_event ev = at(50ms);
    ev.outcome = classification::cancelled(boost::asio::error::operation_aborted);  // what a cut-off attempt reports
    ev.timed_out = true;
    BOOST_TEST((fsm.resume(ev).what == act::yield));
    BOOST_TEST((fsm.context().previous == nullptr));  // not yet: the next attempt has not begun
    BOOST_TEST((fsm.resume(at(50ms)).what == act::attempt));
    BOOST_REQUIRE(fsm.context().previous != nullptr);
    BOOST_TEST((fsm.context().previous->how().ec == error::attempt_timeout));
    retry_event won = succeeded(60ms);
    won.timed_out = true;  // the timer fired, but the attempt had succeeded
    BOOST_TEST((fsm.resume(won).what == act::done));
    BOOST_TEST((fsm.summary().reason == stop_reason::success));
}

// Cancelled while the gate is closed (the gate wait was cancelled, and the
// gate is still closed): the retry ends with `cancelled`, it does not wait on.
BOOST_AUTO_TEST_CASE(cancellation_while_the_gate_is_closed_ends_it) {
    auto open = std::make_shared<toggle>(false);
    const auto p = retry_policy{}.with_attempt_when(open);
    retry_fsm fsm(p);
    BOOST_TEST((fsm.resume(at(0s)).what == act::wait_gate));
    retry_event woken = at(1s);
    woken.cancelled = true;
    BOOST_TEST((fsm.resume(woken).what == act::done));
    BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
    BOOST_TEST(fsm.summary().attempts == 0u);
    // Stop-when seen while the gate is closed ends it too, as `condition`.
    auto stop_now = std::make_shared<toggle>(false);
    const auto stopping = p.with_stop_when(stop_now);
    retry_fsm fsm2(stopping);
    BOOST_TEST((fsm2.resume(at(0s)).what == act::wait_gate));
    fsm2.stop_seen();
    BOOST_TEST((fsm2.resume(at(1s)).what == act::done));
    BOOST_TEST((fsm2.summary().reason == stop_reason::condition));
}

// The give-up hook is for giving up: never called after a success, called
// once with the summary otherwise.
BOOST_AUTO_TEST_CASE(no_give_up_after_a_success) {
    int give_ups = 0;
    retry_summary last;
    const auto p = retry_policy{}
                       .with_backoff(backoff::fixed(1s))
                       .with_stop(stop::max_attempts(3))
                       .with_hooks({.on_give_up = [&](const retry_summary& s) {
                           ++give_ups;
                           last = s;
                       }});
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        BOOST_TEST((fsm.resume(succeeded(1ms)).what == act::done));
        BOOST_TEST(give_ups == 0);
    }
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        fsm.resume(failed(1ms));
        fsm.resume(at(1s));
        BOOST_TEST((fsm.resume(succeeded(1s)).what == act::done));  // after a retry
        BOOST_TEST(give_ups == 0);
    }
    {
        retry_fsm fsm(p);
        fsm.resume(at(0s));
        retry_event bad = at(1ms);
        bad.outcome = classification::permanent(boost::asio::error::access_denied);
        BOOST_TEST((fsm.resume(bad).what == act::done));
        BOOST_TEST(give_ups == 1);
        BOOST_TEST((last.reason == stop_reason::permanent));
        BOOST_TEST(last.attempts == 1u);
    }
}

// settle(): user code inside resume() cancelled the operation or set
// stop-when. Whatever the action was (an attempt, a sleep, a gate wait), it is
// not carried out and the retry ends, cancelled before condition; with
// neither, the action stands; once done, nothing changes.
BOOST_AUTO_TEST_CASE(settle_drops_the_action_just_decided) {
    auto open = std::make_shared<toggle>(true);
    auto stop_now = std::make_shared<toggle>(false);
    int give_ups = 0;
    const auto p = retry_policy{}
                       .with_backoff(backoff::fixed(1s))
                       .with_attempt_when(open)
                       .with_stop_when(stop_now)
                       .with_hooks({.on_give_up = [&](const retry_summary&) { ++give_ups; }});
    {
        retry_fsm fsm(p);  // an attempt decided, its before_attempt hook cancelled
        const auto a = fsm.resume(at(0s));
        BOOST_TEST((a.what == act::attempt));
        BOOST_TEST((fsm.settle(a, true, 0s).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
        BOOST_TEST(fsm.summary().attempts == 1u);  // counted: the hook saw its number
        BOOST_TEST((fsm.settle({act::done, {}}, true, 1s).what == act::done));
        BOOST_TEST((fsm.resume(at(2s)).what == act::done));
        BOOST_TEST(fsm.summary().elapsed.count() == 0);  // the first end stands
    }
    {
        retry_fsm fsm(p);  // a sleep decided, the after_attempt hook or the backoff cancelled
        fsm.resume(at(0s));
        const auto a = fsm.resume(failed(1ms));
        BOOST_TEST((a.what == act::sleep));
        BOOST_TEST((fsm.settle(a, true, 1ms).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
        BOOST_TEST((fsm.summary().last_error == boost::asio::error::connection_refused));
    }
    {
        retry_fsm fsm(p);  // a gate wait decided
        fsm.resume(at(0s));
        fsm.resume(failed(1ms));
        open->set(false);
        const auto a = fsm.resume(at(1s));
        BOOST_TEST((a.what == act::wait_gate));
        BOOST_TEST((fsm.settle(a, true, 1s).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));
        open->set(true);
    }
    BOOST_TEST(give_ups == 3);
    {
        retry_fsm fsm(p);  // a sleep decided, and a hook set stop-when (and cancelled too)
        fsm.resume(at(0s));
        const auto a = fsm.resume(failed(1ms));
        BOOST_TEST((a.what == act::sleep));
        BOOST_TEST((fsm.settle(a, false, 1ms).what == act::sleep));  // nothing happened: it stands
        BOOST_TEST(fsm.summary().attempts == 1u);
        fsm.stop_seen();  // what the driver's subscription does when the hook sets it
        BOOST_TEST((fsm.settle(a, true, 1ms).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::cancelled));  // cancellation first
    }
    {
        retry_fsm fsm(p);  // an attempt decided, its before_attempt hook set stop-when
        const auto a = fsm.resume(at(0s));
        fsm.stop_seen();
        BOOST_TEST((fsm.settle(a, false, 0s).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::condition));
    }
    BOOST_TEST(give_ups == 5);
    {
        retry_fsm fsm(p);  // after a success: nothing changes, no give-up
        fsm.resume(at(0s));
        const auto a = fsm.resume(succeeded(1ms));
        BOOST_TEST((a.what == act::done));
        BOOST_TEST((fsm.settle(a, true, 2ms).what == act::done));
        BOOST_TEST((fsm.summary().reason == stop_reason::success));
        BOOST_TEST(give_ups == 5);
    }
}

BOOST_AUTO_TEST_CASE(hooks_see_every_step_in_order) {
    std::vector<std::string> seen;
    const auto p =
        retry_policy{}
            .with_backoff(backoff::fixed(1s))
            .with_stop(stop::max_attempts(2))
            .with_hooks(
                {.before_attempt =
                     [&](const attempt_context& c) { seen.push_back("before " + std::to_string(c.number)); },
                 .after_attempt =
                     [&](const attempt_context& c, const classification&, const decision& d) {
                         seen.push_back("after " + std::to_string(c.number) +
                                        (d.what == decision::action::retry ? " retry" : " stop"));
                     },
                 .on_give_up =
                     [&](const retry_summary& s) { seen.push_back("give up " + std::string(to_string(s.reason))); }});
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    fsm.resume(failed(1ms));
    fsm.resume(at(1s));
    fsm.resume(failed(1s));
    const std::vector<std::string> want{"before 1", "after 1 retry", "before 2", "after 2 stop",
                                        "give up attempts_exhausted"};
    BOOST_TEST(seen == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_previous_outcome_reaches_the_next_attempt_and_a_custom_backoff) {
    // A backoff that waits what the failed reply asked for (a value), or
    // 1 s after an exception.
    std::vector<int> backoff_saw;
    const auto from_reply = backoff::custom([&](std::uint32_t, std::chrono::nanoseconds, const previous_outcome& o) {
        if (const int* v = o.value<int>()) {
            backoff_saw.push_back(*v);
            return std::chrono::nanoseconds(std::chrono::milliseconds(*v));
        }
        backoff_saw.push_back(o.exception() ? -1 : -2);
        return std::chrono::nanoseconds(1s);
    });
    const auto p = retry_policy{}.with_backoff(from_reply).with_stop(stop::max_attempts(3));
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    const int reply = 250;
    retry_event ev = failed(1ms);
    ev.value = &reply;
    ev.type = &typeid(int);
    auto a = fsm.resume(ev);
    BOOST_TEST((a.what == act::sleep));
    BOOST_TEST((a.at == 250ms));
    fsm.resume(at(300ms));
    const previous_outcome* prev = fsm.context().previous;
    BOOST_REQUIRE(prev != nullptr);
    BOOST_REQUIRE(prev->value<int>() != nullptr);
    BOOST_TEST(*prev->value<int>() == 250);
    BOOST_TEST(prev->value<long>() == nullptr);  // another type: no value
    BOOST_TEST((prev->how().kind == verdict::retryable));
    BOOST_TEST((prev->how().ec == boost::asio::error::connection_refused));

    retry_event threw = failed(301ms, error::exception_thrown);
    threw.exception = std::make_exception_ptr(std::runtime_error("boom"));
    a = fsm.resume(threw);
    BOOST_TEST((a.at == 1s));
    fsm.resume(at(2s));
    BOOST_TEST(static_cast<bool>(fsm.context().previous->exception()));
    BOOST_TEST(fsm.context().previous->value<int>() == nullptr);
    BOOST_TEST(backoff_saw == (std::vector<int>{250, -1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_after_hook_sees_the_attempt_before_and_a_hint_is_not_cut_by_the_gate) {
    auto open = std::make_shared<toggle>(true);
    std::vector<std::string> seen;
    const auto p =
        retry_policy{}
            .with_backoff(backoff::fixed(1s))
            .with_max_delay(1min)
            .with_stop(stop::max_attempts(3))
            .with_attempt_when(open)
            .with_hooks({.after_attempt = [&](const attempt_context& c, const classification& now, const decision&) {
                seen.push_back(std::to_string(c.number) + ": now " + now.ec.message() + ", before " +
                               (c.previous ? c.previous->how().ec.message() : std::string("none")));
            }});
    retry_fsm fsm(p);
    fsm.resume(at(0s));
    auto a = fsm.resume(failed(1ms, boost::asio::error::connection_refused));
    BOOST_TEST((a.what == act::sleep));
    BOOST_TEST(a.wake_on_gate);  // an ordinary backoff sleep ends when the gate opens
    fsm.resume(at(1s));
    retry_event hinted = at(1s);
    hinted.outcome = classification::retryable(boost::asio::error::try_again, 30s);
    a = fsm.resume(hinted);
    BOOST_TEST((a.what == act::sleep));
    BOOST_TEST((a.at == 30s));
    BOOST_TEST(!a.wake_on_gate);  // a server's wait is not cut short
    BOOST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0] == "1: now " + error_code(boost::asio::error::connection_refused).message() + ", before none");
    BOOST_TEST(seen[1] == "2: now " + error_code(boost::asio::error::try_again).message() + ", before " +
                              error_code(boost::asio::error::connection_refused).message());
}

BOOST_AUTO_TEST_SUITE_END()
