// The retry coroutine on virtual time: every stop and classification path,
// per-attempt timeout, Retry-After, budget, cancellation, nesting, RocketMQ.
#include <steadfast/engine.hpp>
#include <steadfast/engine/detail/attempt_watch.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <steadfast_test/manual_flag.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using std::chrono::nanoseconds;
using steadfast_test::erased;
using steadfast_test::secs;
using steadfast_test::virtual_sleep;
using steadfast_test::virtual_time;

namespace {
using ec_result = boost::system::result<int>;

// An attempt that fails with `ec` until attempt number `succeed_at`.
auto failing_until(int succeed_at, error_code ec = asio::error::connection_refused) {
    return [=](const attempt_context& ctx) -> asio::awaitable<ec_result> {
        if (static_cast<int>(ctx.number) < succeed_at) co_return ec;
        co_return static_cast<int>(ctx.number);
    };
}

}  // namespace

using steadfast_test::manual_flag;

BOOST_AUTO_TEST_SUITE(engine_retry)

BOOST_AUTO_TEST_CASE(instant_success_makes_one_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(retry_policy{}, failing_until(1)));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 1u);
    BOOST_TEST(r.value().value() == 1);
    BOOST_TEST(r.elapsed().count() == 0);
}

BOOST_AUTO_TEST_CASE(retries_with_exact_backoff_then_succeeds) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::exponential(1s, 2.0, 30s)).with_stop(stop::max_attempts(10));
    std::vector<std::int64_t> starts;
    p = p.with_hooks({.before_attempt = [&](const attempt_context& c) { starts.push_back(secs(c.elapsed)); }});
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, failing_until(5)));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 5u);
    BOOST_TEST(starts == (std::vector<std::int64_t>{0, 1, 3, 7, 15}), boost::test_tools::per_element());
    BOOST_TEST(secs(r.elapsed()) == 15);
}

BOOST_AUTO_TEST_CASE(attempts_exhausted_reports_why_and_last_error) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(3));
    std::optional<retry_summary> gave_up;
    p = p.with_hooks({.on_give_up = [&](const retry_summary& s) { gave_up = s; }});
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, failing_until(100)));
    BOOST_TEST(!r.ok());
    BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST((r.error() == error::attempts_exhausted));
    BOOST_TEST((r.last_error() == asio::error::connection_refused));
    BOOST_TEST(r.attempts() == 3u);
    BOOST_TEST(secs(r.elapsed()) == 2);
    BOOST_TEST(r.has_value());  // the last attempt returned (an error value)
    BOOST_REQUIRE(gave_up.has_value());
    BOOST_TEST(gave_up->attempts == 3u);
}

BOOST_AUTO_TEST_CASE(deadline_stops_before_a_useless_sleep) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::fixed(4s)).with_stop(stop::max_elapsed(10s));
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, failing_until(100)));
    BOOST_TEST((r.reason() == stop_reason::deadline));
    BOOST_TEST(r.attempts() == 3u);  // at 0, 4, 8; a fourth would start at 12
    BOOST_TEST(secs(r.elapsed()) == 8);
}

BOOST_AUTO_TEST_CASE(permanent_errors_are_not_retried) {
    virtual_time vt;
    asio::io_context ioc;
    auto attempt = [](const attempt_context&) -> asio::awaitable<attempt_result<std::string>> {
        co_return attempt_result<std::string>::fail(asio::error::access_denied);
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(retry_policy{}, attempt));
    BOOST_TEST((r.reason() == stop_reason::permanent));
    BOOST_TEST(r.attempts() == 1u);
    BOOST_TEST((r.last_error() == asio::error::access_denied));
}

BOOST_AUTO_TEST_CASE(exceptions_are_classified) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(3));
    auto throws = [](const attempt_context& c) -> asio::awaitable<int> {
        if (c.number < 3) throw std::runtime_error("flaky");
        co_return 42;
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, throws));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value() == 42);

    auto always = [](const attempt_context&) -> asio::awaitable<void> {
        throw std::runtime_error("down");
        co_return;
    };
    auto r2 = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, always));
    BOOST_TEST((r2.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST((r2.last_error() == error::exception_thrown));
    BOOST_REQUIRE(r2.last_exception());
    BOOST_CHECK_THROW(std::rethrow_exception(r2.last_exception()), std::runtime_error);

    // A thrown operation_aborted is a cancellation and is never retried.
    auto aborted = [](const attempt_context&) -> asio::awaitable<void> {
        throw boost::system::system_error(asio::error::operation_aborted);
        co_return;
    };
    auto r3 = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, aborted));
    BOOST_TEST((r3.reason() == stop_reason::cancelled));
    BOOST_TEST(r3.attempts() == 1u);

    // A user classifier can make any exception permanent.
    auto strict = p.with_exception_classifier(
        [](const std::exception_ptr&) { return classification::permanent(make_error_code(error::exception_thrown)); });
    auto r4 = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(strict, always));
    BOOST_TEST((r4.reason() == stop_reason::permanent));
    BOOST_TEST(r4.attempts() == 1u);
}

