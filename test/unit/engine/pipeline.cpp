// The pipeline (issue 31): rate limit -> concurrency limit -> retry (with the
// breaker) -> hedging -> timeout -> attempt, and its two drivers, on virtual
// time. Hedging's own decisions are tested in hedge.cpp (detail::hedge_fsm);
// these cases drive them with real attempts.
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <steadfast_test/counting_allocator.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::alloc_stats;
using steadfast_test::counting_allocator;
using steadfast_test::virtual_time;
using vpipeline = basic_pipeline<manual_timer>;
using vrate = basic_rate_limit<manual_timer>;

namespace {

std::int64_t ms(std::chrono::nanoseconds d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// What one attempt saw: its context, when it started and ended (virtual
// ms), and the cancellation types that reached it.
struct seen {
    std::uint64_t number = 0;
    std::uint32_t hedge = 0;
    std::optional<std::int64_t> timeout_ms;
    std::int64_t elapsed_ms = 0;  // as its context says
    std::int64_t started = 0, ended = -1;
    asio::cancellation_type cancelled = asio::cancellation_type::none;
};

// A scripted attempt: script(ctx) says how long it takes and what it
// returns; it waits on a manual_timer, so any cancellation ends it early
// (with operation_aborted).
struct scripted {
    struct step {
        std::chrono::nanoseconds takes;
        attempt_result<int> answer;
    };
    std::function<step(const attempt_context&)> script;
    std::shared_ptr<std::vector<seen>> log = std::make_shared<std::vector<seen>>();

    asio::awaitable<attempt_result<int>> operator()(const attempt_context& ctx) const {
        const std::size_t i = log->size();
        log->push_back({ctx.number, ctx.hedge, ctx.timeout ? std::optional(ms(*ctx.timeout)) : std::nullopt,
                        ms(ctx.elapsed), ms(virtual_time::now())});
        step s = script(ctx);
        manual_timer t(co_await asio::this_coro::executor, s.takes);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        (*log)[i].ended = ms(virtual_time::now());
        (*log)[i].cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
        if (ec) co_return attempt_result<int>::retry(ec);
        co_return std::move(s.answer);
    }
};

scripted::step ok_after(std::chrono::nanoseconds d, int v) {
    return {d, attempt_result<int>(v)};
}
scripted::step fail_after(std::chrono::nanoseconds d, error_code ec, std::optional<nanoseconds> hint = {}) {
    return {d, attempt_result<int>::retry(ec, hint)};
}
scripted::step permanent_after(std::chrono::nanoseconds d, error_code ec) {
    return {d, attempt_result<int>::fail(ec)};
}
const auto forever = std::chrono::hours(24 * 365);

// Compile time: each attempt type and each handler type instantiates the
// pipeline again (two async_retry state machines, hedged and not). So the
// cases pass attempts through erased() and handlers through done_fn and
// spawned_fn, one type per result type (this file: 79 -> 37 s under clang's
// ASan); where a handler's associated executor, allocator or slot is under
// test, only the function inside its binder is erased.
using steadfast_test::erased;
template <class A>
using done_fn = std::function<void(retry_result_for<A>)>;  // async_execute's handler
template <class A>
using spawned_fn = std::function<void(std::exception_ptr, retry_result_for<A>)>;  // co_spawn(execute())'s

// Terminal, partial and total: what an attempt sees when it is cancelled
// with every type (its coroutine lets all three through).
const auto every_type =
    asio::cancellation_type::terminal | asio::cancellation_type::partial | asio::cancellation_type::total;

const error_code unavailable = asio::error::connection_refused;

// One call on `ioc` on virtual time.
template <class Attempt>
retry_result<attempt_result<int>> run(asio::io_context& ioc, const vpipeline& p, Attempt a) {
    return steadfast_test::run_virtual(ioc, execute<manual_timer>(p, erased(std::move(a))));
}

const auto no_retry = retry_policy{}.with_stop(stop::max_attempts(1));

// Starts one call through driver 0 (async_execute) or 1 (execute() in a
// coroutine of its own), cancellable through `slot`; its result goes to
// `out` (execute() must end with a value, never an exception).
template <class Attempt>
void start(int driver, asio::io_context& ioc, const vpipeline& p, const Attempt& a, asio::cancellation_slot slot,
           std::optional<retry_result<attempt_result<int>>>& out) {
    if (driver == 0)
        async_execute<manual_timer>(
            ioc, p, erased(a),
            asio::bind_cancellation_slot(slot, done_fn<Attempt>([&out](auto r) { out.emplace(std::move(r)); })));
    else
        asio::co_spawn(ioc, execute<manual_timer>(p, erased(a)),
                       asio::bind_cancellation_slot(slot, spawned_fn<Attempt>([&out](std::exception_ptr e, auto r) {
                                                        BOOST_TEST(!e);  // a value, not an exception
                                                        out.emplace(std::move(r));
                                                    })));
}

// One call through `driver`, run on virtual time until nothing is left (or
// `until`), then its io_context destroyed: its result, or none if it did
// not end.
template <class Attempt>
std::optional<retry_result<attempt_result<int>>> run_through(
    int driver, const vpipeline& p, const Attempt& a,
    manual_clock::time_point until = manual_clock::time_point::max()) {
    asio::cancellation_signal never;  // (outlives the io_context and what it destroys)
    asio::io_context ioc;
    std::optional<retry_result<attempt_result<int>>> out;
    start(driver, ioc, p, a, never.slot(), out);
    steadfast::run_virtual(ioc, until);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_pipeline)

BOOST_AUTO_TEST_CASE(builders_refuse_bad_values_and_leave_the_original_as_it_was) {
    asio::io_context ioc;
    const vpipeline p;
    auto refused = [](auto f, const std::string& words) {
        try {
            f();
        } catch (const std::invalid_argument& e) {
            BOOST_TEST(std::string(e.what()).find(words) != std::string::npos, e.what());
            return;
        }
        BOOST_FAIL("accepted: " + words);
    };
    refused([&] { (void)p.with_rate_limit(nullptr); }, "needs a rate limit");
    refused([&] { (void)p.with_concurrency_limit(nullptr); }, "needs a concurrency limit");
    refused([&] { (void)p.with_breaker(nullptr); }, "needs a circuit breaker");
    refused([&] { (void)p.with_hedging({.max_attempts = 0}); }, "max_attempts must be from 1 to 8");
    refused([&] { (void)p.with_hedging({.max_attempts = 9}); }, "max_attempts must be from 1 to 8");
    refused([&] { (void)p.with_hedging({.max_attempts = 2, .delay = -1ns}); }, "delay must not be negative");
    refused([&] { (void)p.with_timeout(0ns); }, "timeout must be positive");

    const auto t = p.with_timeout(50ms);
    BOOST_TEST(!p.timeout().has_value());
    BOOST_TEST(ms(*t.timeout()) == 50);
    // Without hedging the timeout is the retry's per-attempt timeout; with
    // hedging, each hedge's own, and the retry's attempt (the hedged call) has none.
    BOOST_TEST(ms(*t.policy().attempt_timeout()) == 50);
    const auto h = t.with_hedging({.max_attempts = 3, .delay = 10ms});
    BOOST_TEST(!h.policy().attempt_timeout().has_value());
    BOOST_TEST(ms(*t.policy().attempt_timeout()) == 50);
    // The tighter of the pipeline's timeout and one already in the policy.
    BOOST_TEST(
        ms(*p.with_retry(retry_policy{}.with_attempt_timeout(20ms)).with_timeout(50ms).policy().attempt_timeout()) ==
        20);
    BOOST_TEST(
        ms(*p.with_retry(retry_policy{}.with_attempt_timeout(80ms)).with_timeout(50ms).policy().attempt_timeout()) ==
        50);
    // The breaker goes into the policy, whichever builder came first.
    auto b = std::make_shared<circuit_breaker>(breaker_options{});
    BOOST_TEST((p.with_breaker(b).with_retry(no_retry).policy().breaker() == b));
    BOOST_TEST((p.with_retry(no_retry).with_breaker(b).policy().breaker() == b));
    BOOST_TEST(!p.policy().breaker());
}

BOOST_AUTO_TEST_CASE(a_slow_attempt_is_hedged_and_the_first_success_wins) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(forever, 1) : ok_after(10ms, 2); }};
    const auto p = vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 3, .delay = 100ms});
    bool all_ended_first = false;
    std::optional<retry_result<attempt_result<int>>> out;
    async_execute<manual_timer>(ioc, p, erased(a), done_fn<decltype(a)>([&](retry_result<attempt_result<int>> res) {
                                    // Structured: by the time the call completes, every attempt it
                                    // started has ended.
                                    all_ended_first = true;
                                    for (const seen& s : *a.log) all_ended_first = all_ended_first && s.ended >= 0;
                                    out.emplace(std::move(res));
                                }));
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(all_ended_first);
    const auto& r = *out;
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value().value() == 2);
    BOOST_TEST(r.attempts() == 1u);  // one retry attempt: one hedged call
    BOOST_TEST(ms(r.elapsed()) == 110);
    BOOST_REQUIRE(a.log->size() == 2u);  // the third never started: the second won first
    const seen& first = (*a.log)[0];
    const seen& hedge = (*a.log)[1];
    BOOST_TEST(first.number == 1u);
    BOOST_TEST(hedge.number == 1u);
    BOOST_TEST(first.hedge == 0u);
    BOOST_TEST(hedge.hedge == 1u);
    BOOST_TEST(hedge.started == 100);
    BOOST_TEST(hedge.elapsed_ms == 100);  // its context counts from the retry's start, as it started
    // The loser got every type of cancellation at once, and the call ended
    // only after it had ended.
    BOOST_TEST(first.ended == 110);
    BOOST_TEST((first.cancelled == every_type));
    BOOST_TEST((hedge.cancelled == asio::cancellation_type::none));
}

