// Stop conditions, the retry budget and retry_state's decisions: no I/O at all.
#include <steadfast/engine/budget.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/stop.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;

BOOST_AUTO_TEST_SUITE(engine_stop_condition)

BOOST_AUTO_TEST_CASE(max_attempts) {
    auto s = stop::max_attempts(3);
    BOOST_TEST(!s.check(2, 0s, 1s).has_value());
    BOOST_TEST((s.check(3, 0s, 1s) == stop_reason::attempts_exhausted));
    BOOST_TEST(!s.deadline().has_value());
}

BOOST_AUTO_TEST_CASE(max_elapsed_covers_the_next_sleep) {
    auto s = stop::max_elapsed(10s);
    BOOST_TEST(!s.check(100, 5s, 4s).has_value());
    BOOST_TEST((s.check(1, 5s, 5s) == stop_reason::deadline));  // would start at the limit
    BOOST_TEST((s.check(1, 11s, 0s) == stop_reason::deadline));
    BOOST_TEST((s.check(1, 0s, nanoseconds::max()) == stop_reason::deadline));  // no overflow
    BOOST_TEST(s.deadline()->count() == nanoseconds(10s).count());
}

BOOST_AUTO_TEST_CASE(or_and_compose) {
    auto any = stop::max_attempts(3) || stop::max_elapsed(10s);
    BOOST_TEST((any.check(3, 0s, 0s) == stop_reason::attempts_exhausted));
    BOOST_TEST((any.check(1, 10s, 0s) == stop_reason::deadline));
    BOOST_TEST(!any.check(2, 1s, 1s).has_value());
    BOOST_TEST(any.deadline()->count() == nanoseconds(10s).count());

    auto all = stop::max_attempts(3) && stop::max_elapsed(10s);
    BOOST_TEST(!all.check(3, 1s, 1s).has_value());
    BOOST_TEST(!all.check(1, 20s, 0s).has_value());
    BOOST_TEST(all.check(3, 20s, 0s).has_value());
    BOOST_TEST(!all.deadline().has_value());  // time alone never stops it

    auto nested = (stop::max_elapsed(5s) || stop::max_elapsed(8s)) && stop::max_elapsed(3s);
    BOOST_TEST(nested.deadline()->count() == nanoseconds(5s).count());
    BOOST_TEST(!stop::never().check(1'000'000, 1000h, 1h).has_value());
}

