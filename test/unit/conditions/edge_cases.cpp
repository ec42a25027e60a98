// Conditions at their edges (issue 9, findings 4 to 9): a stop-when true only
// briefly, a derived condition seen half-updated, a moved deadline, a check
// aborted, a probe let go, a deferred wait outliving its condition.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <steadfast_test/virtual_time.hpp>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::run_both;
using steadfast_test::secs;
using steadfast_test::virtual_time;

namespace {
// Sets `f` and clears it again in the same handler, at virtual time `at`.
void blip_at(asio::io_context& ioc, std::shared_ptr<flag> f, std::chrono::nanoseconds at) {
    auto t = std::make_shared<manual_timer>(ioc, manual_clock::time_point(at));
    t->async_wait([t, f](error_code ec) {
        if (ec) return;
        f->set(true);
        f->set(false);
    });
}
}  // namespace

BOOST_AUTO_TEST_SUITE(conditions_edge_cases)

// Finding 4: a stop-when condition set and cleared during an attempt (or a
// sleep) was reported as `cancelled` (or ignored), not as `condition`.
BOOST_AUTO_TEST_CASE(stop_when_true_only_briefly_still_stops) {
    virtual_time vt;
    auto hang = [](const attempt_context&) -> asio::awaitable<error_code> {
        co_await steadfast_test::virtual_sleep(10h);
        co_return error_code{};
    };
    auto fail = [](const attempt_context&) -> asio::awaitable<error_code> { co_return asio::error::host_unreachable; };
    retry_policy policy;
    auto during_attempt = run_both(policy, hang, [&](asio::io_context& ioc) {
        auto demoted = make_flag(ioc.get_executor(), "demoted");
        blip_at(ioc, demoted, 3s);
        policy = retry_policy{}.with_stop(stop::never()).with_stop_when(demoted);
    });
    auto during_sleep = run_both(policy, fail, [&](asio::io_context& ioc) {
        auto demoted = make_flag(ioc.get_executor(), "demoted");
        blip_at(ioc, demoted, 10min);
        policy = retry_policy{}.with_backoff(backoff::fixed(1h)).with_stop(stop::never()).with_stop_when(demoted);
    });
    for (auto& r : during_attempt) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST(secs(r.elapsed()) == 3);
    }
    for (auto& r : during_sleep) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST(r.attempts() == 1u);
        BOOST_TEST(secs(r.elapsed()) == 600);
    }
}

// Finding 5: `a && !a` notified `true` once when `a` was set (it read `!a`
// before `!a` had heard of the change), and a retry stopping on it stopped.
BOOST_AUTO_TEST_CASE(a_derived_condition_is_never_seen_half_updated) {
    asio::io_context ioc;
    auto a = make_flag(ioc.get_executor(), "a");
    cond ca = a;
    cond never = ca && !ca;
    cond always = ca || !ca;
    int rose = 0, fell = 0;
    watchable::subscription s1, s2;
    never->subscribe(s1, [&](bool v) { rose += v; });
    always->subscribe(s2, [&](bool v) { fell += !v; });
    for (int i = 0; i < 3; ++i) {
        a->set(true);
        ioc.poll();
        BOOST_TEST(!never.value());
        BOOST_TEST(always.value());
        a->set(false);
        ioc.poll();
    }
    BOOST_TEST(rose == 0);
    BOOST_TEST(fell == 0);

    virtual_time vt;
    auto fail = [](const attempt_context&) -> asio::awaitable<error_code> { co_return asio::error::host_unreachable; };
    retry_policy policy;
    auto results = run_both(policy, fail, [&](asio::io_context& io) {
        auto f = make_flag(io.get_executor(), "f");
        cond cf = f;
        auto t = std::make_shared<manual_timer>(io, manual_clock::time_point(1500ms));
        t->async_wait([t, f](error_code) { f->set(true); });
        policy =
            retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(4)).with_stop_when(cf && !cf);
    });
    for (auto& r : results) {
        BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
        BOOST_TEST(r.attempts() == 4u);
    }
}

