// circuit_breaker (steadfast/engine/breaker.hpp) on virtual time: permits and
// their outcomes, calls too late to count, the transition hook and the
// counters, closed() as a condition that turns true when a break ends, and a
// retry that asks the breaker before each attempt (circuit_open, no attempt;
// outcomes recorded as the retry classified them; a cancelled attempt's
// permit given back). The threaded case is in strands.cpp (TSan).
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <steadfast_test/manual_flag.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::virtual_time;

namespace {
// A breaker on the manual clock that opens after `in_a_row` failures in a
// row, for `pause` (the same every time), with `trials` half-open calls.
std::shared_ptr<circuit_breaker> breaker(std::uint32_t in_a_row, nanoseconds pause, std::uint32_t trials = 1,
                                         std::vector<std::string>* moves = nullptr) {
    breaker_options o;
    o.consecutive_failures = in_a_row;
    o.break_duration = [pause](std::uint32_t) { return pause; };
    o.half_open_calls = trials;
    if (moves)
        o.on_transition = [moves](const breaker_transition& t) {
            moves->push_back(std::string(to_string(t.from)) + ">" + to_string(t.to));
        };
    return std::make_shared<circuit_breaker>(std::move(o), virtual_time::now);
}

using ec_result = boost::system::result<int>;
// An attempt that fails with `ec` (retryable by default) `fails` times, then
// succeeds; counts its calls.
auto flaky(int fails, int& calls, error_code ec = asio::error::connection_refused) {
    return [fails, &calls, ec](const attempt_context&) -> asio::awaitable<ec_result> {
        ++calls;
        if (calls <= fails) co_return ec;
        co_return calls;
    };
}
// An attempt that waits an hour of virtual time (cancelled or destroyed first).
asio::awaitable<ec_result> stalls_an_hour(const attempt_context&) {
    co_await steadfast_test::virtual_sleep(1h);
    co_return 1;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_circuit_breaker)

BOOST_AUTO_TEST_CASE(opens_rejects_and_closes_after_its_trials) {
    virtual_time vt;
    std::vector<std::string> moves;
    auto b = breaker(3, 10s, 2, &moves);
    for (int i = 0; i < 3; ++i) {
        auto p = b->try_acquire();
        BOOST_REQUIRE(p);
        p.failure();
    }
    BOOST_TEST((b->state() == breaker_state::open));
    BOOST_TEST(!b->try_acquire());
    BOOST_TEST(b->break_left() == nanoseconds(10s));
    manual_clock::advance(4s);
    BOOST_TEST(b->break_left() == nanoseconds(6s));
    BOOST_TEST(!b->try_acquire());
    manual_clock::advance(6s);
    BOOST_TEST((b->state() == breaker_state::half_open));  // read: nobody has asked yet
    BOOST_TEST(moves == (std::vector<std::string>{"closed>open"}), boost::test_tools::per_element());
    auto t1 = b->try_acquire(), t2 = b->try_acquire();
    BOOST_TEST((t1 && t2));
    BOOST_TEST(!b->try_acquire());  // two trials, both taken
    t1.success();
    BOOST_TEST((b->state() == breaker_state::half_open));
    t2.success();
    BOOST_TEST((b->state() == breaker_state::closed));
    BOOST_TEST(moves == (std::vector<std::string>{"closed>open", "open>half_open", "half_open>closed"}),
               boost::test_tools::per_element());
    const auto s = b->get_stats();
    BOOST_TEST(s.permitted == 5u);
    BOOST_TEST(s.rejected == 3u);
    BOOST_TEST(s.failures == 3u);
    BOOST_TEST(s.successes == 2u);
    BOOST_TEST(s.opened == 1u);
    BOOST_TEST(s.half_opened == 1u);
    BOOST_TEST(s.closed == 1u);
    BOOST_TEST((s.state == breaker_state::closed));
}

BOOST_AUTO_TEST_CASE(a_permit_dropped_untold_gives_its_trial_back) {
    virtual_time vt;
    auto b = breaker(1, 1s, 1);
    b->try_acquire().failure();
    manual_clock::advance(1s);
    {
        auto trial = b->try_acquire();
        BOOST_REQUIRE(trial);
        BOOST_TEST(!b->try_acquire());
    }  // cancelled: no outcome
    auto again = b->try_acquire();
    BOOST_REQUIRE(again);
    again.success();
    BOOST_TEST((b->state() == breaker_state::closed));
    BOOST_TEST(b->get_stats().released == 1u);
}

BOOST_AUTO_TEST_CASE(an_outcome_after_the_state_changed_does_not_count) {
    virtual_time vt;
    auto b = breaker(1, 1s, 1);
    auto early = b->try_acquire();  // let through while closed
    BOOST_REQUIRE(early);
    b->try_acquire().failure();  // opens it
    manual_clock::advance(1s);
    auto trial = b->try_acquire();
    BOOST_REQUIRE(trial);
    // The early call ends now, a failure: it is the closed state's, not a
    // trial's (counted, it would reopen the breaker).
    early.failure();
    BOOST_TEST((b->state() == breaker_state::half_open));
    trial.success();
    BOOST_TEST((b->state() == breaker_state::closed));
    // A permit taken before a reset neither counts nor gives anything back.
    auto before = b->try_acquire();
    b->reset();
    before.failure();
    BOOST_TEST((b->state() == breaker_state::closed));
    const auto s = b->get_stats();
    BOOST_TEST(s.stale == 2u);
    BOOST_TEST(s.failures == 1u);
}

BOOST_AUTO_TEST_CASE(isolate_holds_until_reset) {
    virtual_time vt;
    std::vector<std::string> moves;
    auto b = breaker(0, 1s, 1, &moves);
    b->isolate();
    manual_clock::advance(std::chrono::hours(24));
    BOOST_TEST(!b->try_acquire());
    BOOST_TEST((b->state() == breaker_state::isolated));
    b->reset();
    BOOST_TEST(static_cast<bool>(b->try_acquire()));
    BOOST_TEST(moves == (std::vector<std::string>{"closed>isolated", "isolated>closed"}),
               boost::test_tools::per_element());
    BOOST_TEST(b->get_stats().isolated == 1u);
}

BOOST_AUTO_TEST_CASE(slow_calls_are_timed_on_the_breakers_clock) {
    virtual_time vt;
    breaker_options o;
    o.window_size = 2;
    o.minimum_calls = 2;
    o.slow_call = 2s;
    o.slow_rate = 1.0;
    auto b = std::make_shared<circuit_breaker>(o, virtual_time::now);
    for (int i = 0; i < 2; ++i) {
        auto p = b->try_acquire();
        manual_clock::advance(2s);
        p.success();
    }
    BOOST_TEST((b->state() == breaker_state::open));  // two successes, both slow
    BOOST_TEST(b->get_stats().slow == 2u);
}

BOOST_AUTO_TEST_CASE(slow_calls_are_timed_on_the_system_clock_without_one_given) {
    // Without a clock of the caller's, a permit's call is timed on the
    // system's: the coarse monotonic clock once slow_call is at least 100
    // of its ticks (400 ms with Linux's usual 4 ms), steady_clock under that.
    // Either way a call longer than slow_call is slow and a quick one is not.
    // (The coarse clock may lag two ticks, 8 ms: the slow call sleeps 40 ms
    // more than slow_call.)
    for (const nanoseconds slow_call : {nanoseconds(100ms), nanoseconds(400ms)}) {
        breaker_options o;
        o.slow_call = slow_call;
        o.minimum_calls = 100;  // never opens here
        auto b = std::make_shared<circuit_breaker>(o);
        b->try_acquire().success();
        BOOST_TEST(b->get_stats().slow == 0u);
        auto p = b->try_acquire();
        std::this_thread::sleep_for(slow_call + 40ms);
        p.success();
        BOOST_TEST(b->get_stats().slow == 1u, "slow_call " << slow_call.count() << " ns");
        b->try_acquire().failure();
        BOOST_TEST(b->get_stats().slow == 1u);
    }
}

BOOST_AUTO_TEST_CASE(a_trial_is_timed_from_after_the_transition_hook) {
    // The hook that tells of the move to half-open runs inside try_acquire()
    // and takes 5 s: the trial that follows at once is not slow.
    virtual_time vt;
    breaker_options o;
    o.consecutive_failures = 1;
    o.break_duration = [](std::uint32_t) { return nanoseconds(1s); };
    o.half_open_calls = 1;
    o.slow_call = 2s;
    o.slow_rate = 1.0;
    o.minimum_calls = 1;
    o.on_transition = [](const breaker_transition& t) {
        if (t.to == breaker_state::half_open) manual_clock::advance(5s);
    };
    auto b = std::make_shared<circuit_breaker>(o, virtual_time::now);
    b->try_acquire().failure();
    BOOST_TEST((b->state() == breaker_state::open));
    manual_clock::advance(1s);
    auto trial = b->try_acquire();
    BOOST_REQUIRE(trial);
    trial.success();
    BOOST_TEST((b->state() == breaker_state::closed));
    BOOST_TEST(b->get_stats().slow == 0u);
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused_by_name) {
    breaker_options o;
    o.failure_rate = 0;
    try {
        circuit_breaker b(o);
        BOOST_FAIL("a failure rate of 0 was accepted");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("failure_rate") != std::string::npos);
    }
    BOOST_CHECK_THROW(retry_policy{}.with_breaker(nullptr), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(closed_turns_true_when_the_break_ends) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 30s);
    auto closed = b->closed<manual_timer>(ioc.get_executor());
    BOOST_TEST(closed->value());
    std::vector<std::pair<bool, std::int64_t>> seen;
    watchable::subscription sub;
    closed->subscribe(sub, [&](bool v) { seen.emplace_back(v, steadfast_test::secs(virtual_time::now())); });
    b->try_acquire().failure();
    steadfast::run_virtual(ioc);  // the refresh is posted; then the timer runs to the break's end
    BOOST_TEST(seen.size() == 2u);
    BOOST_REQUIRE(seen.size() >= 2u);
    BOOST_TEST((seen[0] == std::pair<bool, std::int64_t>{false, 0}));
    BOOST_TEST((seen[1] == std::pair<bool, std::int64_t>{true, 30}));
    BOOST_TEST(closed->value());
    // Isolated: false, and no timer turns it back.
    b->isolate();
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_TEST(!closed->value());
    b->reset();
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_TEST(closed->value());
    BOOST_TEST(seen.size() == 4u);
}