BOOST_AUTO_TEST_CASE(an_answer_before_the_delay_starts_no_hedge) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context&) { return ok_after(99ms, 7); }};
    const auto r = run(ioc, vpipeline{}.with_hedging({.max_attempts = 3, .delay = 100ms}), a);
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value().value() == 7);
    BOOST_TEST(a.log->size() == 1u);
    BOOST_TEST(ms(r.elapsed()) == 99);
}

BOOST_AUTO_TEST_CASE(a_retryable_failure_starts_the_next_hedge_at_once) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{
        [](const attempt_context& c) { return c.hedge == 0 ? fail_after(10ms, unavailable) : ok_after(10ms, 2); }};
    const auto r = run(ioc, vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 100ms}), a);
    BOOST_TEST(r.ok());
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST((*a.log)[1].started == 10);  // not at 100
    BOOST_TEST(ms(r.elapsed()) == 20);
}

BOOST_AUTO_TEST_CASE(a_permanent_failure_ends_the_call_and_cancels_the_others) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) {
        return c.hedge == 2 ? permanent_after(5ms, asio::error::access_denied) : ok_after(forever, 1);
    }};
    const auto r = run(ioc, vpipeline{}.with_hedging({.max_attempts = 3, .delay = 10ms}), a);
    BOOST_TEST((r.reason() == stop_reason::permanent));
    BOOST_TEST(r.last_error() == asio::error::access_denied);
    BOOST_REQUIRE(a.log->size() == 3u);
    for (int i = 0; i < 2; ++i) {
        BOOST_TEST((*a.log)[i].ended == 25);
        BOOST_TEST(((*a.log)[i].cancelled == every_type));
    }
    BOOST_TEST(ms(r.elapsed()) == 25);
}

BOOST_AUTO_TEST_CASE(pushback_stops_further_hedges_and_the_retry_waits_as_asked) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{
        [](const attempt_context& c) { return c.number == 1 ? fail_after(10ms, unavailable, 2s) : ok_after(1ms, 3); }};
    const auto p = vpipeline{}
                       .with_retry(retry_policy{}.with_stop(stop::max_attempts(2)))
                       .with_hedging({.max_attempts = 3, .delay = 100ms});
    const auto r = run(ioc, p, a);
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 2u);
    // The first hedged call: one attempt, no hedge after the pushback (not
    // at once, not at 100 ms); the retry waited the two seconds asked.
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST((*a.log)[1].number == 2u);
    BOOST_TEST((*a.log)[1].hedge == 0u);
    BOOST_TEST((*a.log)[1].started == 2010);
}