BOOST_AUTO_TEST_CASE(invalid_values_are_refused) {
    BOOST_CHECK_THROW(stop::max_attempts(0), std::invalid_argument);
    BOOST_CHECK_THROW(stop::max_elapsed(0s), std::invalid_argument);
    BOOST_CHECK_THROW(stop::max_elapsed(-1s), std::invalid_argument);
    BOOST_CHECK_THROW(retry_policy{}.with_attempt_timeout(0s), std::invalid_argument);
    BOOST_CHECK_THROW(retry_policy{}.with_max_delay(-1ms), std::invalid_argument);
    BOOST_CHECK_THROW(retry_policy{}.with_budget(nullptr), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(engine_budget)

BOOST_AUTO_TEST_CASE(acquire_release_and_cap) {
    retry_budget b({.capacity = 12, .retry_cost = 5, .timeout_cost = 10, .success_refund = 1});
    BOOST_TEST(b.try_acquire(5));
    BOOST_TEST(b.try_acquire(5));
    BOOST_TEST(!b.try_acquire(5));
    BOOST_TEST(b.available() == 2u);
    b.release(100);
    BOOST_TEST(b.available() == 12u);
}

BOOST_AUTO_TEST_CASE(invalid_budgets_are_refused) {
    BOOST_CHECK_THROW(retry_budget({.capacity = 0}), std::invalid_argument);
    BOOST_CHECK_THROW(retry_budget({.capacity = 10, .retry_cost = 0}), std::invalid_argument);
    BOOST_CHECK_THROW(retry_budget({.capacity = 4, .retry_cost = 5, .timeout_cost = 5}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(engine_retry_state)

namespace {
const classification fail = classification::retryable(boost::asio::error::connection_refused);

// The delays one operation of `p` chooses for `n` failed attempts in a row (ns).
std::vector<std::int64_t> delay_sequence(const retry_policy& p, int n) {
    steadfast::retry_state st(p);
    std::vector<std::int64_t> out;
    for (int i = 0; i < n; ++i) {
        st.begin_attempt(0s);
        out.push_back(st.on_outcome(fail, 0s).delay.count());
    }
    return out;
}
}  // namespace

BOOST_AUTO_TEST_CASE(retry_then_attempts_exhausted) {
    auto p = retry_policy{}.with_backoff(backoff::exponential(1s, 2.0, 30s)).with_stop(stop::max_attempts(3));
    steadfast::retry_state st(p);
    BOOST_TEST(st.begin_attempt(0s).number == 1u);
    auto d = st.on_outcome(fail, 0s);
    BOOST_TEST((d.what == decision::action::retry));
    BOOST_TEST(d.delay.count() == nanoseconds(1s).count());
    st.begin_attempt(1s);
    BOOST_TEST(st.on_outcome(fail, 1s).delay.count() == nanoseconds(2s).count());
    st.begin_attempt(3s);
    d = st.on_outcome(fail, 3s);
    BOOST_TEST((d.what == decision::action::stop && d.reason == stop_reason::attempts_exhausted));
}

BOOST_AUTO_TEST_CASE(success_permanent_cancelled_stop_at_once) {
    retry_policy p;
    for (auto [c, want] :
         {std::pair{classification::success(), stop_reason::success},
          std::pair{classification::permanent(boost::asio::error::access_denied), stop_reason::permanent},
          std::pair{classification::cancelled(boost::asio::error::operation_aborted), stop_reason::cancelled}}) {
        steadfast::retry_state st(p);
        st.begin_attempt(0s);
        auto d = st.on_outcome(c, 0s);
        BOOST_TEST((d.what == decision::action::stop && d.reason == want));
    }
    // Cancellation is never retried, whatever the error code looks like to the default classifier.
    BOOST_TEST((classify_error(boost::asio::error::operation_aborted).kind == verdict::cancelled));
}

// The default classifier: errors that no retry can fix are permanent; those
// that the next attempt may not meet stay retryable.
BOOST_AUTO_TEST_CASE(default_classifier_knows_permanent_asio_errors) {
    namespace e = boost::asio::error;
    for (error_code ec : {error_code(e::host_not_found), error_code(e::service_not_found), error_code(e::access_denied),
                          error_code(e::no_permission), error_code(e::invalid_argument), error_code(e::bad_descriptor),
                          error_code(e::address_family_not_supported), error_code(e::operation_not_supported),
                          error_code(e::message_size)})
        BOOST_TEST((classify_error(ec).kind == verdict::permanent), ec.message());
    for (error_code ec : {error_code(e::connection_refused), error_code(e::connection_reset), error_code(e::timed_out),
                          error_code(e::host_unreachable), error_code(e::network_unreachable), error_code(e::try_again),
                          error_code(e::host_not_found_try_again), error_code(e::eof), error_code(e::broken_pipe)})
        BOOST_TEST((classify_error(ec).kind == verdict::retryable), ec.message());
    // A system_error thrown with a permanent code is permanent too.
    auto thrown = std::make_exception_ptr(boost::system::system_error(e::access_denied));
    BOOST_TEST((classify_exception(thrown).kind == verdict::permanent));
}

// Hooks combine: each event runs the first set's hook, then the second's.
BOOST_AUTO_TEST_CASE(hooks_combine_in_order) {
    std::vector<std::string> seen;
    retry_hooks metrics{
        .before_attempt = [&](const attempt_context& c) { seen.push_back("m" + std::to_string(c.number)); },
        .on_give_up = [&](const retry_summary&) { seen.push_back("m-give-up"); }};
    retry_hooks logging{
        .before_attempt = [&](const attempt_context& c) { seen.push_back("l" + std::to_string(c.number)); },
        .after_attempt = [&](const attempt_context&, const classification&,
                             const decision&) { seen.push_back("l-after"); }};
    auto p = retry_policy{}.with_hooks(metrics).with_more_hooks(logging);
    const auto& h = p.hooks();
    h.before_attempt(attempt_context{});
    h.after_attempt(attempt_context{}, classification{}, decision{});
    h.on_give_up(retry_summary{});
    BOOST_TEST(seen == (std::vector<std::string>{"m1", "l1", "l-after", "m-give-up"}),
               boost::test_tools::per_element());
    BOOST_TEST(!combine({}, {}).before_attempt);  // nothing set: nothing to call
}

// Issue 9, finding 11: a max delay below the backoff's cap clamps the base
// before jitter, so delays stay spread instead of piling up on the cap.
BOOST_AUTO_TEST_CASE(max_delay_clamps_before_jitter) {
    auto p = retry_policy{}
                 .with_backoff(backoff::exponential(1s, 2.0, 60s).with_jitter(jitter::full))
                 .with_max_delay(2s)
                 .with_stop(stop::never())
                 .with_seed(42);
    const auto delays = delay_sequence(p, 190);
    int at_cap = 0, total = 0;
    for (std::size_t i = 0; i < delays.size(); ++i) {
        BOOST_TEST(delays[i] <= nanoseconds(2s).count());
        if (i >= 1) {  // from the second retry on, the base is above the max delay
            ++total;
            if (delays[i] == nanoseconds(2s).count()) ++at_cap;
        }
    }
    BOOST_TEST(at_cap <= 2, at_cap << " of " << total << " delays exactly on the cap");
}

// Issue 9, finding 12: operations started one after the other draw
// unrelated jitter, not the same sequence shifted by one draw.
BOOST_AUTO_TEST_CASE(operations_draw_unrelated_jitter) {
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s).with_jitter(jitter::full)).with_stop(stop::never());
    const auto a = delay_sequence(p, 20), b = delay_sequence(p, 20);
    int shifted = 0, same = 0;
    for (std::size_t i = 0; i + 1 < a.size(); ++i) {
        if (a[i + 1] == b[i]) ++shifted;
        if (a[i] == b[i]) ++same;
    }
    BOOST_TEST(shifted == 0);
    BOOST_TEST(same == 0);
}

BOOST_AUTO_TEST_CASE(retry_after_hint_replaces_and_is_never_shortened) {
    auto p = retry_policy{}.with_backoff(backoff::exponential(1s, 2.0, 30s)).with_stop(stop::never());
    steadfast::retry_state st(p);
    st.begin_attempt(0s);
    auto d = st.on_outcome(classification::retryable(make_error_code(error::attempt_timeout), 7s), 0s);
    BOOST_TEST(d.delay.count() == nanoseconds(7s).count());
    BOOST_TEST(d.hinted);
    st.begin_attempt(7s);
    d = st.on_outcome(classification::retryable({}, 3600s), 7s);  // beyond the 30 s cap: stop, never sooner
    BOOST_TEST((d.what == decision::action::stop));
    BOOST_TEST((d.reason == stop_reason::pushback));
    // A hint under the backoff's own delay still replaces it (the server knows best).
    const auto slow = p.with_backoff(backoff::fixed(20s));  // retry_state keeps a reference to its policy
    steadfast::retry_state st3(slow);
    st3.begin_attempt(0s);
    BOOST_TEST(st3.on_outcome(classification::retryable({}, 2s), 0s).delay.count() == nanoseconds(2s).count());
    // A hint of exactly the cap is waited; on the last allowed attempt the
    // attempt limit is the reason, not the pushback.
    steadfast::retry_state st4(p);
    st4.begin_attempt(0s);
    BOOST_TEST(st4.on_outcome(classification::retryable({}, 30s), 0s).delay.count() == nanoseconds(30s).count());
    const auto two = p.with_stop(stop::max_attempts(2));
    steadfast::retry_state st5(two);
    st5.begin_attempt(0s);
    st5.on_outcome(classification::retryable({}, 1s), 0s);
    st5.begin_attempt(1s);
    BOOST_TEST((st5.on_outcome(classification::retryable({}, 3600s), 1s).reason == stop_reason::attempts_exhausted));
    auto patient = p.with_max_delay(10s).with_pushback(pushback_rule::wait_it_out);
    steadfast::retry_state st2(patient);
    st2.begin_attempt(0s);
    BOOST_TEST(st2.on_outcome(classification::retryable({}, 3600s), 0s).delay.count() == nanoseconds(3600s).count());
}

BOOST_AUTO_TEST_CASE(deadline_bounds_time_left_and_timeout) {
    auto p = retry_policy{}.with_backoff(backoff::fixed(4s)).with_stop(stop::max_elapsed(10s)).with_attempt_timeout(3s);
    steadfast::retry_state st(p);
    auto ctx = st.begin_attempt(0s);
    BOOST_TEST(ctx.time_left->count() == nanoseconds(10s).count());
    BOOST_TEST(ctx.timeout->count() == nanoseconds(3s).count());
    BOOST_TEST((st.on_outcome(fail, 3s).what == decision::action::retry));  // next at 7s
    ctx = st.begin_attempt(7s);
    BOOST_TEST(ctx.timeout->count() == nanoseconds(3s).count());
    ctx = st.begin_attempt(8500ms);
    BOOST_TEST(ctx.timeout->count() == nanoseconds(1500ms).count());  // time left is shorter
    BOOST_TEST((st.on_outcome(fail, 9s).reason == stop_reason::deadline));
}

BOOST_AUTO_TEST_CASE(budget_is_charged_and_refunded) {
    auto budget = std::make_shared<retry_budget>(
        retry_budget::options{.capacity = 20, .retry_cost = 5, .timeout_cost = 10, .success_refund = 1});
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::never()).with_budget(budget);
    steadfast::retry_state a(p);
    a.begin_attempt(0s);
    BOOST_TEST((a.on_outcome(fail, 0s).what == decision::action::retry));
    BOOST_TEST(budget->available() == 15u);
    a.begin_attempt(1s);
    BOOST_TEST((a.on_outcome(classification::retryable(make_error_code(error::attempt_timeout)), 1s).what ==
                decision::action::retry));
    BOOST_TEST(budget->available() == 5u);
    a.begin_attempt(2s);
    BOOST_TEST((a.on_outcome(classification::success(), 2s).reason == stop_reason::success));
    BOOST_TEST(budget->available() == 15u);  // the last retry's cost comes back

    steadfast::retry_state b(p), c(p);
    b.begin_attempt(0s);
    BOOST_TEST((b.on_outcome(fail, 0s).what == decision::action::retry));  // 10 left
    b.begin_attempt(0s);
    BOOST_TEST((b.on_outcome(fail, 0s).what == decision::action::retry));  // 5 left
    c.begin_attempt(0s);
    BOOST_TEST((c.on_outcome(fail, 0s).what == decision::action::retry));  // 0 left
    b.begin_attempt(0s);
    auto d = b.on_outcome(fail, 0s);
    BOOST_TEST((d.what == decision::action::stop && d.reason == stop_reason::budget));
    steadfast::retry_state fresh(p);
    fresh.begin_attempt(0s);  // a first attempt is never refused
    BOOST_TEST((fresh.on_outcome(classification::success(), 0s).reason == stop_reason::success));
    BOOST_TEST(budget->available() == 1u);
}

BOOST_AUTO_TEST_CASE(seeded_jitter_is_reproducible) {
    auto p = retry_policy{}
                 .with_backoff(backoff::exponential(100ms, 2.0, 10s).with_jitter(jitter::full))
                 .with_stop(stop::never())
                 .with_seed(42);
    auto sequence = [](const retry_policy& pol) { return delay_sequence(pol, 8); };
    BOOST_TEST(sequence(p) == sequence(p), boost::test_tools::per_element());
    BOOST_TEST((sequence(p) != sequence(p.with_seed(43))));
    std::uint64_t n = 0;
    auto injected = p.with_random([&n] { return n++; });
    auto v = sequence(injected);
    BOOST_TEST(v[0] == 0);  // 0 % (100ms + 1)
    BOOST_TEST(v[1] == 1);  // 1 % (200ms + 1)
}

BOOST_AUTO_TEST_SUITE_END()