BOOST_AUTO_TEST_CASE(custom_value_classifier) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(5));
    // An HTTP-like status: 503 is retryable, 200 success, 400 permanent.
    auto statuses = std::make_shared<std::vector<int>>(std::vector<int>{503, 503, 200});
    auto send = [statuses](const attempt_context& c) -> asio::awaitable<int> { co_return (*statuses)[c.number - 1]; };
    auto by_status = [](int status) {
        if (status == 200) return classification::success();
        if (status == 503) return classification::retryable(asio::error::try_again);
        return classification::permanent(asio::error::invalid_argument);
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, classified(send, by_status)));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 3u);
    BOOST_TEST(r.value() == 200);
}

// The attempt before, in both drivers: the next attempt sees its value (or
// exception) in its context, and a custom backoff waits what it asked for.
BOOST_AUTO_TEST_CASE(the_next_attempt_and_the_backoff_see_the_previous_outcome) {
    for (int form = 0; form < 2; ++form) {
        virtual_time vt;
        asio::io_context ioc;
        std::vector<std::string> seen;
        auto wait_as_told = backoff::custom([](std::uint32_t, nanoseconds, const previous_outcome& o) -> nanoseconds {
            const int* status = o.value<int>();
            return status && *status == 429 ? nanoseconds(7s) : nanoseconds(1s);
        });
        auto p = retry_policy{}.with_backoff(wait_as_told).with_stop(stop::max_attempts(4)).with_max_delay(10s);
        auto send = [&](const attempt_context& c) -> asio::awaitable<int> {
            if (!c.previous)
                seen.push_back("first");
            else if (c.previous->exception())
                seen.push_back("after a throw");
            else if (const int* v = c.previous->value<int>())
                seen.push_back("after " + std::to_string(*v));
            if (c.number == 2) throw std::runtime_error("boom");
            co_return c.number == 1 ? 429 : c.number == 3 ? 503 : 200;
        };
        auto by_status = [](int status) {
            return status == 200 ? classification::success() : classification::retryable(asio::error::try_again);
        };
        retry_result<int> r;
        if (form == 0) {
            r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, classified(send, by_status)));
        } else {
            steadfast::async_retry<manual_timer>(ioc.get_executor(), p, classified(send, by_status),
                                                 [&](retry_result<int> res) { r = std::move(res); });
            steadfast::run_virtual(ioc, manual_clock::time_point(1h));
        }
        BOOST_TEST_CONTEXT("form " << form) {
            BOOST_TEST(r.ok());
            BOOST_TEST(r.value() == 200);
            const std::vector<std::string> want{"first", "after 429", "after a throw", "after 503"};
            BOOST_TEST(seen == want, boost::test_tools::per_element());
            BOOST_TEST(secs(r.elapsed()) == 7 + 1 + 1);  // 7 s after the 429, 1 s after the others
        }
    }
}