BOOST_AUTO_TEST_CASE(hedges_draw_on_the_retry_budget) {
    virtual_time vt;
    asio::io_context ioc;
    // Room for one hedge (cost 5 of 5), none after.
    auto budget =
        std::make_shared<retry_budget>(retry_budget::options{.capacity = 5, .retry_cost = 5, .timeout_cost = 5});
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(50ms, 1) : ok_after(forever, 2); }};
    const auto p =
        vpipeline{}.with_retry(no_retry.with_budget(budget)).with_hedging({.max_attempts = 4, .delay = 10ms});
    const auto r = run(ioc, p, a);
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value().value() == 1);
    BOOST_TEST(a.log->size() == 2u);        // the first and one hedge; the budget stopped the others
    BOOST_TEST(budget->available() == 1u);  // the success gave one token back, once (the retry's refund)
}

BOOST_AUTO_TEST_CASE(each_hedge_has_its_own_timeout) {
    for (int driver = 0; driver < 2; ++driver) {  // execute(), async_execute()
        virtual_time vt;
        asio::io_context ioc;
        scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
        const auto p =
            vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 30ms}).with_timeout(50ms);
        std::optional<retry_result<attempt_result<int>>> out;
        if (driver == 0) {
            out.emplace(run(ioc, p, a));
        } else {
            async_execute<manual_timer>(ioc, p, erased(a),
                                        done_fn<decltype(a)>([&](auto r) { out.emplace(std::move(r)); }));
            steadfast::run_virtual(ioc);
        }
        BOOST_REQUIRE(out.has_value());
        const auto& r = *out;
        BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
        BOOST_TEST(r.last_error() == make_error_code(error::attempt_timeout), "driver " << driver);
        BOOST_REQUIRE(a.log->size() == 2u);
        BOOST_TEST((*a.log)[0].ended == 50);
        BOOST_TEST((*a.log)[1].started == 30);
        BOOST_TEST((*a.log)[1].ended == 80);
        BOOST_TEST(((*a.log)[0].timeout_ms == std::optional<std::int64_t>(50)));
        BOOST_TEST(((*a.log)[0].cancelled == every_type));
        BOOST_TEST(ms(r.elapsed()) == 80);
    }
}

BOOST_AUTO_TEST_CASE(the_call_waits_for_a_losing_hedge_to_end) {
    // The first attempt wins while a hedge still runs: the hedge is
    // cancelled, and the call completes only once it has ended (it ends in
    // the cancellation's own turn; the call's handler sees it ended).
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(150ms, 1) : ok_after(forever, 2); }};
    bool all_ended_first = false;
    std::optional<retry_result<attempt_result<int>>> out;
    async_execute<manual_timer>(ioc, vpipeline{}.with_hedging({.max_attempts = 2, .delay = 100ms}), erased(a),
                                done_fn<decltype(a)>([&](retry_result<attempt_result<int>> res) {
                                    all_ended_first = a.log->size() == 2u;
                                    for (const seen& s : *a.log) all_ended_first = all_ended_first && s.ended >= 0;
                                    out.emplace(std::move(res));
                                }));
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->value().value() == 1);
    BOOST_TEST(all_ended_first);
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST(((*a.log)[1].cancelled == every_type));
}

BOOST_AUTO_TEST_CASE(a_hedge_that_times_out_starts_the_next_at_once) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(forever, 1) : ok_after(5ms, 2); }};
    const auto p = vpipeline{}.with_hedging({.max_attempts = 2, .delay = 100ms}).with_timeout(20ms);
    const auto r = run(ioc, p, a);
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value().value() == 2);
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST((*a.log)[1].started == 20);
    BOOST_TEST(ms(r.elapsed()) == 25);
}

BOOST_AUTO_TEST_CASE(the_retry_retries_whole_hedged_calls) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{
        [](const attempt_context& c) { return c.number == 1 ? fail_after(1ms, unavailable) : ok_after(1ms, 9); }};
    const auto p = vpipeline{}
                       .with_retry(retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(3)))
                       .with_hedging({.max_attempts = 2, .delay = 100ms});
    const auto r = run(ioc, p, a);
    BOOST_TEST(r.ok());
    BOOST_TEST(r.attempts() == 2u);
    BOOST_REQUIRE(a.log->size() == 3u);  // 1.0, 1.1 (at once after 1.0 failed), 2.0
    BOOST_TEST((*a.log)[1].hedge == 1u);
    BOOST_TEST((*a.log)[1].started == 1);
    BOOST_TEST((*a.log)[2].number == 2u);
    BOOST_TEST((*a.log)[2].started == 1002);
}

BOOST_AUTO_TEST_CASE(a_throwing_attempt_is_classified_by_the_policy) {
    virtual_time vt;
    asio::io_context ioc;
    int calls = 0;
    auto a = [&](const attempt_context& c) -> asio::awaitable<int> {
        ++calls;
        if (c.hedge == 0) throw std::runtime_error("boom");
        co_return 4;
    };
    // The policy says a runtime_error is permanent: the call ends there,
    // with no hedge after it.
    const auto policy = retry_policy{}.with_exception_classifier(
        [](const std::exception_ptr&) { return classification::permanent(asio::error::invalid_argument); });
    const auto r = steadfast_test::run_virtual(
        ioc, execute<manual_timer>(vpipeline{}.with_retry(policy).with_hedging({.max_attempts = 2, .delay = 10ms}),
                                   erased(a)));
    BOOST_TEST((r.reason() == stop_reason::permanent));
    BOOST_TEST(calls == 1);
    BOOST_TEST(static_cast<bool>(r.last_exception()));
}

BOOST_AUTO_TEST_CASE(a_throwing_classifier_cancels_and_waits_for_the_other_attempts) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(20ms, 1) : ok_after(forever, 2); }};
    auto picky = [](const attempt_result<int>& r) -> classification {
        if (r.has_value() && r.value() == 1) throw std::runtime_error("cannot classify 1");
        return r.outcome();
    };
    const auto p = vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 10ms});
    const auto r = steadfast_test::run_virtual(ioc, execute<manual_timer>(p, classified(a, picky)));
    BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
    BOOST_REQUIRE(static_cast<bool>(r.last_exception()));
    try {
        std::rethrow_exception(r.last_exception());
    } catch (const std::runtime_error& e) {
        BOOST_TEST(std::string(e.what()) == "cannot classify 1");
    }
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST((*a.log)[1].ended == 20);  // the hedge was cancelled and waited for
    BOOST_TEST(((*a.log)[1].cancelled == every_type));
}

