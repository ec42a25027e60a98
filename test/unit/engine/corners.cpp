// The engine's promises in the corners (issue 26): cancellation emitted from
// inside a step (a hook, a custom backoff, the random source), a stop-when
// true only briefly while nothing waits (a zero-delay yield, before
// async_retry's first step), a probe dropped before its first check, and the
// attempt counter past 32 bits. Each case runs through both drivers.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <steadfast_test/manual_flag.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <string>
#include <type_traits>
#include <utility>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::manual_flag;
using steadfast_test::virtual_time;

namespace steadfast {
// Boost.Test prints the reason a check compared.
inline std::ostream& operator<<(std::ostream& o, stop_reason r) {
    return o << to_string(r);
}
}  // namespace steadfast

namespace {

using result_t = retry_result<error_code>;

enum class source { before_attempt, after_attempt, backoff, random };
enum class watch { none, timeout, stop_when };
enum class driver { coroutine, composed };

const char* name(source s) {
    switch (s) {
        case source::before_attempt:
            return "before_attempt";
        case source::after_attempt:
            return "after_attempt";
        case source::backoff:
            return "custom backoff";
        case source::random:
            return "random source";
    }
    return "?";
}
const char* name(watch w) {
    return w == watch::none ? "no watch" : w == watch::timeout ? "timeout" : "stop-when";
}
const char* name(driver d) {
    return d == driver::coroutine ? "retry()" : "async_retry()";
}

// What one run saw.
struct seen {
    std::optional<result_t> result;
    std::exception_ptr thrown;
    int bodies_started = 0;
    int bodies_finished = 0;
    std::int64_t ended_at_ns = -1;  // virtual time when the completion ran
};

// Runs a retry whose step `s` emits the caller's own cancellation (terminal,
// the type both drivers let through by default), then emits the caller's
// signal once more after the retry has returned.
seen cancel_from_inside(source s, watch w, driver d) {
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    auto stop = std::make_shared<manual_flag>();
    seen out;
    auto emit = [&] { sig.emit(asio::cancellation_type::terminal); };

    // A 10 h attempt on the first try (the before_attempt case must never
    // start it); the others fail at once and then would sleep 10 min.
    auto p = retry_policy{}.with_stop(stop::max_attempts(3));
    if (w == watch::timeout) p = p.with_attempt_timeout(20h);
    if (w == watch::stop_when) p = p.with_stop_when(stop);
    retry_hooks hooks;
    if (s == source::before_attempt) hooks.before_attempt = [&](const attempt_context&) { emit(); };
    if (s == source::after_attempt)
        hooks.after_attempt = [&](const attempt_context&, const classification&, const decision&) { emit(); };
    p = p.with_hooks(hooks);
    if (s == source::backoff)
        p = p.with_backoff(backoff::custom([&](std::uint64_t, nanoseconds) -> nanoseconds {
            emit();
            return 10min;
        }));
    else if (s == source::random)
        p = p.with_backoff(backoff::fixed(10min).with_jitter(jitter::full)).with_random([&]() -> std::uint64_t {
            emit();
            return static_cast<std::uint64_t>(nanoseconds(10min).count());  // the whole 10 min
        });
    else
        p = p.with_backoff(backoff::fixed(10min));

    auto attempt = [&, s](const attempt_context&) -> asio::awaitable<error_code> {
        ++out.bodies_started;
        if (s == source::before_attempt) co_await steadfast_test::virtual_sleep(10h);
        ++out.bodies_finished;
        co_return asio::error::connection_refused;
    };
    auto done = [&](result_t r) {
        out.result.emplace(std::move(r));
        out.ended_at_ns = vt.now().count();
    };
    if (d == driver::coroutine) {
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                // As in the report (and see below): suspended once first.
                co_await asio::post(ioc, asio::use_awaitable);
                done(co_await steadfast::retry<manual_timer>(p, attempt));
            },
            asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr e) { out.thrown = e; }));
    } else {
        steadfast::async_retry<manual_timer>(ioc.get_executor(), p, attempt,
                                             asio::bind_cancellation_slot(sig.slot(), done));
    }
    steadfast::run_virtual(ioc);
    // Later, at shutdown say: nothing of the retry may be left in the slot.
    emit();
    ioc.restart();
    steadfast::run_virtual(ioc);
    return out;
}

// A probe's check that counts its calls and passes.
auto counting_check(std::shared_ptr<int> calls) {
    return [calls]() -> asio::awaitable<bool> {
        ++*calls;
        co_return true;
    };
}

std::string what(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "?";
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_corners)