// Attempt timeouts share one timer per io_context (detail/attempt_watch.hpp):
// many retries with different timeouts, started at different times, are each
// cut at their own deadline, in both drivers.
BOOST_AUTO_TEST_CASE(many_timeouts_each_at_its_own_deadline) {
    virtual_time vt;
    asio::io_context ioc;
    std::vector<std::string> cut;  // "<op>@<virtual ms>"
    int finished = 0;
    for (int op = 0; op < 6; ++op) {
        const auto timeout = std::chrono::milliseconds(3000 - 400 * op);  // later ops have shorter timeouts
        const auto p = retry_policy{}.with_attempt_timeout(timeout).with_stop(stop::max_attempts(1));
        auto slow = [&cut, op](const attempt_context&) -> asio::awaitable<error_code> {
            try {
                co_await virtual_sleep(1h);
            } catch (const boost::system::system_error&) {
                cut.push_back(std::to_string(op) + "@" +
                              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 manual_clock::now().time_since_epoch())
                                                 .count()));
            }
            co_return asio::error::timed_out;
        };
        auto done = [&finished](retry_result<error_code> r) {
            BOOST_TEST((r.last_error() == error_code(steadfast::error::attempt_timeout)));
            ++finished;
        };
        // Started 100 ms apart; half as composed operations, half as coroutines.
        manual_timer at(ioc, manual_clock::time_point(std::chrono::milliseconds(100 * op)));
        auto start = std::make_shared<manual_timer>(std::move(at));
        start->async_wait([&, p, slow, done, op, start](error_code) {
            if (op % 2 == 0) {
                steadfast::async_retry<manual_timer>(ioc.get_executor(), p, slow, done);
            } else {
                asio::co_spawn(ioc, steadfast::retry<manual_timer>(p, slow),
                               [done](std::exception_ptr, retry_result<error_code> r) { done(std::move(r)); });
            }
        });
    }
    steadfast::run_virtual(ioc, manual_clock::time_point(2h));
    BOOST_TEST(finished == 6);
    // op k starts at 100k ms with a timeout of 3000 - 400k ms: cut at 3000 - 300k ms.
    const std::vector<std::string> want{"5@1500", "4@1800", "3@2100", "2@2400", "1@2700", "0@3000"};
    BOOST_TEST(cut == want, boost::test_tools::per_element());
}

// The shared timer is cancelled once no timeout is pending: a retry with a
// one-hour timeout that succeeds at once does not keep run() for an hour.
BOOST_AUTO_TEST_CASE(a_pending_timeout_never_keeps_run_from_returning) {
    asio::io_context ioc;
    const auto p = retry_policy{}.with_attempt_timeout(1h);
    int ok = 0;
    // One attempt type and one handler type for the async_retry calls below
    // (each type instantiates async_retry again: compile time).
    const std::function<void(retry_result<error_code>)> count = [&](retry_result<error_code> r) { ok += r.ok(); };
    for (int i = 0; i < 3; ++i)
        steadfast::async_retry(
            ioc.get_executor(), p,
            erased([](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; }), count);
    asio::co_spawn(
        ioc, steadfast::retry(p, [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; }),
        [&](std::exception_ptr, retry_result<error_code> r) { ok += r.ok(); });
    // A deadline at the clock's end (never) next to a short timeout that
    // passes while the other attempt runs: the timer is never armed at the end.
    const auto never = retry_policy{}.with_stop(stop::max_elapsed(nanoseconds::max()));
    const auto short_timeout = retry_policy{}.with_attempt_timeout(10ms);
    auto sleep_for = [&ioc](std::chrono::milliseconds d) {
        return erased([&ioc, d](const attempt_context&) -> asio::awaitable<error_code> {
            asio::steady_timer t(ioc, d);
            co_await t.async_wait(asio::use_awaitable);
            co_return error_code{};
        });
    };
    for (int form = 0; form < 2; ++form) {
        if (form == 0) {
            steadfast::async_retry(ioc.get_executor(), never, sleep_for(30ms), count);
            steadfast::async_retry(ioc.get_executor(), short_timeout, sleep_for(1ms), count);
        } else {
            asio::co_spawn(ioc, steadfast::retry(never, sleep_for(30ms)),
                           [&](std::exception_ptr, retry_result<error_code> r) { ok += r.ok(); });
            asio::co_spawn(ioc, steadfast::retry(short_timeout, sleep_for(1ms)),
                           [&](std::exception_ptr, retry_result<error_code> r) { ok += r.ok(); });
        }
    }
    // An executor that counts as outstanding work is not kept by the shared
    // timer or a pooled attempt signal.
    steadfast::async_retry(
        asio::prefer(ioc.get_executor(), asio::execution::outstanding_work.tracked), p,
        [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; },
        [&](retry_result<error_code> r) { ok += r.ok(); });
    const auto t0 = std::chrono::steady_clock::now();
    ioc.run();  // would block for an hour, or for ever, if the timer or an executor stayed
    BOOST_TEST(ok == 9);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 30s));
}