BOOST_AUTO_TEST_CASE(a_full_rate_limit_queue_ends_the_call_with_no_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<vrate>(ioc.get_executor(), vrate::options{.per_second = 1, .burst = 1, .queue = 0});
    scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
    const auto p = vpipeline{}.with_rate_limit(rate);
    BOOST_TEST(run(ioc, p, a).ok());
    const auto r = run(ioc, p, a);
    BOOST_TEST((r.reason() == stop_reason::limited));
    BOOST_TEST(r.error() == make_error_code(error::queue_full));
    BOOST_TEST(r.last_error() == make_error_code(error::queue_full));
    BOOST_TEST(r.attempts() == 0u);
    BOOST_TEST(a.log->size() == 1u);
}

BOOST_AUTO_TEST_CASE(queued_calls_wait_for_their_token_and_their_permit) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<vrate>(ioc.get_executor(), vrate::options{.per_second = 10, .burst = 1, .queue = 4});
    auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 4});
    scripted a{[](const attempt_context&) { return ok_after(250ms, 1); }};
    const auto p = vpipeline{}.with_rate_limit(rate).with_concurrency_limit(bulkhead);
    std::vector<stop_reason> ends;
    std::vector<std::size_t> in_use_at_end;
    for (int i = 0; i < 3; ++i)
        async_execute<manual_timer>(
            ioc, p, erased(a), done_fn<decltype(a)>([&](retry_result<attempt_result<int>> r) {
                ends.push_back(r.reason());
                in_use_at_end.push_back(bulkhead->in_use());  // the permit was given back before the handler
            }));
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(ends.size() == 3u);
    for (auto e : ends) BOOST_TEST((e == stop_reason::success));
    BOOST_REQUIRE(a.log->size() == 3u);
    // Tokens at 0, 100, 200 ms; one permit, each call 250 ms long.
    BOOST_TEST((*a.log)[0].started == 0);
    BOOST_TEST((*a.log)[1].started == 250);
    BOOST_TEST((*a.log)[2].started == 500);
    // Each permit went back before its handler ran: to the next caller
    // waiting, and after the last call to the bulkhead.
    BOOST_TEST(in_use_at_end == (std::vector<std::size_t>{1, 1, 0}), boost::test_tools::per_element());
    BOOST_TEST(static_cast<bool>(bulkhead->try_acquire()));  // every permit given back
}

BOOST_AUTO_TEST_CASE(an_open_breaker_rejects_the_call_with_no_attempt) {
    virtual_time vt;
    asio::io_context ioc;
    auto b = std::make_shared<circuit_breaker>(breaker_options{});
    b->isolate();
    scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
    const auto r = run(ioc, vpipeline{}.with_breaker(b).with_hedging({.max_attempts = 2, .delay = 1ms}), a);
    BOOST_TEST((r.reason() == stop_reason::circuit_open));
    BOOST_TEST(a.log->empty());
    b->reset();
    BOOST_TEST(run(ioc, vpipeline{}.with_breaker(b), a).ok());
    BOOST_TEST(b->get_stats().successes == 1u);
}

BOOST_AUTO_TEST_CASE(every_cancellation_type_reaches_every_hedge_as_it_came) {
    for (auto type :
         {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
        virtual_time vt;
        asio::io_context ioc;
        scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
        const auto p = vpipeline{}.with_hedging({.max_attempts = 3, .delay = 10ms});
        asio::cancellation_signal sig;
        std::optional<retry_result<attempt_result<int>>> out;
        async_execute<manual_timer>(
            ioc, p, erased(a),
            asio::bind_cancellation_slot(sig.slot(), done_fn<decltype(a)>([&](auto r) { out.emplace(std::move(r)); })));
        steadfast::run_virtual(ioc, manual_clock::time_point(35ms));
        BOOST_REQUIRE(a.log->size() == 3u);
        sig.emit(type);
        steadfast::run_virtual(ioc);
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((out->reason() == stop_reason::cancelled));
        for (const seen& s : *a.log) {
            BOOST_TEST(s.ended == 35);
            // The type the caller sent, not every type: a total cancellation
            // asks for no side effects, which terminal would not keep.
            BOOST_TEST((s.cancelled == type));
        }
    }
}

BOOST_AUTO_TEST_CASE(a_call_cancelled_in_a_limits_queue_leaves_it) {
    virtual_time vt;
    asio::io_context ioc;
    auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
    auto held = bulkhead->try_acquire();
    scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
    asio::cancellation_signal sig;
    std::optional<retry_result<attempt_result<int>>> out;
    async_execute<manual_timer>(
        ioc, vpipeline{}.with_concurrency_limit(bulkhead), erased(a),
        asio::bind_cancellation_slot(sig.slot(), done_fn<decltype(a)>([&](auto r) { out.emplace(std::move(r)); })));
    ioc.poll();
    BOOST_TEST(!out.has_value());
    sig.emit(asio::cancellation_type::partial);
    ioc.poll();
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(a.log->empty());
    // Out of the queue: the next caller queues in its place.
    held = {};
    BOOST_TEST(static_cast<bool>(bulkhead->try_acquire()));
}

BOOST_AUTO_TEST_CASE(execute_in_a_coroutine_cancelled_by_its_caller) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
    const auto p = vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms});
    asio::cancellation_signal sig;
    std::optional<retry_result<attempt_result<int>>> out;
    asio::co_spawn(ioc, execute<manual_timer>(p, erased(a)),
                   asio::bind_cancellation_slot(sig.slot(), spawned_fn<decltype(a)>([&](std::exception_ptr e, auto r) {
                                                    BOOST_TEST(!e);
                                                    out.emplace(std::move(r));
                                                })));
    steadfast::run_virtual(ioc, manual_clock::time_point(20ms));
    sig.emit(asio::cancellation_type::terminal);
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_REQUIRE(a.log->size() == 2u);
    for (const seen& s : *a.log) BOOST_TEST(s.ended == 20);
}

