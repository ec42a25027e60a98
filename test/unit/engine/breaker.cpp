// A circuit breaker's decisions (steadfast/engine/detail/breaker_fsm.hpp) on
// made-up times: resilience4j's documented rules and defaults (sliding
// windows by count and by time, the minimum number of calls, failure and
// slow-call rates at or above their thresholds, the half-open trials), Polly
// v8's break-duration generator, consecutive failures, isolate and reset.
#include <steadfast/engine/detail/breaker_fsm.hpp>

#include <boost/test/unit_test.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using steadfast::detail::breaker_fsm;
using steadfast::detail::breaker_settings;
using steadfast::detail::breaker_state;
using steadfast::detail::nanoseconds;

namespace {
constexpr nanoseconds quick = 10ms;

breaker_settings small(std::uint32_t window, std::uint32_t minimum, double rate) {
    breaker_settings s;
    s.window_size = window;
    s.minimum_calls = minimum;
    s.failure_rate = rate;
    return s;
}
// A permitted call that ends at `t` (a failure or not), and whether the
// breaker opened then.
bool call(breaker_fsm& b, nanoseconds t, bool failure, nanoseconds took = quick) {
    BOOST_REQUIRE(b.try_acquire(t));
    auto changed = b.record(t, failure, took);
    return changed && changed->to == breaker_state::open;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_breaker)

BOOST_AUTO_TEST_CASE(defaults_are_resilience4js) {
    const breaker_settings s;
    BOOST_TEST((s.window == breaker_settings::window_kind::count));
    BOOST_TEST(s.window_size == 100u);
    BOOST_TEST(s.minimum_calls == 100u);
    BOOST_TEST(s.failure_rate == 0.5);
    BOOST_TEST(s.slow_rate == 1.0);
    BOOST_TEST((s.slow_call == std::chrono::seconds(60)));
    BOOST_TEST(s.half_open_calls == 10u);
    breaker_fsm b(s);
    // 99 failures: under the minimum of 100 calls, still closed.
    for (int i = 0; i < 99; ++i) BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST((b.state(1s) == breaker_state::closed));
    BOOST_TEST(call(b, 1s, false));  // the 100th: 99 % failed
    BOOST_TEST((b.state(1s) == breaker_state::open));
    BOOST_TEST((b.open_until() == 61s));  // a 60 s break by default
}

BOOST_AUTO_TEST_CASE(a_count_window_slides_and_opens_at_the_threshold) {
    breaker_fsm b(small(10, 10, 0.5));
    nanoseconds t = 1s;
    for (int i = 0; i < 6; ++i) BOOST_TEST(!call(b, t, false));
    for (int i = 0; i < 4; ++i) BOOST_TEST(!call(b, t, true));
    BOOST_TEST(b.window(t).failures == 4u);  // 4 of 10: under 50 %
    // The oldest success leaves the window as a failure enters: 5 of 10, at
    // the threshold, opens (resilience4j: "equal or greater").
    BOOST_TEST(call(b, t, true));
    BOOST_TEST(!b.try_acquire(t));
}

BOOST_AUTO_TEST_CASE(a_count_windows_minimum_is_at_most_its_size) {
    breaker_fsm b(small(5, 100, 0.5));  // resilience4j lowers the minimum to the window's size
    for (int i = 0; i < 4; ++i) BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST(call(b, 1s, true));
}

BOOST_AUTO_TEST_CASE(a_time_window_counts_the_last_seconds_only) {
    breaker_settings s = small(10, 5, 0.5);
    s.window = breaker_settings::window_kind::time;
    breaker_fsm b(s);
    for (int i = 0; i < 3; ++i) BOOST_TEST(!call(b, 0s, false));
    // 10.2 s later the first second has left the 10-second window: the
    // failures below are counted alone (with the successes, 3 of 6 would
    // have opened it at the third).
    for (int i = 0; i < 4; ++i) BOOST_TEST(!call(b, 10200ms, true));
    BOOST_TEST(b.window(10200ms).calls == 4u);
    BOOST_TEST(call(b, 10500ms, true));  // 5 calls, all failed
    // Within one window, successes count: 2 of 5 failed stays closed.
    breaker_fsm c(s);
    for (int i = 0; i < 3; ++i) BOOST_TEST(!call(c, 1s, false));
    BOOST_TEST(!call(c, 9500ms, true));
    BOOST_TEST(!call(c, 9600ms, true));
    BOOST_TEST(c.window(9600ms).calls == 5u);
    BOOST_TEST((c.state(9600ms) == breaker_state::closed));
    BOOST_TEST(c.window(12s).calls == 2u);  // second 1 has gone by second 12
}

// The time window's sum is kept as calls come (a one-day window is 86,400
// buckets, once added up at every call): against a count of the calls of the
// last window_size seconds, after every call and at times between them,
// through quiet spells shorter and longer than the window.
BOOST_AUTO_TEST_CASE(a_time_windows_running_sum_is_the_last_seconds_calls) {
    for (std::uint32_t size : {1u, 3u, 10u, 60u}) {
        breaker_settings s = small(size, 1'000'000, 1.0);  // never opens: only the counts are under test
        s.window = breaker_settings::window_kind::time;
        s.slow_call = 50ms;
        breaker_fsm b(s);
        std::mt19937 rng(size);
        struct one {
            std::int64_t second;
            bool failure, slow;
        };
        std::vector<one> calls;
        auto expected = [&](nanoseconds t) {
            const std::int64_t sec = std::chrono::duration_cast<std::chrono::seconds>(t).count();
            breaker_fsm::counts c;
            for (const one& x : calls)
                if (x.second <= sec && x.second > sec - static_cast<std::int64_t>(size)) {
                    ++c.calls;
                    c.failures += x.failure ? 1 : 0;
                    c.slow += x.slow ? 1 : 0;
                }
            return c;
        };
        auto same = [](const breaker_fsm::counts& a, const breaker_fsm::counts& e) {
            return a.calls == e.calls && a.failures == e.failures && a.slow == e.slow;
        };
        nanoseconds t = 5s;
        for (int i = 0; i < 3000; ++i) {
            // Mostly calls within a second; now and then a quiet spell of up to twice the window.
            const auto r = rng() % 100;
            t += r < 90 ? nanoseconds(std::chrono::milliseconds(rng() % 400))
                        : nanoseconds(std::chrono::seconds(rng() % (2 * size + 2)));
            const bool failure = rng() % 3 == 0, slow = rng() % 4 == 0;
            BOOST_REQUIRE(b.try_acquire(t));
            b.record(t, failure, slow ? 60ms : 10ms);
            calls.push_back({std::chrono::duration_cast<std::chrono::seconds>(t).count(), failure, slow});
            BOOST_TEST_REQUIRE(same(b.window(t), expected(t)), "size " << size << " call " << i);
            const nanoseconds later = t + std::chrono::milliseconds(rng() % (2000 * size + 2000));
            BOOST_TEST_REQUIRE(same(b.window(later), expected(later)), "size " << size << " after call " << i);
        }
    }
}

// A clock that goes back (not a steady one): a call older than the window
// as of the latest second counts for nothing, and the calls of that second
// stay counted.
BOOST_AUTO_TEST_CASE(a_time_window_behind_a_clock_that_went_back) {
    breaker_settings s = small(10, 1'000'000, 1.0);
    s.window = breaker_settings::window_kind::time;
    breaker_fsm b(s);
    BOOST_TEST(!call(b, 100s, false));
    BOOST_TEST(!call(b, 50s, true));  // 50 s back: outside the window of second 100
    BOOST_TEST(b.window(100s).calls == 1u);
    BOOST_TEST(b.window(100s).failures == 0u);
    BOOST_TEST(!call(b, 95s, true));  // back, but within it: counted
    BOOST_TEST(b.window(100s).calls == 2u);
    BOOST_TEST(b.window(105s).calls == 1u);  // second 95 has gone by 105
    BOOST_TEST(b.window(110s).calls == 0u);  // and second 100 by 110
    BOOST_TEST(!call(b, 111s, false));
    BOOST_TEST(b.window(111s).calls == 1u);
}

BOOST_AUTO_TEST_CASE(slow_calls_open_it_without_a_failure) {
    breaker_settings s = small(4, 4, 1.0);
    s.slow_call = 1s;
    s.slow_rate = 0.5;
    breaker_fsm b(s);
    BOOST_TEST(!call(b, 1s, false, 2s));
    BOOST_TEST(!call(b, 1s, false, 999ms));  // under the bound: not slow
    BOOST_TEST(!call(b, 1s, false, 10ms));
    BOOST_TEST(b.window(1s).slow == 1u);
    BOOST_TEST(call(b, 1s, false, 1s));  // at the bound: slow; 2 of 4
}

BOOST_AUTO_TEST_CASE(consecutive_failures_open_it_whatever_the_window_holds) {
    breaker_settings s;
    s.consecutive_failures = 3;
    breaker_fsm b(s);
    BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST(!call(b, 1s, false));  // the run is broken
    BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST(!call(b, 1s, true));
    BOOST_TEST(call(b, 1s, true));
}

BOOST_AUTO_TEST_CASE(open_rejects_until_the_break_ends_then_permits_so_many_trials) {
    breaker_settings s = small(2, 2, 0.5);
    s.half_open_calls = 2;
    s.break_duration = [](std::uint32_t) { return nanoseconds(5s); };
    breaker_fsm b(s);
    call(b, 10s, true);
    BOOST_TEST(call(b, 10s, true));
    BOOST_TEST(!b.try_acquire(14999ms));
    BOOST_TEST((b.state(14999ms) == breaker_state::open));
    BOOST_TEST((b.state(15s) == breaker_state::half_open));  // read, not moved yet
    std::optional<steadfast::detail::breaker_transition> moved;
    BOOST_TEST(b.try_acquire(15s, &moved));
    BOOST_REQUIRE(moved.has_value());
    BOOST_TEST((moved->from == breaker_state::open && moved->to == breaker_state::half_open));
    BOOST_TEST(b.try_acquire(15s));
    BOOST_TEST(!b.try_acquire(15s));  // two trials at most
    b.release();                      // one ended without an outcome (cancelled)
    BOOST_TEST(b.try_acquire(15s));
    // Both succeed: closed, with a fresh window (the failures are forgotten).
    BOOST_TEST(!b.record(16s, false, quick).has_value());
    auto closed = b.record(16s, false, quick);
    BOOST_REQUIRE(closed.has_value());
    BOOST_TEST((closed->to == breaker_state::closed));
    BOOST_TEST(b.window(16s).calls == 0u);
    BOOST_TEST(b.openings() == 0u);
    BOOST_TEST(!call(b, 16s, true));  // one failure of a fresh window: not enough
}

BOOST_AUTO_TEST_CASE(half_open_trials_that_decide_it_open_it_at_once) {
    breaker_settings s = small(1, 1, 0.5);
    s.half_open_calls = 4;
    s.break_duration = [](std::uint32_t) { return nanoseconds(1s); };
    breaker_fsm b(s);
    BOOST_TEST(call(b, 0s, true));
    for (int i = 0; i < 4; ++i) BOOST_TEST(b.try_acquire(1s));
    BOOST_TEST(!b.record(1s, true, quick).has_value());  // 1 of 4: not decided
    auto again = b.record(1s, true, quick);              // 2 of 4 failed whatever the others do
    BOOST_REQUIRE(again.has_value());
    BOOST_TEST((again->from == breaker_state::half_open && again->to == breaker_state::open));
    BOOST_TEST(b.openings() == 2u);
    // The trials still out end while it is open: their outcomes are not counted.
    BOOST_TEST(!b.record(1100ms, false, quick).has_value());
    BOOST_TEST((b.state(1100ms) == breaker_state::open));
}

BOOST_AUTO_TEST_CASE(a_break_duration_generator_grows_while_it_keeps_failing) {
    breaker_settings s = small(1, 1, 0.5);
    s.half_open_calls = 1;  // Polly's single trial
    s.break_duration = [](std::uint32_t n) { return nanoseconds(std::chrono::seconds(10 * n)); };
    breaker_fsm b(s);
    BOOST_TEST(call(b, 0s, true));
    BOOST_TEST((b.open_until() == 10s));
    BOOST_TEST(call(b, 10s, true));  // the trial fails: the second break is longer
    BOOST_TEST((b.open_until() == 30s));
    BOOST_TEST(call(b, 30s, true));
    BOOST_TEST((b.open_until() == 60s));
    BOOST_TEST(!call(b, 60s, false));  // the trial succeeds: closed, the count starts again
    BOOST_TEST((b.state(60s) == breaker_state::closed));
    BOOST_TEST(call(b, 61s, true));
    BOOST_TEST((b.open_until() == 71s));
}

BOOST_AUTO_TEST_CASE(isolate_holds_it_open_until_reset) {
    breaker_fsm b(breaker_settings{});
    auto t = b.isolate(1s);
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST((t->from == breaker_state::closed && t->to == breaker_state::isolated));
    BOOST_TEST(!b.isolate(1s).has_value());  // already
    BOOST_TEST(!b.try_acquire(1s));
    BOOST_TEST(!b.try_acquire(std::chrono::hours(1000)));
    BOOST_TEST((b.state(std::chrono::hours(1000)) == breaker_state::isolated));
    auto r = b.reset();
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST((r->to == breaker_state::closed));
    BOOST_TEST(b.try_acquire(2s));
    BOOST_TEST(!b.reset().has_value());  // closed already: nothing to say
}

BOOST_AUTO_TEST_CASE(reset_forgets_the_window_and_the_breaks) {
    breaker_fsm b(small(4, 4, 0.5));
    for (int i = 0; i < 3; ++i) call(b, 1s, true);
    BOOST_TEST(b.window(1s).failures == 3u);
    b.reset();
    BOOST_TEST(b.window(1s).calls == 0u);
    for (int i = 0; i < 3; ++i) BOOST_TEST(!call(b, 1s, true));  // 3 calls: under the minimum again
}

BOOST_AUTO_TEST_CASE(bad_settings_are_refused_by_name) {
    auto refused = [](breaker_settings s, const std::string& word) {
        try {
            breaker_fsm b(std::move(s));
        } catch (const std::invalid_argument& e) {
            return std::string(e.what()).find(word) != std::string::npos;
        }
        return false;
    };
    breaker_settings s;
    s.window_size = 0;
    BOOST_TEST(refused(s, "window_size"));
    s.window_size = 1'000'001;  // (24 MB of buckets at 1,000,000; 100 GB at 2^32 - 1)
    BOOST_TEST(refused(s, "window_size"));
    s.window_size = 0xFFFFFFFF;
    BOOST_TEST(refused(s, "window_size"));
    s = {};
    s.minimum_calls = 0;
    BOOST_TEST(refused(s, "minimum_calls"));
    s = {};
    s.failure_rate = 0;
    BOOST_TEST(refused(s, "failure_rate"));
    s.failure_rate = 1.5;
    BOOST_TEST(refused(s, "failure_rate"));
    s = {};
    s.slow_rate = -1;
    BOOST_TEST(refused(s, "slow_rate"));
    s = {};
    s.slow_call = 0s;
    BOOST_TEST(refused(s, "slow_call"));
    s = {};
    s.half_open_calls = 0;
    BOOST_TEST(refused(s, "half_open_calls"));
}

BOOST_AUTO_TEST_CASE(half_open_trials_that_never_end_reopen_it_after_the_max_wait) {
    // resilience4j's maxWaitDurationInHalfOpenState: 0 waits for every trial;
    // 5 s opens it again once the trials have been out that long.
    breaker_settings s = small(1, 1, 0.5);
    s.half_open_calls = 2;
    s.break_duration = [](std::uint32_t) { return nanoseconds(10s); };
    s.half_open_max_wait = 5s;
    breaker_fsm b(s);
    BOOST_TEST(call(b, 0s, true));    // open until 10 s
    BOOST_TEST(b.try_acquire(10s));   // trial 1, never ends
    BOOST_TEST(b.try_acquire(12s));   // trial 2, never ends
    BOOST_TEST(!b.try_acquire(14s));  // both out, the wait not over
    std::optional<steadfast::detail::breaker_transition> moved;
    BOOST_TEST(!b.try_acquire(15s, &moved));  // 5 s in half-open: open again
    BOOST_REQUIRE(moved.has_value());
    BOOST_TEST((moved->from == breaker_state::half_open && moved->to == breaker_state::open));
    BOOST_TEST((b.state(15s) == breaker_state::open));
    BOOST_TEST(b.open_until() == nanoseconds(25s));
    // A trial's outcome that comes after the wait ran out opens it as well.
    breaker_fsm c(s);
    BOOST_TEST(call(c, 0s, true));
    BOOST_TEST(c.try_acquire(10s));
    auto t = c.record(16s, false, quick);
    BOOST_TEST((t.has_value() && t->to == breaker_state::open));
    // Without the setting: the trials are waited for, however long.
    s.half_open_max_wait = nanoseconds::zero();
    breaker_fsm d(s);
    BOOST_TEST(call(d, 0s, true));
    BOOST_TEST(d.try_acquire(10s));
    BOOST_TEST(d.try_acquire(11s));
    BOOST_TEST(!d.try_acquire(std::chrono::hours(1000)));
    BOOST_TEST((d.state(std::chrono::hours(1000)) == breaker_state::half_open));
    s.half_open_max_wait = -1s;
    BOOST_CHECK_THROW(breaker_fsm{s}, std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(the_time_is_read_only_when_a_decision_needs_it) {
    // A clock that counts its reads (a read costs as much as the rest of a
    // closed breaker's work).
    int reads = 0;
    nanoseconds clock = 7s;
    const auto read = [&] {
        ++reads;
        return clock;
    };
    using steadfast::detail::lazy_time;
    breaker_settings s = small(4, 4, 0.5);
    s.break_duration = [](std::uint32_t) { return nanoseconds(10s); };
    s.half_open_calls = 1;
    breaker_fsm b(s);
    // Closed, a count window: permits and outcomes read nothing...
    for (int i = 0; i < 3; ++i) {
        BOOST_TEST(b.try_acquire(lazy_time(read)));
        BOOST_TEST(!b.record(lazy_time(read), i == 0, quick).has_value());
    }
    BOOST_TEST(reads == 0);
    // ...until an outcome opens it: one read, and the break starts then.
    BOOST_TEST(b.try_acquire(lazy_time(read)));
    auto opened = b.record(lazy_time(read), true, quick);  // 2 of 4 failed
    BOOST_TEST((opened.has_value() && opened->to == breaker_state::open));
    BOOST_TEST(reads == 1);
    BOOST_TEST(b.open_until() == nanoseconds(17s));
    // Open: every permit asked for reads the time (once).
    clock = 16s;
    BOOST_TEST(!b.try_acquire(lazy_time(read)));
    BOOST_TEST(reads == 2);
    clock = 17s;
    BOOST_TEST(b.try_acquire(lazy_time(read)));  // half-open: the trial
    BOOST_TEST(reads == 3);
    auto closed = b.record(lazy_time(read), false, quick);
    BOOST_TEST((closed.has_value() && closed->to == breaker_state::closed));
    BOOST_TEST(reads == 4);
    // A time window reads the time for every outcome (its bucket), once.
    breaker_settings ts = small(10, 100, 0.5);
    ts.window = breaker_settings::window_kind::time;
    breaker_fsm tb(ts);
    reads = 0;
    BOOST_TEST(tb.try_acquire(lazy_time(read)));
    BOOST_TEST(!tb.record(lazy_time(read), true, quick).has_value());
    BOOST_TEST(reads == 1);
    BOOST_TEST(tb.window(clock).failures == 1u);  // in the bucket of the time read
}

BOOST_AUTO_TEST_SUITE_END()