// Finding 1: cancellation emitted by user code that runs inside a step ends
// the retry at once, with `cancelled`, without starting the step's sleep or
// attempt; retry() throws nothing and leaves nothing in the caller's slot
// (ASan: emitting it afterwards was a heap-use-after-free).
BOOST_AUTO_TEST_CASE(cancellation_from_inside_a_step_ends_it_at_once) {
    for (source s : {source::before_attempt, source::after_attempt, source::backoff, source::random})
        for (watch w : {watch::none, watch::timeout, watch::stop_when})
            for (driver d : {driver::coroutine, driver::composed}) {
                BOOST_TEST_CONTEXT(name(s) << ", " << name(w) << ", " << name(d)) {
                    const seen r = cancel_from_inside(s, w, d);
                    BOOST_TEST(!r.thrown, (r.thrown ? what(r.thrown) : std::string()));
                    BOOST_TEST_REQUIRE(r.result.has_value());
                    BOOST_TEST(r.result->reason() == stop_reason::cancelled);
                    BOOST_TEST(r.ended_at_ns == 0);  // neither the 10 min sleep nor the 10 h attempt
                    BOOST_TEST(r.result->elapsed().count() == 0);
                    BOOST_TEST(r.result->attempts() == 1u);
                    if (s == source::before_attempt)
                        BOOST_TEST(r.bodies_started == 0);  // never started
                    else
                        BOOST_TEST(r.bodies_finished == 1);
                }
            }
}

// The same from the gate's side: a hook of the attempt before cancels while
// the next step would wait on a closed gate.
BOOST_AUTO_TEST_CASE(cancellation_from_a_hook_before_a_closed_gate) {
    for (driver d : {driver::coroutine, driver::composed}) {
        BOOST_TEST_CONTEXT(name(d)) {
            virtual_time vt;
            asio::io_context ioc;
            asio::cancellation_signal sig;
            auto gate = std::make_shared<manual_flag>();  // closed throughout
            gate->v_ = true;
            std::optional<result_t> out;
            std::exception_ptr thrown;
            auto p =
                retry_policy{}
                    .with_backoff(backoff::fixed(0ms))
                    .with_stop(stop::max_attempts(3))
                    .with_attempt_when(gate)
                    .with_hooks({.after_attempt = [&](const attempt_context&, const classification&, const decision&) {
                        gate->set(false);
                        sig.emit(asio::cancellation_type::terminal);
                    }});
            auto attempt = [](const attempt_context&) -> asio::awaitable<error_code> {
                co_return asio::error::connection_refused;
            };
            // (The coroutine suspends once first: Asio 1.81's co_spawn throws
            // from its closing post when the coroutine it ran was cancelled
            // and never suspended, whatever that coroutine did.)
            if (d == driver::coroutine)
                asio::co_spawn(
                    ioc,
                    [&]() -> asio::awaitable<void> {
                        co_await asio::post(ioc, asio::use_awaitable);
                        out.emplace(co_await steadfast::retry<manual_timer>(p, attempt));
                    },
                    asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr e) { thrown = e; }));
            else
                steadfast::async_retry<manual_timer>(
                    ioc.get_executor(), p, attempt,
                    asio::bind_cancellation_slot(sig.slot(), [&](result_t r) { out.emplace(std::move(r)); }));
            steadfast::run_virtual(ioc, manual_clock::time_point(1h));
            BOOST_TEST(!thrown);
            BOOST_TEST_REQUIRE(out.has_value());
            BOOST_TEST(out->reason() == stop_reason::cancelled);
            BOOST_TEST(out->attempts() == 1u);
            sig.emit(asio::cancellation_type::terminal);
            ioc.restart();
            steadfast::run_virtual(ioc);
        }
    }
}

// An attempt that sets stop-when itself and returns without suspending: the
// attempt's coroutine ends cancelled, which must not escape co_spawn's
// entry point (std::terminate).
BOOST_AUTO_TEST_CASE(an_attempt_that_sets_stop_when_and_returns_at_once) {
    auto stop = std::make_shared<manual_flag>();
    auto p = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(5)).with_stop_when(stop);
    auto attempt = [stop](const attempt_context&) -> asio::awaitable<error_code> {
        stop->set(true);
        co_return asio::error::connection_refused;
    };
    auto both = steadfast_test::run_both(p, attempt, [stop](asio::io_context&) { stop->set(false); });
    for (auto& r : both) {
        BOOST_TEST(r.reason() == stop_reason::condition);
        BOOST_TEST(r.attempts() == 1u);
    }
}