BOOST_AUTO_TEST_CASE(async_execute_never_completes_inline_and_runs_on_its_executors) {
    virtual_time vt;
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    auto other = asio::make_strand(ioc);
    auto rate = std::make_shared<vrate>(ioc.get_executor(), vrate::options{.per_second = 1, .burst = 1, .queue = 0});
    rate->try_acquire();  // the next call is refused at once: still not inline
    bool returned = false, completed = false, attempt_on_strand = true, handler_on_other = false;
    int attempts = 0;
    auto a = [&](const attempt_context&) -> asio::awaitable<int> {
        ++attempts;
        attempt_on_strand = attempt_on_strand && strand.running_in_this_thread();
        co_return 1;
    };
    async_execute<manual_timer>(strand, vpipeline{}.with_rate_limit(rate), erased(a),
                                asio::bind_executor(other, done_fn<decltype(a)>([&](retry_result<int> r) {
                                                        BOOST_TEST(returned);
                                                        BOOST_TEST((r.reason() == stop_reason::limited));
                                                        completed = true;
                                                        handler_on_other = other.running_in_this_thread();
                                                    })));
    returned = true;
    int hedged_done = 0;
    bool hedged_on_other = true;
    for (int i = 0; i < 2; ++i) {
        auto p = vpipeline{}.with_hedging({.max_attempts = 2, .delay = 1ms});
        if (i == 1) p = p.with_timeout(1s);
        async_execute<manual_timer>(strand, p, erased(a),
                                    asio::bind_executor(other, done_fn<decltype(a)>([&](retry_result<int> r) {
                                                            BOOST_TEST(r.ok());
                                                            ++hedged_done;
                                                            hedged_on_other =
                                                                hedged_on_other && other.running_in_this_thread();
                                                        })));
    }
    BOOST_TEST(!completed);
    BOOST_TEST(hedged_done == 0);
    steadfast::run_virtual(ioc);
    BOOST_TEST(completed);
    BOOST_TEST(handler_on_other);
    BOOST_TEST(hedged_done == 2);
    BOOST_TEST(hedged_on_other);
    BOOST_TEST(attempts == 2);
    BOOST_TEST(attempt_on_strand);
}

BOOST_AUTO_TEST_CASE(an_io_context_destroyed_mid_call_leaves_nothing_behind) {
    // Under ASan: the hedged call's attempts, their signals and the call's
    // frame go with the context, in whatever order it destroys them.
    virtual_time vt;
    bool completed = false;
    scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
    for (int driver = 0; driver < 2; ++driver) {
        asio::io_context ioc;
        const auto p = vpipeline{}.with_hedging({.max_attempts = 3, .delay = 10ms}).with_timeout(1h);
        if (driver == 0)
            async_execute<manual_timer>(ioc, p, erased(a), done_fn<decltype(a)>([&](auto) { completed = true; }));
        else
            asio::co_spawn(ioc, execute<manual_timer>(p, erased(a)),
                           spawned_fn<decltype(a)>([&](std::exception_ptr, auto) { completed = true; }));
        steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 50ms));
    }
    BOOST_TEST(!completed);
    BOOST_TEST(a.log->size() == 6u);
}

BOOST_AUTO_TEST_CASE(a_hedge_cut_short_by_its_timeout_is_a_timeout_whatever_it_returns) {
    // The attempt returns operation_aborted when cancelled, which the
    // default classifier calls "cancelled": cut short by its own timeout,
    // it is a retryable timeout all the same, and the next hedge starts at once.
    virtual_time vt;
    asio::io_context ioc;
    auto log = std::make_shared<std::vector<std::int64_t>>();
    auto a = [log](const attempt_context& c) -> asio::awaitable<error_code> {
        log->push_back(ms(virtual_time::now()));
        manual_timer t(co_await asio::this_coro::executor, c.hedge == 0 ? forever : 5ms);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return ec;
    };
    const auto p =
        vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 100ms}).with_timeout(20ms);
    const auto r = steadfast_test::run_virtual(ioc, execute<manual_timer>(p, erased(a)));
    BOOST_TEST(r.ok());
    BOOST_TEST(*log == (std::vector<std::int64_t>{0, 20}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_hedged_timeout_is_not_reclassified_by_the_policys_exception_classifier) {
    // Every exception is permanent to this policy; a hedged call whose
    // attempts all time out is still a retryable timeout, as it is without
    // hedging (the retry is told out of band, not by an exception).
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
    const auto policy = retry_policy{}
                            .with_stop(stop::max_attempts(2))
                            .with_backoff(backoff::fixed(1s))
                            .with_exception_classifier([](const std::exception_ptr&) {
                                return classification::permanent(asio::error::invalid_argument);
                            });
    const auto p = vpipeline{}.with_retry(policy).with_hedging({.max_attempts = 2, .delay = 10ms}).with_timeout(50ms);
    const auto r = run(ioc, p, a);
    BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST(r.attempts() == 2u);
    BOOST_TEST(r.last_error() == make_error_code(error::attempt_timeout));
    BOOST_TEST(r.has_value());  // the last attempt's value is kept, as without hedging
    BOOST_TEST(a.log->size() == 4u);
}

BOOST_AUTO_TEST_CASE(a_delay_without_end_hedges_only_after_failures) {
    virtual_time vt;
    manual_clock::advance(std::chrono::hours(24 * 365));  // far from zero: t0 + delay must not wrap
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? fail_after(5ms, unavailable) : ok_after(5ms, 2); }};
    const auto p = vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 3, .delay = nanoseconds::max()});
    const auto r = run(ioc, p, a);
    BOOST_TEST(r.ok());
    BOOST_REQUIRE(a.log->size() == 2u);
    BOOST_TEST((*a.log)[1].started - (*a.log)[0].started == 5);
}

BOOST_AUTO_TEST_CASE(execute_restores_the_callers_throw_if_cancelled) {
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context& c) { return c.hedge == 0 ? ok_after(forever, 1) : ok_after(1ms, 2); }};
    const auto p = vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms});
    const auto check = [&]() -> asio::awaitable<int> {
        int kept = 0;
        for (bool want : {true, false}) {
            co_await asio::this_coro::throw_if_cancelled(want);
            const auto r = co_await execute<manual_timer>(p, erased(a));
            BOOST_TEST(r.ok());
            kept += (co_await asio::this_coro::throw_if_cancelled()) == want;
        }
        co_return kept;
    };
    BOOST_TEST(steadfast_test::run_virtual(ioc, check()) == 2);
}