// The shared timer's wait is not what keeps run() going on an io_context:
// the service counts one unit of work while any deadline is pending, and
// its timer's wait counts for nothing (detail/attempt_watch.hpp). So a
// deadline keeps run() until it fires, however its attempt waits; a timer
// left armed for a deadline that went keeps nothing; and the count stays
// right when run() is started again and the old wait is re-armed.
BOOST_AUTO_TEST_CASE(the_shared_timer_counts_a_deadline_not_its_wait) {
    using service = steadfast::detail::attempt_timeouts<asio::steady_timer>;
    for (const bool stranded : {false, true}) {
        BOOST_TEST_CONTEXT((stranded ? "a strand" : "the io_context's executor")) {
            asio::io_context ioc;  // (each its own: the first deadline's executor decides)
            const asio::any_io_executor ex =
                stranded ? asio::any_io_executor(asio::make_strand(ioc)) : asio::any_io_executor(ioc.get_executor());
            // 1. A deadline 20 ms on, and nothing else pending: run() returns
            // only once it has fired (the signal emitted on the watch's executor).
            auto w = service::of(ex).lease(ex);
            bool fired = false;
            w->signal.slot().assign([&](asio::cancellation_type) { fired = true; });
            w->attempt = 1;
            const auto t0 = std::chrono::steady_clock::now();
            service::of(ex).add(*w, std::chrono::steady_clock::now() + 20ms, 1);
            BOOST_TEST(service::of(ex).counts_work_by_hand());  // the case this test is for
            ioc.run();
            BOOST_TEST(fired);
            BOOST_TEST(w->timed_out);
            BOOST_TEST((std::chrono::steady_clock::now() - t0 >= 20ms));
            service::of(ex).give_back(std::move(w));
            // 2. A deadline an hour on that goes at once: the timer stays armed
            // for it, and run() returns anyway.
            ioc.restart();
            w = service::of(ex).lease(ex);
            w->attempt = 1;
            service::of(ex).add(*w, std::chrono::steady_clock::now() + 1h, 1);
            service::of(ex).remove(*w);
            ioc.run();
            // 3. Then a shorter one: the hour's wait is re-armed earlier (its
            // handler runs, aborted), and this one fires before run() returns.
            ioc.restart();
            fired = false;
            w->signal.slot().assign([&](asio::cancellation_type) { fired = true; });
            w->attempt = 2;
            service::of(ex).add(*w, std::chrono::steady_clock::now() + 10ms, 2);
            ioc.run();
            BOOST_TEST(fired);
            service::of(ex).give_back(std::move(w));
            // 4. The count is right after all this: a post runs, and run()
            // returns (an extra unit would hold it for ever, a missing one would
            // have stopped a run above before its deadline fired).
            ioc.restart();
            bool posted = false;
            asio::post(ioc, [&] { posted = true; });
            ioc.run();
            BOOST_TEST(posted);
        }
    }
}

// A server's Retry-After wait is never cut short, not even by the gate
// opening (which ends an ordinary backoff sleep early).
BOOST_AUTO_TEST_CASE(the_gate_does_not_shorten_a_retry_after) {
    virtual_time vt;
    asio::io_context ioc;
    auto gate = std::make_shared<manual_flag>();
    gate->set(true);
    const auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_max_delay(1min).with_attempt_when(gate);
    std::vector<std::int64_t> starts;
    auto send = [&](const attempt_context&) -> asio::awaitable<attempt_result<int>> {
        starts.push_back(secs(manual_clock::now().time_since_epoch()));
        if (starts.size() == 1) co_return attempt_result<int>::retry(asio::error::try_again, 30s);
        co_return 200;
    };
    // The gate closes and opens again 5 s into the 30 s wait.
    manual_timer blink(ioc, manual_clock::time_point(5s));
    blink.async_wait([&](error_code) {
        gate->set(false);
        gate->set(true);
    });
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, send));
    BOOST_TEST(r.ok());
    BOOST_TEST(starts == (std::vector<std::int64_t>{0, 30}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(per_attempt_timeout_cancels_and_retries) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(5)).with_attempt_timeout(2s);
    std::vector<std::string> events;
    p = p.with_hooks({.after_attempt = [&](const attempt_context& c, const classification& cl, const decision&) {
        events.push_back(std::to_string(c.number) + ":" + cl.ec.message());
    }});
    int cancelled_attempts = 0;
    auto slow_then_fast = [&](const attempt_context& c) -> asio::awaitable<int> {
        try {
            co_await virtual_sleep(c.number < 3 ? 60s : 1s);
        } catch (const boost::system::system_error& e) {
            if (e.code() == asio::error::operation_aborted) ++cancelled_attempts;
            throw;
        }
        co_return 7;
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, slow_then_fast));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 3u);
    BOOST_TEST(cancelled_attempts == 2);
    BOOST_TEST(secs(r.elapsed()) == 2 + 1 + 2 + 1 + 1);  // two timeouts with sleeps, then 1 s of work
    BOOST_TEST(events[0] == "1:" + make_error_code(error::attempt_timeout).message());
}