// Stop-when set by user code inside a step (a hook, a custom backoff) ends
// the retry at once with `condition`: the 10 h attempt or the 10 min sleep
// that step decided does not start (found by a review).
BOOST_AUTO_TEST_CASE(stop_when_set_from_inside_a_step_ends_it_at_once) {
    for (int where = 0; where < 3; ++where) {
        auto stop = std::make_shared<manual_flag>();
        auto p =
            retry_policy{}.with_stop(stop::max_attempts(3)).with_stop_when(stop).with_backoff(backoff::fixed(10min));
        if (where == 0) p = p.with_hooks({.before_attempt = [stop](const attempt_context&) { stop->set(true); }});
        if (where == 1)
            p = p.with_hooks({.after_attempt = [stop](const attempt_context&, const classification&, const decision&) {
                stop->set(true);
            }});
        if (where == 2)
            p = p.with_backoff(backoff::custom([stop](std::uint64_t, nanoseconds) -> nanoseconds {
                stop->set(true);
                return 10min;
            }));
        auto started = std::make_shared<int>(0);
        auto attempt = [started](const attempt_context&) -> asio::awaitable<error_code> {
            ++*started;
            co_await steadfast_test::virtual_sleep(10h);
            co_return asio::error::connection_refused;
        };
        auto both = steadfast_test::run_both(p, attempt, [&](asio::io_context&) {
            stop->set(false);
            *started = 0;
        });
        for (int form = 0; form < 2; ++form) {
            BOOST_TEST_CONTEXT("where " << where << ", form " << form) {
                BOOST_TEST(both[form].reason() == stop_reason::condition);
                BOOST_TEST(both[form].attempts() == 1u);
                if (where == 0)
                    BOOST_TEST(both[form].elapsed().count() == 0);  // the attempt never ran
                else
                    BOOST_TEST(std::chrono::duration_cast<std::chrono::hours>(both[form].elapsed()).count() ==
                               10);  // no sleep after it
            }
        }
    }
}

// Finding 2: stop-when set and cleared while the retry only yields (a zero
// delay: a fixed 0, a custom backoff returning 0, a server's Retry-After: 0)
// stops it with `condition`, as the same blip during a sleep does.
BOOST_AUTO_TEST_CASE(a_blip_during_a_zero_delay_yield_stops) {
    for (int kind = 0; kind < 3; ++kind) {
        auto stop = std::make_shared<manual_flag>();
        auto p = retry_policy{}.with_stop(stop::max_attempts(4)).with_stop_when(stop);
        if (kind == 0) p = p.with_backoff(backoff::fixed(0ms));
        if (kind == 1) p = p.with_backoff(backoff::custom([](std::uint64_t, nanoseconds) { return nanoseconds(0); }));
        if (kind == 2) p = p.with_backoff(backoff::fixed(1h));  // the hint below overrides it
        asio::io_context* ctx = nullptr;
        // After the first attempt's decision (inside the step, before the
        // yield is posted), a handler that raises and clears stop-when is
        // posted: it runs while the retry yields.
        p = p.with_hooks({.after_attempt = [&](const attempt_context& c, const classification&, const decision& dec) {
            if (c.number != 1 || dec.what != decision::action::retry) return;
            BOOST_TEST(dec.delay.count() == 0);
            asio::post(*ctx, [stop] {
                stop->set(true);
                stop->set(false);
            });
        }});
        // kind 2: a server's pushback of zero (Retry-After: 0).
        auto attempt = [kind](const attempt_context&) -> asio::awaitable<attempt_result<void>> {
            if (kind == 2) co_return attempt_result<void>::retry(asio::error::try_again, nanoseconds(0));
            co_return attempt_result<void>::retry(asio::error::connection_refused);
        };
        auto both = steadfast_test::run_both(p, attempt, [&](asio::io_context& ioc) { ctx = &ioc; });
        for (int form = 0; form < 2; ++form) {
            BOOST_TEST_CONTEXT("kind " << kind << ", form " << form) {
                BOOST_TEST(both[form].reason() == stop_reason::condition);
                BOOST_TEST(both[form].attempts() == 1u);
            }
        }
    }
}