BOOST_AUTO_TEST_CASE(execute_takes_the_token_before_the_permit) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<vrate>(ioc.get_executor(), vrate::options{.per_second = 1, .burst = 1, .queue = 4});
    auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 0});
    rate->try_acquire();  // the next token comes in a second
    scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
    std::optional<retry_result<attempt_result<int>>> out;
    asio::co_spawn(ioc,
                   execute<manual_timer>(vpipeline{}.with_rate_limit(rate).with_concurrency_limit(bulkhead), erased(a)),
                   spawned_fn<decltype(a)>([&](std::exception_ptr, auto r) { out.emplace(std::move(r)); }));
    steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 500ms));
    // Waiting for its token, the call holds no permit: others may use it.
    BOOST_TEST(bulkhead->in_use() == 0u);
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->ok());
    BOOST_TEST(bulkhead->in_use() == 0u);
}

BOOST_AUTO_TEST_CASE(a_cancellation_as_a_limit_lets_the_call_in_still_ends_it) {
    // The permit is granted (its completion posted), then the caller
    // cancels before that completion runs: no attempt, the permit given
    // back, stop_reason::cancelled; for both drivers.
    for (int driver = 0; driver < 2; ++driver) {
        virtual_time vt;
        asio::io_context ioc;
        auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
        auto held = bulkhead->try_acquire();
        scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
        const auto p = vpipeline{}.with_concurrency_limit(bulkhead);
        asio::cancellation_signal sig;
        std::optional<retry_result<attempt_result<int>>> out;
        start(driver, ioc, p, a, sig.slot(), out);
        ioc.poll();
        BOOST_REQUIRE(bulkhead->waiting() == 1u);
        // On the executor, as cancellation is emitted: granted (its
        // completion on its way), then cancelled.
        asio::post(ioc, [&] {
            held = {};
            sig.emit(asio::cancellation_type::terminal);
        });
        steadfast::run_virtual(ioc);
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((out->reason() == stop_reason::cancelled));
        BOOST_TEST(a.log->empty(), "driver " << driver);
        BOOST_TEST(bulkhead->in_use() == 0u);
    }
}

BOOST_AUTO_TEST_CASE(hedges_unwound_after_their_call_at_shutdown_touch_nothing_freed) {
    // Each attempt holds a nested retry with a timeout (its slot clearer
    // runs as it unwinds) and reads its own captures as it unwinds; the
    // io_context is destroyed with the call and its hedges pending, in
    // whatever order Asio destroys them. Under ASan.
    virtual_time vt;
    auto unwound = std::make_shared<int>(0);
    for (int driver = 0; driver < 2; ++driver) {
        asio::io_context ioc;
        struct on_unwind {
            std::shared_ptr<int>* counter;
            ~on_unwind() { ++**counter; }
        };
        auto a = [unwound](const attempt_context&) -> asio::awaitable<int> {
            auto counter = unwound;  // a copy of the capture, read again as it unwinds
            on_unwind guard{&counter};
            const auto inner = retry_policy{}.with_attempt_timeout(1h).with_stop(stop::max_attempts(1));
            co_await retry<manual_timer>(inner, [](const attempt_context&) -> asio::awaitable<int> {
                manual_timer t(co_await asio::this_coro::executor, forever);
                co_await t.async_wait(asio::use_awaitable);
                co_return 1;
            });
            co_return 1;
        };
        const auto p = vpipeline{}.with_hedging({.max_attempts = 3, .delay = 10ms}).with_timeout(2h);
        if (driver == 0)
            async_execute<manual_timer>(ioc, p, erased(a), done_fn<decltype(a)>([](auto) {}));
        else
            asio::co_spawn(ioc, execute<manual_timer>(p, erased(a)),
                           spawned_fn<decltype(a)>([](std::exception_ptr, auto) {}));
        steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 50ms));
    }
    BOOST_TEST(*unwound == 6);  // three attempts a call, each unwound once
}

BOOST_AUTO_TEST_CASE(a_hedge_gets_the_tighter_timeout_and_the_time_left) {
    // The retry's per-attempt timeout (20 ms) bounds the hedged call; the
    // pipeline's (50 ms) each hedge. The first sees 20 ms; the hedge started
    // 10 ms later sees what is left of the call's: 10 ms.
    virtual_time vt;
    asio::io_context ioc;
    scripted a{[](const attempt_context&) { return ok_after(forever, 1); }};
    const auto p = vpipeline{}
                       .with_retry(no_retry.with_attempt_timeout(20ms))
                       .with_hedging({.max_attempts = 3, .delay = 10ms})
                       .with_timeout(50ms);
    const auto r = run(ioc, p, a);
    BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
    BOOST_REQUIRE(a.log->size() == 2u);  // the call's own timeout came first at 20 ms
    BOOST_TEST(((*a.log)[0].timeout_ms == std::optional<std::int64_t>(20)));
    BOOST_TEST(((*a.log)[1].timeout_ms == std::optional<std::int64_t>(10)));
    BOOST_TEST((*a.log)[1].ended == 20);
}

BOOST_AUTO_TEST_CASE(a_cancellation_as_the_rate_limit_lets_the_call_in_still_ends_it) {
    for (int driver = 0; driver < 2; ++driver) {
        virtual_time vt;
        asio::io_context ioc;
        auto rate =
            std::make_shared<vrate>(ioc.get_executor(), vrate::options{.per_second = 10, .burst = 1, .queue = 1});
        rate->try_acquire();  // the next token at 100 ms
        scripted a{[](const attempt_context&) { return ok_after(1ms, 1); }};
        asio::cancellation_signal sig;
        std::optional<retry_result<attempt_result<int>>> out;
        const auto p = vpipeline{}.with_rate_limit(rate);
        start(driver, ioc, p, a, sig.slot(), out);
        // The token comes at 100 ms (its completion posted); the caller
        // cancels in the same turn, before that completion runs.
        steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 99ms));
        BOOST_REQUIRE(rate->waiting() == 1u);
        manual_timer at(ioc, 1ms);
        at.async_wait([&](error_code) {
            while (rate->waiting() == 1u) ioc.run_one();  // the token's handler lets the waiter in
            sig.emit(asio::cancellation_type::terminal);
        });
        steadfast::run_virtual(ioc);
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((out->reason() == stop_reason::cancelled), "driver " << driver);
        BOOST_TEST(a.log->empty(), "driver " << driver);
    }
}