// Issue 9, finding 14: a Retry-After of 30 s under backoff::fixed(100ms)
// retried after 100 ms (the hint was clamped down to the backoff's cap).
// Pushback is never shortened: within the policy's maximum delay it is waited
// out; beyond it the retry stops with stop_reason::pushback, unless the policy
// says to wait it out.
BOOST_AUTO_TEST_CASE(retry_after_is_never_shortened) {
    auto attempt = [](const attempt_context& c) -> asio::awaitable<attempt_result<int>> {
        if (c.number == 1) co_return attempt_result<int>::retry(asio::error::try_again, nanoseconds(5s));
        if (c.number == 2) co_return attempt_result<int>::retry(asio::error::try_again, nanoseconds(24h));
        co_return 1;
    };
    for (bool wait_it_out : {false, true}) {
        virtual_time vt;
        asio::io_context ioc;
        auto p =
            retry_policy{}.with_backoff(backoff::fixed(100ms)).with_stop(stop::max_attempts(3)).with_max_delay(30s);
        if (wait_it_out) p = p.with_pushback(pushback_rule::wait_it_out);
        std::vector<std::int64_t> delays;
        p = p.with_hooks({.after_attempt = [&](const attempt_context&, const classification&, const decision& d) {
            if (d.what == decision::action::retry) delays.push_back(secs(d.delay));
        }});
        auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, attempt));
        BOOST_TEST_CONTEXT("wait_it_out " << wait_it_out) {
            if (wait_it_out) {
                BOOST_TEST(r.ok());
                BOOST_TEST(delays == (std::vector<std::int64_t>{5, 86400}), boost::test_tools::per_element());
                BOOST_TEST(secs(r.elapsed()) == 5 + 86400);
            } else {
                BOOST_TEST((r.reason() == stop_reason::pushback));
                BOOST_TEST(r.attempts() == 2u);
                BOOST_TEST((r.error() == make_error_code(error::pushback)));
                BOOST_TEST(delays == (std::vector<std::int64_t>{5}), boost::test_tools::per_element());
                BOOST_TEST(secs(r.elapsed()) == 5);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(budget_exhaustion_stops_with_its_own_reason) {
    virtual_time vt;
    asio::io_context ioc;
    auto budget = std::make_shared<retry_budget>(retry_budget::options{.capacity = 10, .retry_cost = 5});
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::never()).with_budget(budget);
    std::vector<retry_result<ec_result>> results;
    for (int i = 0; i < 3; ++i)
        asio::co_spawn(ioc, steadfast::retry<manual_timer>(p, failing_until(1000)),
                       [&](std::exception_ptr, retry_result<ec_result> r) { results.push_back(std::move(r)); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(results.size() == 3u);
    std::uint32_t total_attempts = 0;
    for (auto& r : results) {
        BOOST_TEST((r.reason() == stop_reason::budget));
        total_attempts += r.attempts();
    }
    BOOST_TEST(total_attempts == 3u + 2u);  // three first attempts, two paid retries
    BOOST_TEST(budget->available() == 0u);
}

BOOST_AUTO_TEST_CASE(cancellation_during_sleep_is_prompt_and_clean) {
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    auto p = retry_policy{}.with_backoff(backoff::fixed(1h)).with_stop(stop::never());
    std::optional<retry_result<ec_result>> out;
    asio::co_spawn(ioc, steadfast::retry<manual_timer>(p, failing_until(1000)),
                   asio::bind_cancellation_slot(
                       sig.slot(), [&](std::exception_ptr, retry_result<ec_result> r) { out = std::move(r); }));
    manual_timer later(ioc, 5s);
    later.async_wait([&](error_code) { sig.emit(asio::cancellation_type::terminal); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(out->attempts() == 1u);
    BOOST_TEST(secs(out->elapsed()) == 5);
    BOOST_TEST(secs(vt.now()) == 5);  // nothing waited out the hour
}

BOOST_AUTO_TEST_CASE(cancellation_during_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    int aborted = 0;
    auto hang = [&](const attempt_context&) -> asio::awaitable<int> {
        try {
            co_await virtual_sleep(10h);
        } catch (const boost::system::system_error& e) {
            aborted += e.code() == asio::error::operation_aborted;
            throw;
        }
        co_return 1;
    };
    for (bool with_timeout : {false, true}) {
        auto p = retry_policy{}.with_stop(stop::never());
        if (with_timeout) p = p.with_attempt_timeout(1h);  // takes the racing path
        std::optional<retry_result<int>> out;
        asio::co_spawn(ioc, steadfast::retry<manual_timer>(p, hang),
                       asio::bind_cancellation_slot(
                           sig.slot(), [&](std::exception_ptr, retry_result<int> r) { out = std::move(r); }));
        manual_timer later(ioc, 3s);
        later.async_wait([&](error_code) { sig.emit(asio::cancellation_type::terminal); });
        steadfast::run_virtual(ioc);
        ioc.restart();
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((out->reason() == stop_reason::cancelled));
        BOOST_TEST(out->attempts() == 1u);
        BOOST_TEST(secs(out->elapsed()) == 3);
        manual_clock::reset();
    }
    BOOST_TEST(aborted == 2);
}

BOOST_AUTO_TEST_CASE(nested_quick_retries_inside_slow_ones) {
    // The two-layer scheme: 3 quick tries 100 ms apart inside a slow ladder.
    virtual_time vt;
    asio::io_context ioc;
    int calls = 0;
    auto inner_policy = retry_policy{}.with_backoff(backoff::fixed(100ms)).with_stop(stop::max_attempts(3));
    auto outer_policy = retry_policy{}.with_backoff(backoff::schedule("10s 30s 1m")).with_stop(stop::max_attempts(5));
    auto send = [&](const attempt_context&) -> asio::awaitable<error_code> {
        ++calls;
        co_return calls < 8 ? error_code(asio::error::connection_reset) : error_code{};
    };
    auto outer_attempt = [&](const attempt_context&) -> asio::awaitable<error_code> {
        auto r = co_await steadfast::retry<manual_timer>(inner_policy, send);
        co_return r.ok() ? error_code{} : r.last_error();
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(outer_policy, outer_attempt));
    BOOST_TEST(r.ok());
    BOOST_TEST(calls == 8);
    BOOST_TEST(r.attempts() == 3u);  // 3 + 3 + 2 inner calls
    // 2 x 200 ms inside each failed outer attempt, 100 ms in the last, plus 10 s + 30 s.
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(r.elapsed()).count() == 40'500);
}

BOOST_AUTO_TEST_CASE(rocketmq_ladder_runs_hours_in_milliseconds) {
    virtual_time vt;
    asio::io_context ioc;
    auto p = retry_policy{}.with_backoff(backoff::rocketmq()).with_stop(stop::max_attempts(17));
    const auto wall = std::chrono::steady_clock::now();
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, failing_until(1000)));
    const auto real = std::chrono::steady_clock::now() - wall;
    BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST(r.attempts() == 17u);  // 16 retries
    BOOST_TEST(r.elapsed().count() == nanoseconds(4h + 45min + 40s).count());
    BOOST_TEST_MESSAGE("4h45m40s of virtual backoff took "
                       << std::chrono::duration_cast<std::chrono::microseconds>(real).count() << " us");
}

BOOST_AUTO_TEST_CASE(zero_delay_yields_to_other_work) {
    virtual_time vt;
    asio::io_context ioc;
    int other = 0;
    auto p = retry_policy{}.with_backoff(backoff::fixed(0s)).with_stop(stop::max_attempts(50));
    std::function<void()> tick = [&] {
        if (++other < 1000) asio::post(ioc, tick);
    };
    asio::post(ioc, tick);
    int seen_other_at_attempt_10 = -1;
    auto attempt = [&](const attempt_context& c) -> asio::awaitable<error_code> {
        if (c.number == 10) seen_other_at_attempt_10 = other;
        co_return asio::error::try_again;
    };
    auto r = steadfast_test::run_virtual(ioc, steadfast::retry<manual_timer>(p, attempt));
    BOOST_TEST(r.attempts() == 50u);
    BOOST_TEST(seen_other_at_attempt_10 >= 5);  // the loop interleaved with the other handler
}

// stop_in_flight::let_finish: stop-when turning true mid-attempt lets the
// attempt run to its end (not cancelled: 10 s, not 5), its success is the
// retry's and any other outcome ends it with `condition`, no sleep after;
// also when the attempt has a timeout of its own (watched for it: found by
// a review); a sleep is still cut short at once; the caller's cancellation
// still reaches the attempt. Beside it, the default (cancel) on the same
// script. Both drivers.
BOOST_AUTO_TEST_CASE(stop_when_that_lets_the_attempt_finish) {
    for (auto mode : {stop_in_flight::let_finish, stop_in_flight::cancel}) {
        for (int shape = 0; shape < 3; ++shape) {
            const bool succeeds = shape != 1, timed = shape == 2;
            auto stop = std::make_shared<manual_flag>();
            auto p = retry_policy{}
                         .with_backoff(backoff::fixed(1h))
                         .with_stop(stop::max_attempts(3))
                         .with_stop_when(stop, mode);
            if (timed) p = p.with_attempt_timeout(1h);
            auto ended = std::make_shared<int>(0);
            auto attempt = [succeeds, ended](const attempt_context&) -> asio::awaitable<ec_result> {
                co_await virtual_sleep(10s);
                ++*ended;
                if (succeeds) co_return 7;
                co_return make_error_code(asio::error::connection_refused);
            };
            auto both = steadfast_test::run_both(p, attempt, [&](asio::io_context& ioc) {
                stop->set(false);
                *ended = 0;
                auto t = std::make_shared<manual_timer>(ioc, 5s);
                t->async_wait([t, stop](error_code) { stop->set(true); });
            });
            for (int form = 0; form < 2; ++form) {
                BOOST_TEST_CONTEXT("let_finish " << (mode == stop_in_flight::let_finish) << ", succeeds " << succeeds
                                                 << ", timed " << timed << ", form " << form) {
                    BOOST_TEST(both[form].attempts() == 1u);
                    if (mode == stop_in_flight::let_finish) {
                        BOOST_TEST(secs(both[form].elapsed()) == 10);  // ran to its end, and no sleep after
                        BOOST_TEST((both[form].reason() == (succeeds ? stop_reason::success : stop_reason::condition)));
                        if (succeeds) BOOST_TEST(both[form].value().value() == 7);
                    } else {
                        BOOST_TEST(secs(both[form].elapsed()) == 5);  // cut short
                        BOOST_TEST((both[form].reason() == stop_reason::condition));
                    }
                }
            }
        }
    }
    // A sleep ends at once; an attempt that fails at once is not made again.
    auto stop = std::make_shared<manual_flag>();
    auto p = retry_policy{}
                 .with_backoff(backoff::fixed(1h))
                 .with_stop(stop::max_attempts(3))
                 .with_stop_when(stop, stop_in_flight::let_finish);
    auto both = steadfast_test::run_both(p, failing_until(100), [&](asio::io_context& ioc) {
        stop->set(false);
        auto t = std::make_shared<manual_timer>(ioc, 30min);
        t->async_wait([t, stop](error_code) { stop->set(true); });
    });
    for (int form = 0; form < 2; ++form) {
        BOOST_TEST_CONTEXT("sleep, form " << form) {
            BOOST_TEST((both[form].reason() == stop_reason::condition));
            BOOST_TEST(both[form].attempts() == 1u);
            BOOST_TEST(std::chrono::duration_cast<std::chrono::minutes>(both[form].elapsed()).count() == 30);
        }
    }
    // The caller's cancellation still ends the attempt in flight.
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    auto hang = [](const attempt_context&) -> asio::awaitable<int> {
        co_await virtual_sleep(10h);
        co_return 1;
    };
    std::optional<retry_result<int>> out;
    asio::co_spawn(
        ioc,
        steadfast::retry<manual_timer>(p.with_stop_when(std::make_shared<manual_flag>(), stop_in_flight::let_finish),
                                       hang),
        asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr, retry_result<int> r) { out = std::move(r); }));
    manual_timer later(ioc, 3s);
    later.async_wait([&](error_code) { sig.emit(asio::cancellation_type::terminal); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(secs(out->elapsed()) == 3);
    // A value that is not one of the two is refused.
    BOOST_CHECK_THROW(retry_policy{}.with_stop_when(stop, static_cast<stop_in_flight>(7)), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