// Finding 6: a deadline moved later could still turn true at the old time
// (when the old wait had completed but its handler had not run yet).
BOOST_AUTO_TEST_CASE(a_moved_deadline_does_not_fire_at_the_old_time) {
    virtual_time vt;
    asio::io_context ioc;
    // Both waits end at t = 10 s; the deadline's is queued first, the mover's
    // runs first... or the other way round: either way, at 15 s the deadline,
    // moved to 20 s, must be false, and true from 20 s.
    for (int order = 0; order < 2; ++order) {
        manual_clock::reset();
        ioc.restart();
        std::shared_ptr<deadline_condition<manual_timer>> d;
        auto mover = std::make_shared<manual_timer>(ioc, manual_clock::time_point(10s));
        if (order == 0) d = make_deadline<manual_timer>(ioc.get_executor(), "d", manual_clock::time_point(10s));
        mover->async_wait([&d](error_code) { d->expires_at(manual_clock::time_point(20s)); });
        if (order == 1) d = make_deadline<manual_timer>(ioc.get_executor(), "d", manual_clock::time_point(10s));
        std::vector<std::int64_t> rose;
        watchable::subscription s;
        d->subscribe(s, [&](bool v) {
            if (v) rose.push_back(secs(vt.now()));
        });
        steadfast::run_virtual(ioc, manual_clock::time_point(15s));
        BOOST_TEST_CONTEXT("order " << order) {
            BOOST_TEST(!d->value());
            steadfast::run_virtual(ioc, manual_clock::time_point(30s));
            BOOST_TEST(d->value());
            BOOST_TEST(rose.back() == 20);
        }
    }
}

// Finding 7: a check that failed with operation_aborted (its own I/O
// cancelled) ended the probe for good.
BOOST_AUTO_TEST_CASE(a_check_aborted_is_a_failed_check) {
    virtual_time vt;
    asio::io_context ioc;
    int calls = 0;
    auto check = [&]() -> asio::awaitable<bool> {
        if (++calls <= 2) throw boost::system::system_error(asio::error::operation_aborted);
        co_return true;
    };
    probe_options o;
    o.interval = 1s;
    o.failing_backoff = backoff::fixed(1s);
    o.failures_to_offline = 1;
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    steadfast::run_virtual(ioc, manual_clock::time_point(1500ms));
    BOOST_TEST(!p->value());
    BOOST_TEST(p->consecutive_failures() == 2u);
    steadfast::run_virtual(ioc, manual_clock::time_point(10s));
    BOOST_TEST(p->value());
    BOOST_TEST(calls >= 10);
    p->stop();
    steadfast::run_virtual(ioc);
}

// Finding 8: a probe kept itself alive after its last owner let go (3,601
// checks in the next hour).
BOOST_AUTO_TEST_CASE(a_probe_let_go_stops_probing) {
    virtual_time vt;
    asio::io_context ioc;
    auto calls = std::make_shared<int>(0);
    auto check = [calls]() -> asio::awaitable<bool> {
        ++*calls;
        co_return true;
    };
    probe_options o;
    o.interval = 1s;
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    std::weak_ptr<condition> weak = p;
    steadfast::run_virtual(ioc, manual_clock::time_point(5500ms));
    BOOST_TEST(*calls == 6);
    p.reset();
    BOOST_TEST(weak.expired());
    ioc.poll();                 // no time passes: letting go ended the wait at once
    BOOST_TEST(ioc.stopped());  // nothing left: the probe's loop ended
    steadfast::run_virtual(ioc, manual_clock::time_point(1h));
    BOOST_TEST(*calls == 6);
}

// A probe stopped and started again at once goes on probing (the old loop,
// ending later, must not mark the new one as stopped).
BOOST_AUTO_TEST_CASE(a_probe_stopped_and_started_again_probes) {
    virtual_time vt;
    asio::io_context ioc;
    int calls = 0;
    auto check = [&]() -> asio::awaitable<bool> {
        ++calls;
        co_return true;
    };
    probe_options o;
    o.interval = 1s;
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    steadfast::run_virtual(ioc, manual_clock::time_point(2500ms));
    BOOST_TEST(calls == 3);
    p->stop();
    p->start();
    steadfast::run_virtual(ioc, manual_clock::time_point(10s));
    BOOST_TEST(calls >= 10);
    p->stop();
    p->start();
    p->stop();
    steadfast::run_virtual(ioc);  // both loops end: run_virtual returns
    const int after = calls;
    steadfast::run_virtual(ioc, manual_clock::time_point(1h));
    BOOST_TEST(calls == after);
}

// Finding 9: a deferred wait launched after its condition was dropped used
// freed memory (the initiation held a raw `this`).
BOOST_AUTO_TEST_CASE(a_deferred_wait_keeps_its_condition) {
    asio::io_context ioc;
    auto f = make_flag(ioc.get_executor(), "f");
    std::weak_ptr<flag> weak = f;
    bool woke = false;
    {
        auto op = f->async_wait_until(true, asio::deferred);
        f.reset();
        BOOST_REQUIRE(!weak.expired());  // the operation holds it
        std::move(op)([&](error_code ec) { woke = !ec; });
    }
    BOOST_REQUIRE(!weak.expired());  // now the wait holds it
    weak.lock()->set(true);
    ioc.run();
    BOOST_TEST(woke);
    BOOST_TEST(weak.expired());  // released with the wait
}

BOOST_AUTO_TEST_SUITE_END()