BOOST_AUTO_TEST_CASE(a_loser_is_cancelled_once_even_when_its_timeout_comes_during_its_cleanup) {
    // The loser, cancelled when the hedge wins at 28 ms, cleans up for 5 ms;
    // its own timeout (30 ms) comes during that cleanup and must not cancel
    // it again.
    virtual_time vt;
    asio::io_context ioc;
    auto cleanup_cut = std::make_shared<bool>(false);
    auto a = [cleanup_cut](const attempt_context& c) -> asio::awaitable<int> {
        manual_timer t(co_await asio::this_coro::executor, c.hedge == 0 ? forever : 18ms);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!ec) co_return 2;
        co_await asio::this_coro::reset_cancellation_state();  // cancelled: clean up
        manual_timer cleanup(co_await asio::this_coro::executor, 5ms);
        auto [ec2] = co_await cleanup.async_wait(asio::as_tuple(asio::use_awaitable));
        *cleanup_cut = ec2 == asio::error::operation_aborted;
        co_return 1;
    };
    const auto p = vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms}).with_timeout(30ms);
    const auto r = steadfast_test::run_virtual(ioc, execute<manual_timer>(p, erased(a)));
    BOOST_TEST(r.ok());
    BOOST_TEST(r.value() == 2);
    BOOST_TEST(!*cleanup_cut);
}

BOOST_AUTO_TEST_CASE(a_hedge_that_ends_inside_its_start_is_counted_and_cancels_nothing_else) {
    // Hedge 1 ends through an operation that completes inline (dispatch on
    // its own executor), so inside co_spawn; hedge 2 wins at 25 ms. Another
    // call leases watches meanwhile: its attempt must never be cancelled by
    // this call's end (a stale signal), and this call must end.
    virtual_time vt;
    asio::io_context ioc;
    auto a = [](const attempt_context& c) -> asio::awaitable<attempt_result<int>> {
        if (c.hedge == 1) {
            co_await asio::dispatch(asio::use_awaitable);
            co_return attempt_result<int>::retry(unavailable);
        }
        manual_timer t(co_await asio::this_coro::executor, c.hedge == 0 ? forever : 5ms);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return attempt_result<int>::retry(ec);
        co_return 3;
    };
    bool other_cut = false, other_done = false;
    auto other = [&](const attempt_context&) -> asio::awaitable<int> {
        manual_timer t(co_await asio::this_coro::executor, 30ms);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        other_cut = ec == asio::error::operation_aborted;
        co_return 1;
    };
    std::optional<retry_result<attempt_result<int>>> out;
    async_execute<manual_timer>(ioc, vpipeline{}.with_hedging({.max_attempts = 3, .delay = 10ms}).with_timeout(50ms),
                                erased(a), done_fn<decltype(a)>([&](auto r) { out.emplace(std::move(r)); }));
    manual_timer later(ioc, 12ms);
    later.async_wait([&](error_code) {
        // Leases watches (an attempt timeout) while the first call runs.
        async_execute<manual_timer>(ioc, vpipeline{}.with_timeout(1h), erased(other),
                                    done_fn<decltype(other)>([&](auto) { other_done = true; }));
    });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->ok());
    BOOST_TEST(other_done);
    BOOST_TEST(!other_cut);
}

BOOST_AUTO_TEST_CASE(a_first_attempt_that_ends_at_once_ends_the_call_or_hands_it_to_its_hedge) {
    // The first attempt ends at once (through an operation that completes
    // inline). Answering, it ends the call; failing, it starts the hedge at
    // once, and the call, whose first attempt has ended, is ended by that
    // hedge's completion. Through both drivers.
    virtual_time vt;
    for (int driver = 0; driver < 2; ++driver) {
        for (const bool first_fails : {false, true}) {
            auto a = [first_fails](const attempt_context& c) -> asio::awaitable<attempt_result<int>> {
                if (c.hedge == 0) {
                    co_await asio::dispatch(asio::use_awaitable);
                    if (first_fails) co_return attempt_result<int>::retry(unavailable);
                    co_return 1;
                }
                manual_timer t(co_await asio::this_coro::executor, 5ms);
                co_await t.async_wait(asio::use_awaitable);
                co_return 2;
            };
            const auto out = run_through(
                driver, vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 10ms}), a);
            BOOST_REQUIRE(out.has_value());
            BOOST_TEST(out->ok());
            BOOST_TEST(out->value().value() == (first_fails ? 2 : 1));
        }
    }
}

BOOST_AUTO_TEST_CASE(a_call_waiting_only_for_hedges_is_destroyed_with_its_io_context) {
    // The first attempt has ended (a retryable failure) and the hedge it
    // started never answers: the call waits for that hedge alone when the
    // io_context is destroyed. The hedge then holds the call's coroutine:
    // all of it must go (ASan's leak check), touching nothing freed.
    virtual_time vt;
    auto alive = std::make_shared<int>(0);
    for (int driver = 0; driver < 2; ++driver) {
        auto a = [alive](const attempt_context& c) -> asio::awaitable<attempt_result<int>> {
            auto keep = alive;  // counted while this attempt's frame lives
            if (c.hedge == 0) co_return attempt_result<int>::retry(unavailable);
            manual_timer t(co_await asio::this_coro::executor, forever);
            co_await t.async_wait(asio::use_awaitable);
            co_return 2;
        };
        BOOST_TEST(!run_through(driver, vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms}), a,
                                manual_clock::time_point(manual_clock::now() + 50ms))
                        .has_value());
    }
    BOOST_TEST(alive.use_count() == 1);  // every attempt's frame, and the calls holding copies, gone
}

BOOST_AUTO_TEST_CASE(a_caller_cancelling_while_only_a_hedge_runs_ends_the_call) {
    // The first attempt has ended (a retryable failure) and its hedge runs:
    // the call's end now waits on that hedge, and the caller's cancellation
    // must still reach it and end the call, through both drivers. (With a
    // timeout: the call holds a deadline meanwhile.)
    virtual_time vt;
    for (int driver = 0; driver < 2; ++driver) {
        asio::cancellation_signal sig;  // (outlives the io_context and what it destroys)
        asio::io_context ioc;
        scripted a{[](const attempt_context& c) {
            return c.hedge == 0 ? fail_after(0ms, unavailable) : ok_after(forever, 2);
        }};
        std::optional<retry_result<attempt_result<int>>> out;
        start(driver, ioc,
              vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 2, .delay = 10ms}).with_timeout(1h), a,
              sig.slot(), out);
        steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 20ms));
        BOOST_REQUIRE(a.log->size() == 2u);
        BOOST_TEST(!out.has_value());
        sig.emit(asio::cancellation_type::terminal);
        steadfast::run_virtual(ioc);
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((out->reason() == stop_reason::cancelled));
        BOOST_TEST(((*a.log)[1].cancelled == asio::cancellation_type::terminal));  // as it came
    }
}