// Finding 2: async_retry posts its first step; stop-when set and cleared
// before that step runs stops it, with no attempt made.
BOOST_AUTO_TEST_CASE(a_blip_before_async_retrys_first_step_stops) {
    virtual_time vt;
    asio::io_context ioc;
    auto stop = std::make_shared<manual_flag>();
    auto p = retry_policy{}.with_stop_when(stop);
    int bodies = 0;
    std::optional<result_t> out;
    steadfast::async_retry<manual_timer>(
        ioc.get_executor(), p,
        [&](const attempt_context&) -> asio::awaitable<error_code> {
            ++bodies;
            co_return error_code{};
        },
        [&](result_t r) { out.emplace(std::move(r)); });
    stop->set(true);
    stop->set(false);
    steadfast::run_virtual(ioc);
    BOOST_TEST_REQUIRE(out.has_value());
    BOOST_TEST(out->reason() == stop_reason::condition);
    BOOST_TEST(out->attempts() == 0u);
    BOOST_TEST(bodies == 0);
    // retry() has no such gap: it starts in the co_await that calls it.
    // The subscription ends with the operation.
    BOOST_TEST(stop->subscriber_count() == 0u);
}

// Finding 3: a probe whose last owner drops it before its first check (a
// primary stopped right after it started) ends quietly: no std::terminate,
// no check, the probe destroyed.
BOOST_AUTO_TEST_CASE(a_probe_dropped_before_its_first_check) {
    virtual_time vt;
    asio::io_context ioc;
    auto checks = std::make_shared<int>(0);
    auto check = counting_check(checks);
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check);
    std::weak_ptr<condition> weak = p;
    p.reset();
    steadfast::run_virtual(ioc);
    BOOST_TEST(weak.expired());
    BOOST_TEST(*checks == 0);
    BOOST_TEST(ioc.stopped());
}

// ... and one stopped before its loop ever ran (a shutdown handler queued
// before make_probe, say): no throw out of io_context::run(), no check.
BOOST_AUTO_TEST_CASE(a_probe_stopped_before_its_loop_runs) {
    virtual_time vt;
    asio::io_context ioc;
    auto checks = std::make_shared<int>(0);
    auto check = counting_check(checks);
    std::shared_ptr<probe_condition<manual_timer>> p;
    asio::post(ioc, [&] { p->stop(); });
    p = make_probe<manual_timer>(ioc.get_executor(), "peer", check);
    BOOST_CHECK_NO_THROW(steadfast::run_virtual(ioc));
    BOOST_TEST(*checks == 0);
    BOOST_TEST(ioc.stopped());
}

// ... and one dropped from inside the first check, before it ever waited.
BOOST_AUTO_TEST_CASE(a_probe_dropped_during_its_first_check) {
    virtual_time vt;
    asio::io_context ioc;
    auto checks = std::make_shared<int>(0);
    std::shared_ptr<probe_condition<manual_timer>> p;
    auto check = [checks, &p]() -> asio::awaitable<bool> {
        ++*checks;
        p.reset();
        co_return true;
    };
    p = make_probe<manual_timer>(ioc.get_executor(), "peer", check);
    std::weak_ptr<condition> weak = p;
    steadfast::run_virtual(ioc);
    BOOST_TEST(weak.expired());
    BOOST_TEST(*checks == 1);
    BOOST_TEST(ioc.stopped());
}

// ... and one dropped after a minute of checks, between two of them or
// during one: no check after the drop beyond the one in flight.
BOOST_AUTO_TEST_CASE(a_probe_dropped_after_a_minute_of_checks) {
    for (bool during_a_check : {false, true}) {
        BOOST_TEST_CONTEXT("during a check: " << during_a_check) {
            virtual_time vt;
            asio::io_context ioc;
            auto checks = std::make_shared<int>(0);
            auto check = [checks]() -> asio::awaitable<bool> {
                ++*checks;
                co_await steadfast_test::virtual_sleep(200ms);
                co_return true;
            };
            probe_options o;
            o.interval = 1s;
            auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
            std::weak_ptr<condition> weak = p;
            // Checks start at 0, 1.2, 2.4, ... s and each lasts 200 ms.
            steadfast::run_virtual(ioc, manual_clock::time_point(during_a_check ? 60100ms : 60500ms));
            const int before = *checks;
            BOOST_TEST(before >= 50);
            p.reset();
            steadfast::run_virtual(ioc);
            BOOST_TEST(weak.expired());
            BOOST_TEST(*checks == before);  // the one in flight (if any) was counted when it began
            BOOST_TEST(ioc.stopped());
        }
    }
}

