// A hedged call's decisions (steadfast/engine/detail/hedge_fsm.hpp) on
// made-up times: gRPC A6's and Polly v8's documented rules (hedges after the
// delay up to max_attempts, the next at once after a retryable failure, the
// first success wins and the others are cancelled with their late results
// dropped, a permanent failure ends it, a server's pushback stops further
// hedges, hedges draw on the retry budget).
#include <steadfast/engine/detail/hedge_fsm.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/errc.hpp>
#include <boost/test/unit_test.hpp>

#include <stdexcept>

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using steadfast::classification;
using steadfast::retry_budget;
using steadfast::stop_reason;
using steadfast::detail::hedge_fsm;
using steadfast::detail::hedge_settings;
using steadfast::detail::hedge_step;

namespace {
const classification refused =
    classification::retryable(boost::system::errc::make_error_code(boost::system::errc::connection_refused));
std::int64_t ms(const std::optional<nanoseconds>& t) {
    return t ? std::chrono::duration_cast<std::chrono::milliseconds>(*t).count() : -1;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_hedge)

BOOST_AUTO_TEST_CASE(hedges_follow_the_delay_and_the_first_success_wins) {
    hedge_fsm h(hedge_settings{3, 100ms});
    hedge_step s = h.start(0ms);
    BOOST_TEST(s.start == 1u);
    BOOST_TEST(ms(s.timer_at) == 100);
    s = h.on_timer(100ms);
    BOOST_TEST(s.start == 2u);
    BOOST_TEST(ms(s.timer_at) == 200);
    s = h.on_timer(200ms);
    BOOST_TEST(s.start == 3u);
    BOOST_TEST(s.disarm_timer);  // the last one: no timer
    BOOST_TEST(h.in_flight() == 3u);
    s = h.on_outcome(2, classification::success(), 250ms);
    BOOST_TEST(s.done);
    BOOST_TEST(s.cancel_others);
    BOOST_TEST((h.reason() == stop_reason::success));
    BOOST_TEST(h.result_of() == 2u);
    // The others' results, when they come, are dropped.
    s = h.on_outcome(1, classification::success(), 260ms);
    BOOST_TEST(!s.done);
    BOOST_TEST(s.start == 0u);
    BOOST_TEST(h.late() == 1u);
    BOOST_TEST(h.result_of() == 2u);
}

BOOST_AUTO_TEST_CASE(a_retryable_failure_starts_the_next_at_once) {
    hedge_fsm h(hedge_settings{3, 100ms});
    h.start(0ms);
    hedge_step s = h.on_outcome(1, refused, 30ms);
    BOOST_TEST(s.start == 2u);
    BOOST_TEST(ms(s.timer_at) == 130);  // the delay counts from this one
    BOOST_TEST(!s.done);
}

BOOST_AUTO_TEST_CASE(a_permanent_failure_ends_it_and_cancels_the_others) {
    hedge_fsm h(hedge_settings{3, 100ms});
    h.start(0ms);
    h.on_timer(100ms);
    hedge_step s = h.on_outcome(1, classification::permanent(boost::asio::error::access_denied), 150ms);
    BOOST_TEST(s.done);
    BOOST_TEST(s.cancel_others);
    BOOST_TEST(s.start == 0u);
    BOOST_TEST((h.reason() == stop_reason::permanent));
    BOOST_TEST(h.result_of() == 1u);
}

BOOST_AUTO_TEST_CASE(pushback_stops_further_hedges_but_not_those_in_flight) {
    hedge_fsm h(hedge_settings{4, 100ms});
    h.start(0ms);
    h.on_timer(100ms);
    hedge_step s = h.on_outcome(1, classification::retryable(refused.ec, 5s), 120ms);
    BOOST_TEST(s.start == 0u);
    BOOST_TEST(s.disarm_timer);
    BOOST_TEST(!s.done);  // attempt 2 goes on
    BOOST_TEST(h.on_timer(200ms).start == 0u);
    s = h.on_outcome(2, refused, 300ms);
    BOOST_TEST(s.done);
    BOOST_TEST((h.reason() == stop_reason::pushback));
    BOOST_TEST(h.started() == 2u);
}

BOOST_AUTO_TEST_CASE(hedges_draw_on_the_retry_budget) {
    retry_budget budget(retry_budget::options{.capacity = 10, .retry_cost = 5, .timeout_cost = 5, .success_refund = 1});
    hedge_fsm h(hedge_settings{4, 100ms}, &budget);
    BOOST_TEST(h.start(0ms).start == 1u);  // the first attempt is free
    BOOST_TEST(budget.available() == 10u);
    BOOST_TEST(h.on_timer(100ms).start == 2u);
    BOOST_TEST(h.on_timer(200ms).start == 3u);
    BOOST_TEST(budget.available() == 0u);
    hedge_step s = h.on_timer(300ms);
    BOOST_TEST(s.start == 0u);
    BOOST_TEST(s.disarm_timer);
    h.on_outcome(1, refused, 310ms);
    h.on_outcome(2, refused, 320ms);
    s = h.on_outcome(3, refused, 330ms);
    BOOST_TEST(s.done);
    BOOST_TEST((h.reason() == stop_reason::budget));
}

BOOST_AUTO_TEST_CASE(every_attempt_failing_exhausts_them) {
    hedge_fsm h(hedge_settings{2, 100ms});
    h.start(0ms);
    BOOST_TEST(h.on_outcome(1, refused, 10ms).start == 2u);
    hedge_step s = h.on_outcome(2, refused, 20ms);
    BOOST_TEST(s.done);
    BOOST_TEST(!s.cancel_others);  // nothing left in flight
    BOOST_TEST((h.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST(h.result_of() == 2u);
}

BOOST_AUTO_TEST_CASE(one_attempt_is_no_hedge) {
    hedge_fsm h(hedge_settings{1, 0ms});
    hedge_step s = h.start(0ms);
    BOOST_TEST(s.start == 1u);
    BOOST_TEST(!s.timer_at.has_value());
    BOOST_TEST(h.on_outcome(1, refused, 5ms).done);
}

BOOST_AUTO_TEST_CASE(the_callers_cancellation_cancels_every_attempt) {
    hedge_fsm h(hedge_settings{3, 100ms});
    h.start(0ms);
    h.on_timer(100ms);
    hedge_step s = h.cancel();
    BOOST_TEST(s.done);
    BOOST_TEST(s.cancel_others);
    BOOST_TEST((h.reason() == stop_reason::cancelled));
    h.on_outcome(2, refused, 150ms);
    h.on_outcome(1, classification::success(), 160ms);
    BOOST_TEST(h.late() == 2u);
    BOOST_TEST((h.reason() == stop_reason::cancelled));
    // The success that came in while the attempts wound down is the
    // call's result (a retry keeps a success that beats its cancellation).
    BOOST_TEST(h.result_of() == 1u);
}

BOOST_AUTO_TEST_CASE(an_attempt_cancelled_from_outside_with_nothing_else_in_flight_ends_the_call) {
    // (Its own operation aborted: nothing else would ever end the call if a
    // delay without end, or a budget, keeps the next hedge from starting.)
    hedge_fsm h(hedge_settings{3, std::chrono::nanoseconds::max()});
    h.start(0ms);
    const hedge_step s = h.on_outcome(1, classification::cancelled(refused.ec), 5ms);
    BOOST_TEST(s.done);
    BOOST_TEST(h.result_of() == 1u);
}

BOOST_AUTO_TEST_CASE(a_pushback_stays_the_result_when_a_later_hedge_fails_without_a_hint) {
    hedge_fsm h(hedge_settings{2, 10ms});
    h.start(0ms);
    h.on_timer(10ms);  // attempt 2 in flight
    h.on_outcome(1, classification::retryable(refused.ec, 2s), 12ms);
    const hedge_step s = h.on_outcome(2, refused, 15ms);
    BOOST_TEST(s.done);
    BOOST_TEST((h.reason() == stop_reason::pushback));
    BOOST_TEST(h.result_of() == 1u);  // its hint is the retry's wait
}

BOOST_AUTO_TEST_CASE(a_delay_without_end_hedges_only_after_failures) {
    hedge_fsm h(hedge_settings{3, std::chrono::nanoseconds::max()});
    const auto late = std::chrono::hours(24 * 365 * 100);
    hedge_step s = h.start(late);
    BOOST_TEST(s.start == 1u);
    BOOST_REQUIRE(s.timer_at.has_value());
    BOOST_TEST((*s.timer_at == std::chrono::nanoseconds::max()));  // saturated, not wrapped into the past
    s = h.on_outcome(1, refused, late + 1ms);
    BOOST_TEST(s.start == 2u);
}

BOOST_AUTO_TEST_CASE(bad_settings_are_refused_by_name) {
    try {
        hedge_fsm h(hedge_settings{0, 10ms});
        BOOST_FAIL("zero attempts accepted");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("max_attempts") != std::string::npos);
    }
    BOOST_CHECK_THROW(hedge_fsm(hedge_settings{2, -1ms}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