BOOST_AUTO_TEST_CASE(a_call_destroyed_with_its_dropped_first_attempt_leaves_nothing_in_the_callers_slot) {
    // The first attempt awaits an operation that drops its handler: the
    // attempt's coroutine, then the call's, are destroyed uncompleted on a
    // live io_context. The caller's signal, emitted afterwards, must reach
    // nothing of the call (its forwarder goes with its frame). Under ASan.
    virtual_time vt;
    asio::cancellation_signal sig;
    asio::io_context ioc;
    auto a = [](const attempt_context&) -> asio::awaitable<int> {
        co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>([](auto) {}, asio::use_awaitable);
        co_return 1;
    };
    bool completed = false;
    asio::co_spawn(ioc, execute<manual_timer>(vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms}), erased(a)),
                   asio::bind_cancellation_slot(
                       sig.slot(), spawned_fn<decltype(a)>([&](std::exception_ptr, auto) { completed = true; })));
    steadfast::run_virtual(ioc, manual_clock::time_point(manual_clock::now() + 5ms));
    BOOST_TEST(ioc.stopped());                    // all of it unwound: nothing left to run
    sig.emit(asio::cancellation_type::terminal);  // (co_spawn posts it on to the coroutine's state)
    ioc.restart();
    BOOST_TEST(steadfast::run_virtual(ioc) == 1u);  // that post, reaching nothing of the call
    BOOST_TEST(!completed);
}

BOOST_AUTO_TEST_CASE(attempts_that_end_at_once_one_after_another_end_the_call_once) {
    // Three attempts, each ending at once (an operation that completes
    // inline): the first two fail, each starting the next from its own
    // completion, and the third answers. The call ends once, after the step
    // that ended it, through both drivers. (Under ASan, whose coroutine
    // frames come from the heap.)
    virtual_time vt;
    for (int driver = 0; driver < 2; ++driver) {
        auto a = [](const attempt_context& c) -> asio::awaitable<attempt_result<int>> {
            // An operation that calls its handler inside its initiation.
            co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>([](auto h) { std::move(h)(); },
                                                                                  asio::use_awaitable);
            if (c.hedge < 2) co_return attempt_result<int>::retry(unavailable);
            co_return 3;
        };
        const auto out =
            run_through(driver, vpipeline{}.with_retry(no_retry).with_hedging({.max_attempts = 3, .delay = 10ms}), a);
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST(out->ok());
        BOOST_TEST(out->value().value() == 3);
    }
}

BOOST_AUTO_TEST_CASE(a_hedge_outliving_its_destroyed_call_completes_into_nothing) {
    // The first attempt drops its handler at 20 ms, while the hedge started
    // at 10 ms runs until 60 ms: the call is destroyed uncompleted on a live
    // io_context, and the hedge's completion must find it gone (not touch
    // it). Under ASan.
    virtual_time vt;
    asio::io_context ioc;
    auto hedge_ended = std::make_shared<bool>(false);
    auto a = [hedge_ended](const attempt_context& c) -> asio::awaitable<int> {
        manual_timer t(co_await asio::this_coro::executor, c.hedge == 0 ? 20ms : 50ms);
        co_await t.async_wait(asio::use_awaitable);
        if (c.hedge == 0)
            co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>([](auto) {}, asio::use_awaitable);
        *hedge_ended = true;
        co_return 2;
    };
    bool completed = false;
    asio::co_spawn(ioc, execute<manual_timer>(vpipeline{}.with_hedging({.max_attempts = 2, .delay = 10ms}), erased(a)),
                   spawned_fn<decltype(a)>([&](std::exception_ptr, auto) { completed = true; }));
    steadfast::run_virtual(ioc);
    BOOST_TEST(*hedge_ended);
    BOOST_TEST(!completed);
}

BOOST_AUTO_TEST_CASE(async_execute_takes_its_state_from_the_handlers_allocator) {
    virtual_time vt;
    asio::io_context ioc;
    alloc_stats stats;
    bool done = false;
    auto a = [](const attempt_context&) -> asio::awaitable<int> { co_return 1; };
    async_execute<manual_timer>(
        ioc, vpipeline{}.with_hedging({.max_attempts = 2, .delay = 1ms}), erased(a),
        asio::bind_allocator(counting_allocator<void>(&stats), done_fn<decltype(a)>([&](retry_result<int> r) {
                                 BOOST_TEST(r.ok());
                                 BOOST_TEST(stats.live == 0);  // freed before the handler runs
                                 done = true;
                             })));
    steadfast::run_virtual(ioc);
    BOOST_TEST(done);
    BOOST_TEST(stats.allocations >= 1);  // the retry's state
    BOOST_TEST(stats.live == 0);

    // The same when the call waits in a limit's queue first: kept there from
    // the handler's allocator too, and given back before the handler runs.
    auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
    auto held = bulkhead->try_acquire();
    alloc_stats queued;
    done = false;
    async_execute<manual_timer>(
        ioc, vpipeline{}.with_concurrency_limit(bulkhead), erased(a),
        asio::bind_allocator(counting_allocator<void>(&queued), done_fn<decltype(a)>([&](retry_result<int> r) {
                                 BOOST_TEST(r.ok());
                                 BOOST_TEST(queued.live == 0);
                                 done = true;
                             })));
    ioc.restart();
    ioc.poll();
    BOOST_TEST(bulkhead->waiting() == 1u);
    BOOST_TEST(queued.live >= 1);  // the waiting call
    held.release();
    steadfast::run_virtual(ioc);
    BOOST_TEST(done);
    BOOST_TEST(queued.allocations >= 2);  // the wait, then the retry's state
    BOOST_TEST(queued.live == 0);
}

BOOST_AUTO_TEST_SUITE_END()