// Two readers of one condition (two retries gated on one breaker): the one
// that read false and waits is told when the breaker closes, even when the
// other read true before the condition's refresh ran (a busy executor).
BOOST_AUTO_TEST_CASE(a_reader_that_saw_open_is_told_though_another_read_closed_first) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 30s);
    auto closed = b->closed<manual_timer>(ioc.get_executor());
    b->try_acquire().failure();
    ioc.poll();  // told: open
    std::vector<bool> told_a;
    BOOST_TEST(!closed->value());  // A reads open, then waits for closed
    watchable::subscription a;
    closed->subscribe(a, [&](bool v) { told_a.push_back(v); });
    b->reset();
    BOOST_TEST(closed->value());  // B reads closed before the refresh runs
    ioc.poll();
    BOOST_TEST(told_a == std::vector<bool>{true});
    // And the other way: B read closed; the breaker opens and A's wait for
    // "open" (a reader of false now) is told too.
    b->try_acquire().failure();
    BOOST_TEST(!closed->value());
    ioc.restart();  // the last poll ran out of work
    ioc.poll();
    BOOST_TEST((told_a == std::vector<bool>{true, false}));
}

BOOST_AUTO_TEST_CASE(a_rejected_retry_makes_no_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 60s);
    b->isolate();
    int calls = 0;
    std::optional<retry_summary> gave_up;
    auto p = retry_policy{}.with_breaker(b).with_hooks({.on_give_up = [&](const retry_summary& s) { gave_up = s; }});
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, flaky(0, calls)));
    BOOST_TEST(calls == 0);
    BOOST_TEST((r.reason() == stop_reason::circuit_open));
    BOOST_TEST((r.error() == error::circuit_open));
    BOOST_TEST(r.attempts() == 0u);
    BOOST_TEST(gave_up.has_value());
    BOOST_TEST(to_string(stop_reason::circuit_open) == "circuit_open");
    BOOST_TEST(b->get_stats().rejected == 1u);
}