// Finding 4: the attempt counter is 64 bits: past 2^32 it goes on counting
// (it wrapped to 0, which also meant "no attempt in flight", and restarted
// the backoff's ladder).
BOOST_AUTO_TEST_CASE(the_attempt_counter_goes_past_32_bits) {
    const std::uint64_t two32 = std::uint64_t(1) << 32;
    auto p = retry_policy{}.with_backoff(backoff::schedule("1s 2s 3s")).with_stop(stop::max_attempts(two32 + 2));
    retry_state st(p);
    detail::retry_state_access::set_attempts(st, two32 - 1);
    const attempt_context c = st.begin_attempt(0s);
    BOOST_TEST(c.number == two32);
    BOOST_TEST(st.attempts() == two32);
    decision d = st.on_outcome(classification::retryable(asio::error::connection_refused), 0s);
    BOOST_TEST((d.what == decision::action::retry));
    BOOST_TEST(d.delay.count() == nanoseconds(3s).count());  // the ladder's last step, not its first
    st.begin_attempt(0s);
    d = st.on_outcome(classification::retryable(asio::error::connection_refused), 0s);
    BOOST_TEST((d.what == decision::action::retry));
    st.begin_attempt(0s);
    BOOST_TEST(st.attempts() == two32 + 2);
    d = st.on_outcome(classification::retryable(asio::error::connection_refused), 0s);
    BOOST_TEST((d.what == decision::action::stop));
    BOOST_TEST((d.reason == stop_reason::attempts_exhausted));  // a limit above 2^32 is honoured
    // The summary and the result carry the whole count.
    static_assert(std::numeric_limits<decltype(attempt_context{}.number)>::digits == 64);
    static_assert(std::numeric_limits<decltype(retry_summary{}.attempts)>::digits == 64);
    static_assert(std::is_same_v<decltype(std::declval<const retry_result<int>&>().attempts()), std::uint64_t>);
}

// Past 2^63 too: a linear backoff stays at its cap (no signed overflow; UBSan).
BOOST_AUTO_TEST_CASE(a_linear_backoff_far_past_32_bits) {
    const auto b = backoff::linear(1ms, 1ms, 10s);
    auto draw = []() -> std::uint64_t { return 0; };
    BOOST_TEST(b.delay((std::uint64_t(1) << 63) + 2, 0ms, draw).count() == nanoseconds(10s).count());
    BOOST_TEST(b.delay(std::numeric_limits<std::uint64_t>::max(), 0ms, draw).count() == nanoseconds(10s).count());
    BOOST_TEST(b.delay(3, 0ms, draw).count() == nanoseconds(3ms).count());
}

// The attempt watch tells attempt 2^32 from "none in flight" (0): a timeout
// armed for it still fires.
BOOST_AUTO_TEST_CASE(a_timeout_fires_for_attempt_two_to_the_32) {
    virtual_time vt;
    asio::io_context ioc;
    using watch_t = detail::attempt_watch<manual_timer>;
    auto& svc = detail::attempt_timeouts<manual_timer>::of(ioc.get_executor());
    auto w = svc.lease(ioc.get_executor());
    const std::uint64_t n = std::uint64_t(1) << 32;
    w->attempt = n;
    bool fired = false;
    w->signal.slot().assign([&](asio::cancellation_type) { fired = true; });
    svc.add(*w, manual_clock::now() + 1s, n);
    steadfast::run_virtual(ioc);
    BOOST_TEST(fired);
    BOOST_TEST(w->timed_out);
    svc.give_back(std::move(w));
    static_assert(std::numeric_limits<decltype(watch_t::attempt)>::digits == 64);
}

// A watch given back to the pool drops its last attempt's handler (and what
// that holds: an executor, a frame's state) but keeps the handler's memory:
// the next operation's attempt reuses it rather than allocating again.
BOOST_AUTO_TEST_CASE(a_watch_given_back_drops_its_handler_and_keeps_its_memory) {
    asio::io_context ioc;
    auto& svc = detail::attempt_timeouts<manual_timer>::of(ioc.get_executor());
    auto w = svc.lease(ioc.get_executor());
    auto* const raw = w.get();
    auto held = std::make_shared<int>(0);
    w->signal.slot().assign([held](asio::cancellation_type) { ++*held; });
    BOOST_TEST(held.use_count() == 2);
    svc.give_back(std::move(w));
    BOOST_TEST(held.use_count() == 1);  // the handler is gone
    auto again = svc.lease(ioc.get_executor());
    BOOST_TEST(again.get() == raw);                         // the pooled one
    BOOST_TEST(again->signal.slot().has_handler());         // its memory is still there
    again->signal.emit(asio::cancellation_type::terminal);  // and what holds it does nothing
    BOOST_TEST(*held == 0);
    svc.give_back(std::move(again));
}

BOOST_AUTO_TEST_SUITE_END()
