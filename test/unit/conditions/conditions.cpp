// Conditions on their own: flags, waiters, combinators, deadlines, probes.
#include <steadfast/conditions.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <steadfast_test/virtual_time.hpp>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::virtual_time;

namespace {
// set() from outside the executor is dispatched to it: run what is ready.
void pump(asio::io_context& ioc) {
    ioc.restart();
    ioc.poll();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(conditions_flag)

BOOST_AUTO_TEST_CASE(waiters_wake_on_change_only) {
    asio::io_context ioc;
    auto f = make_flag(ioc.get_executor(), "secondary-online");
    int woke_true = 0, woke_false = 0;
    for (int i = 0; i < 3; ++i) f->async_wait_until(true, [&](error_code ec) { woke_true += !ec; });
    f->async_wait_until(false, [&](error_code ec) { woke_false += !ec; });  // already false: at once
    pump(ioc);
    BOOST_TEST(woke_false == 1);
    BOOST_TEST(woke_true == 0);
    BOOST_TEST(f->waiter_count() == 3u);
    f->set();
    pump(ioc);
    BOOST_TEST(woke_true == 3);
    BOOST_TEST(f->waiter_count() == 0u);
    BOOST_TEST(f->subscriber_count() == 0u);
}

BOOST_AUTO_TEST_CASE(cancelling_a_waiter) {
    asio::io_context ioc;
    auto f = make_flag(ioc.get_executor(), "f");
    asio::cancellation_signal sig;
    error_code got;
    bool called = false;
    f->async_wait_until(true, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) {
                            called = true;
                            got = ec;
                        }));
    int other = 0;
    f->async_wait_until(true, [&](error_code) { ++other; });
    pump(ioc);
    sig.emit(asio::cancellation_type::terminal);
    pump(ioc);
    BOOST_TEST(called);
    BOOST_TEST((got == asio::error::operation_aborted));
    BOOST_TEST(f->waiter_count() == 1u);  // the other one still waits
    f->set();
    pump(ioc);
    BOOST_TEST(other == 1);
}

BOOST_AUTO_TEST_CASE(set_from_another_thread_hops_to_the_executor) {
    asio::io_context ioc;
    auto f = make_flag(ioc.get_executor(), "f");
    std::thread::id woke_on;
    f->async_wait_until(true, [&](error_code) { woke_on = std::this_thread::get_id(); });
    // run() does not return while the wait is pending: the other thread's set() ends it.
    std::thread other([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        f->set();
    });
    ioc.run();
    other.join();
    BOOST_TEST((woke_on == std::this_thread::get_id()));
    BOOST_TEST(f->value());
}