BOOST_AUTO_TEST_CASE(a_retry_stops_when_its_own_failures_open_the_breaker) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(2, 60s);
    auto budget = std::make_shared<retry_budget>(retry_budget::options{.capacity = 100, .retry_cost = 5});
    int calls = 0;
    auto p = retry_policy{}
                 .with_backoff(backoff::fixed(1s))
                 .with_stop(stop::max_attempts(10))
                 .with_budget(budget)
                 .with_breaker(b);
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, flaky(100, calls)));
    BOOST_TEST(calls == 2);
    BOOST_TEST(r.attempts() == 2u);
    BOOST_TEST((r.reason() == stop_reason::circuit_open));
    BOOST_TEST((r.last_error() == asio::error::connection_refused));
    // At once after the failure that opened it: no sleep, no budget for a
    // retry the breaker would reject.
    BOOST_TEST(steadfast_test::secs(r.elapsed()) == 1);
    BOOST_TEST(budget->available() == 95u);
    const auto s = b->get_stats();
    BOOST_TEST(s.failures == 2u);
    BOOST_TEST(s.rejected == 0u);
    BOOST_TEST((s.state == breaker_state::open));
}

BOOST_AUTO_TEST_CASE(a_retrys_slow_attempts_are_timed_by_the_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    breaker_options o;
    o.window_size = 3;
    o.minimum_calls = 3;
    o.slow_call = 5s;
    o.failure_rate = 1.0;  // (two failures in three do not open it)
    auto b = std::make_shared<circuit_breaker>(o, virtual_time::now);
    // Attempts of 1 s after a 10 s sleep: none is slow (an attempt's time,
    // not the time since the retry started).
    int calls = 0;
    auto attempt = [&calls](const attempt_context&) -> asio::awaitable<ec_result> {
        ++calls;
        co_await steadfast_test::virtual_sleep(1s);
        if (calls < 3) co_return error_code(asio::error::connection_refused);
        co_return calls;
    };
    auto p = retry_policy{}.with_backoff(backoff::fixed(10s)).with_stop(stop::max_attempts(5)).with_breaker(b);
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, attempt));
    BOOST_TEST(r.ok());
    BOOST_TEST(b->get_stats().slow == 0u);
    BOOST_TEST((b->state() == breaker_state::closed));
}

