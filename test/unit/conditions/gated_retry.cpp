// Retries that stop on a condition or are gated by one (both retry forms).
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

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
// Flips `f` to `v` at virtual time `at`.
void flip_at(asio::io_context& ioc, std::shared_ptr<flag> f, std::chrono::nanoseconds at, bool v) {
    auto t = std::make_shared<manual_timer>(ioc, manual_clock::time_point(at));
    t->async_wait([t, f, v](error_code ec) {
        if (!ec) f->set(v);
    });
}

struct starts_log {
    std::shared_ptr<std::vector<std::int64_t>> starts = std::make_shared<std::vector<std::int64_t>>();
    retry_hooks hooks() const {
        return {.before_attempt = [s = starts](const attempt_context&) {
            s->push_back(secs(manual_clock::now().time_since_epoch()));
        }};
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(conditions_engine)

BOOST_AUTO_TEST_CASE(secondary_back_at_37s_is_tried_when_the_probe_sees_it) {
    virtual_time vt;
    // The secondary is down until t = 37 s. Without a gate the backoff
    // (1 s doubling to a 30 s cap) would try at 0, 1, 3, 7, 15, 31, 61.
    auto secondary_up = [] { return manual_clock::now().time_since_epoch() >= 37s; };
    auto send = [&](const attempt_context&) -> asio::awaitable<error_code> {
        co_return secondary_up() ? error_code{} : error_code(asio::error::connection_refused);
    };
    starts_log log;
    std::shared_ptr<probe_condition<manual_timer>> probe;
    auto policy = retry_policy{}
                      .with_backoff(backoff::exponential(1s, 2.0, 30s))
                      .with_stop(stop::never())
                      .with_hooks(log.hooks());
    auto results = run_both(policy, send, [&](asio::io_context& ioc) {
        log.starts->clear();
        probe_options o;
        o.interval = 1s;
        o.failing_backoff = backoff::fixed(1s);
        o.failures_to_offline = 3;
        o.initially_online = true;
        probe = make_probe<manual_timer>(
            ioc.get_executor(), "secondary-online", [&]() -> asio::awaitable<bool> { co_return secondary_up(); }, o);
        // Stop probing once delivered, so the io_context runs out of work.
        auto done = std::make_shared<manual_timer>(ioc, manual_clock::time_point(40s));
        done->async_wait([done, p = probe](error_code) { p->stop(); });
        policy = policy.with_attempt_when(probe);
    });
    for (auto& r : results) {
        BOOST_TEST(r.ok());
        BOOST_TEST(r.attempts() == 3u);
        BOOST_TEST(secs(r.elapsed()) == 37);
    }
    // Only the last form's log is kept: attempts at 0 and 1 (before the probe
    // declared the secondary offline at 2), then at 37 when it came back.
    BOOST_TEST(*log.starts == (std::vector<std::int64_t>{0, 1, 37}), boost::test_tools::per_element());
}

// Issue 9, finding 10: an elapsed-time limit of nanoseconds::max() behind a
// closed gate means "no limit", not an overflow that stops at once.
BOOST_AUTO_TEST_CASE(an_unbounded_deadline_behind_a_closed_gate_waits) {
    virtual_time vt;
    auto send = [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; };
    std::shared_ptr<flag> gate;
    auto policy = retry_policy{}.with_stop(stop::max_elapsed(std::chrono::nanoseconds::max()));
    auto results = run_both(policy, send, [&](asio::io_context& ioc) {
        // Not at the clock's zero: start + max must overflow to show the bug.
        manual_clock::set(manual_clock::time_point(1000s));
        gate = make_flag(ioc.get_executor(), "gate", false);
        flip_at(ioc, gate, 4600s, true);
        policy = policy.with_attempt_when(gate);
    });
    for (auto& r : results) {
        BOOST_TEST(r.ok(), "stopped with " << to_string(r.reason()));
        BOOST_TEST(secs(r.elapsed()) == 3600);
    }
}

// Issue 9, finding 13: a gate that opens just as the deadline passes must
// not start an attempt with a zero timeout.
BOOST_AUTO_TEST_CASE(no_attempt_with_a_zero_timeout_at_the_deadline) {
    virtual_time vt;
    auto timeouts = std::make_shared<std::vector<std::int64_t>>();
    auto send = [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; };
    std::shared_ptr<flag> gate;
    auto policy = retry_policy{}
                      .with_stop(stop::max_elapsed(10s))
                      .with_hooks({.before_attempt = [timeouts](const attempt_context& c) {
                          timeouts->push_back(c.timeout ? c.timeout->count() : -1);
                      }});
    auto results = run_both(policy, send, [&](asio::io_context& ioc) {
        gate = make_flag(ioc.get_executor(), "gate", false);
        flip_at(ioc, gate, 10s, true);  // the same instant as the deadline
        policy = policy.with_attempt_when(gate);
    });
    for (auto& r : results) BOOST_TEST((r.reason() == stop_reason::deadline), "stopped with " << to_string(r.reason()));
    for (auto t : *timeouts) BOOST_TEST(t != 0, "an attempt started with a zero timeout");
}

BOOST_AUTO_TEST_CASE(sleep_ends_early_when_the_gate_opens) {
    virtual_time vt;
    std::shared_ptr<flag> online;
    starts_log log;
    auto fail = [](const attempt_context& c) -> asio::awaitable<error_code> {
        co_return c.number < 2 ? error_code(asio::error::connection_refused) : error_code{};
    };
    retry_policy policy;
    auto results = run_both(policy, fail, [&](asio::io_context& ioc) {
        log.starts->clear();
        online = make_flag(ioc.get_executor(), "secondary-online", true);
        flip_at(ioc, online, 500ms, false);
        flip_at(ioc, online, 5s, true);
        policy = retry_policy{}
                     .with_backoff(backoff::fixed(30s))
                     .with_stop(stop::never())
                     .with_attempt_when(online)
                     .with_hooks(log.hooks());
    });
    for (auto& r : results) {
        BOOST_TEST(r.ok());
        BOOST_TEST(secs(r.elapsed()) == 5);  // not 30
    }
    BOOST_TEST(*log.starts == (std::vector<std::int64_t>{0, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(stop_when_during_a_sleep) {
    virtual_time vt;
    std::shared_ptr<flag> shutdown;
    auto fail = [](const attempt_context&) -> asio::awaitable<error_code> {
        co_return asio::error::connection_refused;
    };
    retry_policy policy;
    auto results = run_both(policy, fail, [&](asio::io_context& ioc) {
        shutdown = make_flag(ioc.get_executor(), "shutdown-requested");
        flip_at(ioc, shutdown, 10s, true);
        policy = retry_policy{}.with_backoff(backoff::fixed(1h)).with_stop(stop::never()).with_stop_when(shutdown);
    });
    for (auto& r : results) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST((r.error() == error::condition_met));
        BOOST_TEST(r.attempts() == 1u);
        BOOST_TEST(secs(r.elapsed()) == 10);
    }
}

BOOST_AUTO_TEST_CASE(stop_when_during_an_attempt_cancels_it) {
    virtual_time vt;
    std::shared_ptr<flag> demoted;
    auto cancelled = std::make_shared<int>(0);
    auto hang = [cancelled](const attempt_context&) -> asio::awaitable<int> {
        try {
            co_await steadfast_test::virtual_sleep(10h);
        } catch (const boost::system::system_error&) {
            ++*cancelled;
            throw;
        }
        co_return 1;
    };
    retry_policy policy;
    auto results = run_both(policy, hang, [&](asio::io_context& ioc) {
        demoted = make_flag(ioc.get_executor(), "demoted");
        flip_at(ioc, demoted, 3s, true);
        policy = retry_policy{}.with_stop(stop::never()).with_stop_when(demoted);
    });
    for (auto& r : results) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST(r.attempts() == 1u);
        BOOST_TEST(secs(r.elapsed()) == 3);
    }
    BOOST_TEST(*cancelled == 2);
}

BOOST_AUTO_TEST_CASE(closed_gate_makes_zero_attempts) {
    virtual_time vt;
    int calls = 0;
    auto send = [&calls](const attempt_context&) -> asio::awaitable<error_code> {
        ++calls;
        co_return error_code{};
    };
    // Ended by a stop-when condition...
    retry_policy policy;
    auto by_condition = run_both(policy, send, [&](asio::io_context& ioc) {
        auto online = make_flag(ioc.get_executor(), "secondary-online", false);
        auto shutdown = make_flag(ioc.get_executor(), "shutdown-requested");
        flip_at(ioc, shutdown, 60s, true);
        policy = retry_policy{}.with_attempt_when(online).with_stop_when(shutdown);
    });
    // ...and by the stop condition's deadline.
    auto by_deadline = run_both(policy, send, [&](asio::io_context& ioc) {
        auto online = make_flag(ioc.get_executor(), "secondary-online", false);
        policy = retry_policy{}.with_attempt_when(online).with_stop(stop::max_elapsed(10s));
    });
    for (auto& r : by_condition) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST(r.attempts() == 0u);
        BOOST_TEST(secs(r.elapsed()) == 60);
    }
    for (auto& r : by_deadline) {
        BOOST_TEST((r.reason() == stop_reason::deadline));
        BOOST_TEST(r.attempts() == 0u);
        BOOST_TEST(secs(r.elapsed()) == 10);
    }
    BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(stop_when_already_true_makes_no_attempt) {
    virtual_time vt;
    auto send = [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; };
    retry_policy policy;
    auto results = run_both(policy, send, [&](asio::io_context& ioc) {
        policy = retry_policy{}.with_stop_when(make_flag(ioc.get_executor(), "shutdown-requested", true));
    });
    for (auto& r : results) {
        BOOST_TEST((r.reason() == stop_reason::condition));
        BOOST_TEST(r.attempts() == 0u);
    }
}

BOOST_AUTO_TEST_SUITE_END()