BOOST_AUTO_TEST_CASE(many_waiters_and_destroyed_context) {
    // Waiters pending when the io_context goes away are destroyed, not leaked
    // (the ASan run checks), and the coroutines they would resume with them.
    auto ioc = std::make_unique<asio::io_context>();
    auto f = make_flag(ioc->get_executor(), "f");
    for (int i = 0; i < 10'000; ++i)
        asio::co_spawn(
            *ioc, [f]() -> asio::awaitable<void> { co_await f->async_wait_until(true, asio::use_awaitable); },
            asio::detached);
    ioc->poll();
    BOOST_TEST(f->waiter_count() == 10'000u);
    BOOST_TEST(!ioc->stopped());  // the waits are outstanding work
    ioc.reset();
    BOOST_TEST(f->waiter_count() == 0u);
}

BOOST_AUTO_TEST_CASE(external_source_and_shutdown) {
    asio::io_context ioc;
    external_condition::push_fn pusher;
    bool disconnected = false;
    {
        auto ext = make_external(ioc.get_executor(), "discovery", false, [&](external_condition::push_fn p) {
            pusher = std::move(p);
            return std::function<void()>([&] { disconnected = true; });
        });
        std::thread t([&] { pusher(true); });
        t.join();
        ioc.run();
        ioc.restart();
        BOOST_TEST(ext->value());
    }
    BOOST_TEST(disconnected);
    pusher(false);  // after the condition is gone: harmless
    ioc.run();
    ioc.restart();

    auto sd = make_shutdown_requested(ioc.get_executor());
    BOOST_TEST(!sd->value());
    sd->request();
    pump(ioc);
    BOOST_TEST(sd->value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conditions_combinators)

BOOST_AUTO_TEST_CASE(truth_tables) {
    asio::io_context ioc;
    auto a = make_flag(ioc.get_executor(), "a");
    auto b = make_flag(ioc.get_executor(), "b");
    cond ca = a, cb = b;
    cond both = ca && cb, either = ca || cb, not_a = !ca;
    BOOST_TEST(both->name() == "(a && b)");
    BOOST_TEST(not_a->name() == "!a");
    for (bool va : {false, true})
        for (bool vb : {false, true}) {
            a->set(va);
            b->set(vb);
            pump(ioc);
            BOOST_TEST(both->value() == (va && vb));
            BOOST_TEST(either->value() == (va || vb));
            BOOST_TEST(not_a->value() == !va);
        }
}

BOOST_AUTO_TEST_CASE(notify_only_on_change_of_the_result) {
    asio::io_context ioc;
    auto a = make_flag(ioc.get_executor(), "a");
    auto b = make_flag(ioc.get_executor(), "b");
    cond ca = a, cb = b;
    cond both = ca && cb;
    cond nested = !(both || cond(make_flag(ioc.get_executor(), "c")));
    condition_ptr plain = a;
    BOOST_TEST(!!plain);  // a null check on a plain pointer is still a null check
    std::vector<bool> seen, nested_seen;
    watchable::subscription s1, s2;
    both->subscribe(s1, [&](bool v) { seen.push_back(v); });
    nested->subscribe(s2, [&](bool v) { nested_seen.push_back(v); });
    a->set();  // a && b still false: no notification
    pump(ioc);
    b->set();  // true
    pump(ioc);
    a->set();  // no change
    pump(ioc);
    a->clear();  // false
    pump(ioc);
    BOOST_TEST(seen == (std::vector<bool>{true, false}), boost::test_tools::per_element());
    BOOST_TEST(nested_seen == (std::vector<bool>{false, true}), boost::test_tools::per_element());
    // A derived condition can be awaited like any other.
    bool woke = false;
    both->async_wait_until(true, [&](error_code ec) { woke = !ec; });
    b->set();
    a->set();
    pump(ioc);
    BOOST_TEST(woke);
}

BOOST_AUTO_TEST_CASE(different_executors_are_refused) {
    asio::io_context one, two;
    cond a = make_flag(one.get_executor(), "a"), b = make_flag(two.get_executor(), "b");
    BOOST_CHECK_THROW(a && b, std::invalid_argument);
    BOOST_CHECK_THROW(a || cond{}, std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conditions_deadline)

BOOST_AUTO_TEST_CASE(turns_true_at_its_time) {
    virtual_time vt;
    asio::io_context ioc;
    auto d = make_deadline<manual_timer>(ioc.get_executor(), "give-up", manual_clock::now() + 90s);
    std::chrono::nanoseconds at{-1};
    d->async_wait_until(true, [&](error_code) { at = vt.now(); });
    steadfast::run_virtual(ioc);
    BOOST_TEST(d->value());
    BOOST_TEST(at.count() == std::chrono::nanoseconds(90s).count());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conditions_probe)

BOOST_AUTO_TEST_CASE(hysteresis_n_failures_down_one_success_up) {
    virtual_time vt;
    asio::io_context ioc;
    // Healthy until t=10s, down until t=20s, then healthy again.
    auto check = [&]() -> asio::awaitable<bool> {
        auto t = vt.now();
        co_return t < 10s || t >= 20s;
    };
    probe_options o;
    o.interval = 1s;
    o.failing_backoff = backoff::fixed(1s);
    o.failures_to_offline = 3;
    o.initially_online = true;
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    std::vector<std::pair<std::int64_t, bool>> transitions;
    watchable::subscription sub;
    p->subscribe(sub, [&](bool v) {
        transitions.emplace_back(std::chrono::duration_cast<std::chrono::seconds>(vt.now()).count(), v);
    });
    steadfast::run_virtual(ioc, manual_clock::time_point(30s));
    p->stop();
    steadfast::run_virtual(ioc);
    // Fails at 10, 11, 12: offline on the third; back at the first success, 20.
    BOOST_TEST(transitions.size() == 2u);
    BOOST_TEST(transitions.at(0).first == 12);
    BOOST_TEST(!transitions.at(0).second);
    BOOST_TEST(transitions.at(1).first == 20);
    BOOST_TEST(transitions.at(1).second);
}

BOOST_AUTO_TEST_CASE(slow_and_throwing_checks_are_failures) {
    virtual_time vt;
    asio::io_context ioc;
    int calls = 0;
    auto check = [&]() -> asio::awaitable<bool> {
        ++calls;
        if (calls == 1) throw std::runtime_error("boom");
        co_await steadfast_test::virtual_sleep(1h);  // hangs: the timeout must cut it
        co_return true;
    };
    probe_options o;
    o.check_timeout = 500ms;
    o.failures_to_offline = 2;
    o.initially_online = true;
    o.failing_backoff = backoff::fixed(1s);
    auto p = make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    steadfast::run_virtual(ioc, manual_clock::time_point(1600ms));
    BOOST_TEST(!p->value());
    BOOST_TEST(calls == 2);
    p->stop();
    steadfast::run_virtual(ioc);
}

// A probe on virtual time whose check notes when it runs and answers `up`.
struct noted_checks {
    virtual_time vt;
    asio::io_context ioc;
    bool up = true;
    std::vector<std::int64_t> at;  // each check's time, ms
    std::shared_ptr<probe_condition<manual_timer>> probe(const probe_options& o) {
        auto check = [this]() -> asio::awaitable<bool> {
            at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(vt.now()).count());
            co_return up;
        };
        return make_probe<manual_timer>(ioc.get_executor(), "peer", check, o);
    }
};

BOOST_FIXTURE_TEST_CASE(check_soon_cuts_one_wait_short, noted_checks) {
    probe_options o;
    o.interval = 1s;
    o.failing_backoff = backoff::fixed(50ms);
    o.failures_to_offline = 2;
    o.initially_online = true;
    auto p = probe(o);
    steadfast::run_virtual(ioc, manual_clock::time_point(300ms));
    BOOST_TEST(at == (std::vector<std::int64_t>{0}), boost::test_tools::per_element());
    // The peer fails and the owner saw it: one check at once (twice asked,
    // once done), then the failing backoff's, offline on the second failure.
    up = false;
    p->check_soon();
    p->check_soon();
    steadfast::run_virtual(ioc, manual_clock::time_point(360ms));
    BOOST_TEST(at == (std::vector<std::int64_t>{0, 300, 350}), boost::test_tools::per_element());
    BOOST_TEST(!p->value());
    // Stopped: nothing more, asked or not.
    p->stop();
    steadfast::run_virtual(ioc, manual_clock::time_point(370ms));
    p->check_soon();
    steadfast::run_virtual(ioc);
    BOOST_TEST(at.size() == 3u);
}

// stop() and start() in one handler: the old loop, whose stop is still on its
// way, neither checks (even with its wait cut short by check_soon()) nor
// takes the new loop's wait from check_soon() when it ends.
BOOST_AUTO_TEST_CASE(a_restart_in_one_handler_leaves_one_loop) {
    for (const bool soon_first : {false, true}) {
        BOOST_TEST_CONTEXT("check_soon() before the restart: " << soon_first) {
            noted_checks n;
            auto& ioc = n.ioc;
            const auto& at = n.at;
            probe_options o;
            o.interval = 1s;
            o.initially_online = true;
            auto p = n.probe(o);
            steadfast::run_virtual(ioc, manual_clock::time_point(300ms));
            if (soon_first) p->check_soon();
            p->stop();
            p->start();
            steadfast::run_virtual(ioc, manual_clock::time_point(500ms));
            BOOST_TEST(at == (std::vector<std::int64_t>{0, 300}), boost::test_tools::per_element());
            p->check_soon();  // the new loop's wait
            steadfast::run_virtual(ioc, manual_clock::time_point(1600ms));
            BOOST_TEST(at == (std::vector<std::int64_t>{0, 300, 500, 1500}), boost::test_tools::per_element());
            p->stop();
            steadfast::run_virtual(ioc);
        }
    }
}

BOOST_AUTO_TEST_CASE(invalid_options_are_refused) {
    asio::io_context ioc;
    auto ok = []() -> asio::awaitable<bool> { co_return true; };
    probe_options o;
    o.failures_to_offline = 0;
    BOOST_CHECK_THROW(make_probe(ioc.get_executor(), "p", ok, o), std::invalid_argument);
    BOOST_CHECK_THROW(make_probe(ioc.get_executor(), "p", nullptr), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