BOOST_AUTO_TEST_CASE(a_gated_retry_whose_own_failure_opens_the_breaker_waits_it_out) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 30s);
    int calls = 0;
    auto p = retry_policy{}
                 .with_backoff(backoff::fixed(1s))
                 .with_stop(stop::max_attempts(5))
                 .with_breaker(b)
                 .with_attempt_when(b->closed<manual_timer>(ioc.get_executor()));
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, flaky(1, calls)));
    BOOST_TEST(r.ok());
    BOOST_TEST(calls == 2);
    BOOST_TEST(steadfast_test::secs(r.elapsed()) == 30);  // the break, not the 1 s backoff
    BOOST_TEST((b->state() == breaker_state::closed));
}

BOOST_AUTO_TEST_CASE(a_retry_destroyed_mid_attempt_gives_its_trial_back) {
    virtual_time vt;
    auto b = breaker(1, 1s, 1);
    b->try_acquire().failure();
    manual_clock::advance(1s);
    {
        asio::io_context ioc;
        auto stalls = stalls_an_hour;
        steadfast::async_retry<manual_timer>(ioc.get_executor(), retry_policy{}.with_breaker(b), stalls,
                                             [](retry_result<ec_result>) {});
        steadfast::run_virtual(ioc, manual_clock::now() + 5s);
        BOOST_TEST(!b->try_acquire());  // the trial is out
        ioc.stop();
    }  // destroyed with the attempt in flight
    BOOST_TEST(b->get_stats().released == 1u);
    BOOST_TEST(static_cast<bool>(b->try_acquire()));
}

BOOST_AUTO_TEST_CASE(break_durations_of_zero_below_zero_and_without_end) {
    virtual_time vt;
    for (nanoseconds pause : {nanoseconds::zero(), nanoseconds(-5s)}) {
        auto b = breaker(1, pause);
        b->try_acquire().failure();
        BOOST_TEST((b->state() == breaker_state::half_open));
        BOOST_TEST(b->break_left() == nanoseconds::zero());
    }
    manual_clock::advance(std::chrono::hours(24 * 365));
    auto forever = breaker(1, nanoseconds::max());
    forever->try_acquire().failure();
    manual_clock::advance(std::chrono::hours(24 * 365 * 100));
    BOOST_TEST((forever->state() == breaker_state::open));
    BOOST_TEST(!forever->try_acquire());
}

BOOST_AUTO_TEST_CASE(a_stale_permit_given_back_in_half_open_frees_no_trial) {
    virtual_time vt;
    auto b = breaker(1, 1s, 1);
    auto early = b->try_acquire();  // let through while closed
    b->try_acquire().failure();     // opens it
    manual_clock::advance(1s);
    auto trial = b->try_acquire();
    BOOST_REQUIRE(trial);
    early.release();                // cancelled, from the closed state
    BOOST_TEST(!b->try_acquire());  // the one trial is still out
    BOOST_TEST(b->get_stats().stale == 1u);
}

BOOST_AUTO_TEST_CASE(transitions_carry_their_order) {
    virtual_time vt;
    std::vector<std::uint32_t> gens;
    breaker_options o;
    o.consecutive_failures = 1;
    o.break_duration = [](std::uint32_t) { return nanoseconds(1s); };
    o.half_open_calls = 1;
    o.on_transition = [&gens](const breaker_transition& t) { gens.push_back(t.generation); };
    auto b = std::make_shared<circuit_breaker>(o, virtual_time::now);
    b->try_acquire().failure();
    manual_clock::advance(1s);
    b->try_acquire().success();
    BOOST_TEST(gens == (std::vector<std::uint32_t>{2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_retrys_classification_is_what_the_breaker_counts) {
    virtual_time vt;
    asio::io_context ioc;
    // A permanent failure (the service answered: the request was wrong)
    // counts as a success by default...
    {
        auto b = breaker(1, 60s);
        int calls = 0;
        auto r = steadfast_test::run_virtual(
            ioc, steadfast::retry<manual_timer>(retry_policy{}.with_breaker(b),
                                                flaky(100, calls, asio::error::access_denied)));
        BOOST_TEST((r.reason() == stop_reason::permanent));
        BOOST_TEST(b->get_stats().successes == 1u);
        BOOST_TEST((b->state() == breaker_state::closed));
    }
    // ... and as a failure when the options say so.
    {
        breaker_options o;
        o.consecutive_failures = 1;
        o.is_failure = [](const classification& c) { return c.kind != verdict::success; };
        auto b = std::make_shared<circuit_breaker>(o, virtual_time::now);
        int calls = 0;
        auto r = steadfast_test::run_virtual(
            ioc, steadfast::retry<manual_timer>(retry_policy{}.with_breaker(b),
                                                flaky(100, calls, asio::error::access_denied)));
        BOOST_TEST((r.reason() == stop_reason::permanent));
        BOOST_TEST((b->state() == breaker_state::open));
    }
    // A timed-out attempt is a retryable failure: counted.
    {
        auto b = breaker(1, 60s);
        auto slow = [](const attempt_context&) -> asio::awaitable<ec_result> {
            co_await steadfast_test::virtual_sleep(10s);
            co_return 1;
        };
        auto p = retry_policy{}.with_attempt_timeout(1s).with_breaker(b);
        auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, slow));
        BOOST_TEST((r.reason() == stop_reason::circuit_open));
        BOOST_TEST(r.attempts() == 1u);
        BOOST_TEST(b->get_stats().failures == 1u);
    }
}

BOOST_AUTO_TEST_CASE(a_gated_retry_waits_out_the_break_and_closes_it) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 30s);
    b->try_acquire().failure();  // open for 30 s
    int calls = 0;
    auto p = retry_policy{}.with_breaker(b).with_attempt_when(b->closed<manual_timer>(ioc.get_executor()));
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, flaky(0, calls)));
    BOOST_TEST(r.ok());
    BOOST_TEST(calls == 1);
    BOOST_TEST(steadfast_test::secs(r.elapsed()) == 30);
    BOOST_TEST((b->state() == breaker_state::closed));  // the trial succeeded
}

BOOST_AUTO_TEST_CASE(a_cancelled_attempt_gives_its_trial_back) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 1s, 1);
    b->try_acquire().failure();
    manual_clock::advance(1s);
    asio::cancellation_signal cancel;
    auto stalls = stalls_an_hour;
    std::optional<retry_result<ec_result>> out;
    steadfast::async_retry<manual_timer>(
        ioc.get_executor(), retry_policy{}.with_breaker(b), stalls,
        asio::bind_cancellation_slot(cancel.slot(), [&](retry_result<ec_result> r) { out.emplace(std::move(r)); }));
    steadfast::run_virtual(ioc, manual_clock::now() + 5s);
    BOOST_TEST(!b->try_acquire());  // the trial is out
    cancel.emit(asio::cancellation_type::terminal);
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(b->get_stats().released == 1u);
    auto trial = b->try_acquire();  // given back: a new trial may start
    BOOST_TEST(static_cast<bool>(trial));
}

BOOST_AUTO_TEST_CASE(a_hook_that_ends_the_attempt_gives_the_permit_back) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = breaker(1, 1s, 1);
    b->try_acquire().failure();
    manual_clock::advance(1s);
    auto stop_now = std::make_shared<steadfast_test::manual_flag>("stop");
    int calls = 0;
    std::optional<std::uint64_t> released_at_give_up;
    auto p = retry_policy{}.with_breaker(b).with_stop_when(stop_now).with_hooks(
        {.before_attempt = [&](const attempt_context&) { stop_now->set(true); },
         .on_give_up = [&](const retry_summary&) { released_at_give_up = b->get_stats().released; }});
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, flaky(0, calls)));
    BOOST_TEST(calls == 0);
    BOOST_TEST((r.reason() == stop_reason::condition));
    BOOST_TEST((released_at_give_up == std::optional<std::uint64_t>(1)));  // back when it ended, not later
    BOOST_TEST(b->get_stats().released == 1u);
    BOOST_TEST(static_cast<bool>(b->try_acquire()));
}

BOOST_AUTO_TEST_SUITE_END()
