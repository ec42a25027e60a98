// async_retry with different completion tokens and per-operation cancellation.
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <steadfast_test/virtual_time.hpp>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::virtual_time;

namespace {
auto flaky(int succeed_at) {
    return [succeed_at](const attempt_context& c) -> asio::awaitable<error_code> {
        co_return static_cast<int>(c.number) < succeed_at ? error_code(asio::error::host_unreachable) : error_code{};
    };
}
const auto policy = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(5));
using result_t = retry_result<error_code>;
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_async_retry)

BOOST_AUTO_TEST_CASE(plain_callback) {
    virtual_time vt;
    asio::io_context ioc;
    std::optional<result_t> out;
    steadfast::async_retry<manual_timer>(ioc.get_executor(), policy, flaky(3), [&](result_t r) { out = std::move(r); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->ok());
    BOOST_TEST(out->attempts() == 3u);
}

// An execution context is accepted where an executor is.
BOOST_AUTO_TEST_CASE(on_an_execution_context) {
    virtual_time vt;
    asio::io_context ioc;
    std::optional<result_t> out;
    steadfast::async_retry<manual_timer>(ioc, policy, flaky(2), [&](result_t r) { out = std::move(r); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->attempts() == 2u);
}

BOOST_AUTO_TEST_CASE(deferred_and_use_awaitable) {
    virtual_time vt;
    asio::io_context ioc;
    auto op = steadfast::async_retry<manual_timer>(ioc.get_executor(), policy, flaky(2), asio::deferred);
    std::optional<result_t> out;
    std::move(op)([&](result_t r) { out = std::move(r); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST(out->attempts() == 2u);

    auto r = steadfast_test::run_virtual(ioc, [&]() -> asio::awaitable<result_t> {
        co_return co_await steadfast::async_retry<manual_timer>(co_await asio::this_coro::executor, policy, flaky(4),
                                                                asio::use_awaitable);
    }());
    BOOST_TEST(r.attempts() == 4u);
}

BOOST_AUTO_TEST_CASE(per_operation_cancellation_with_a_callback) {
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    std::optional<result_t> out;
    auto forever = retry_policy{}.with_backoff(backoff::fixed(10min)).with_stop(stop::never());
    steadfast::async_retry<manual_timer>(
        ioc.get_executor(), forever, flaky(1'000'000),
        asio::bind_cancellation_slot(sig.slot(), [&](result_t r) { out = std::move(r); }));
    manual_timer t(ioc, 25min);
    t.async_wait([&](error_code) { sig.emit(asio::cancellation_type::terminal); });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(out->attempts() == 3u);  // at 0, 10 and 20 minutes
    BOOST_TEST(std::chrono::duration_cast<std::chrono::minutes>(out->elapsed()).count() == 25);
}

namespace {
struct closed_gate final : watchable {
    closed_gate() : watchable("gate") {}
    bool value() const override { return false; }
};
}  // namespace

// Cancelled while waiting on a gate that never opens: `cancelled` at once,
// with no attempt made (the gate wait does not go on).
BOOST_AUTO_TEST_CASE(cancellation_while_the_gate_is_closed) {
    virtual_time vt;
    asio::io_context ioc;
    asio::cancellation_signal sig;
    std::optional<result_t> out;
    auto gated = retry_policy{}.with_attempt_when(std::make_shared<closed_gate>()).with_stop(stop::never());
    steadfast::async_retry<manual_timer>(
        ioc.get_executor(), gated, flaky(1),
        asio::bind_cancellation_slot(sig.slot(), [&](result_t r) { out = std::move(r); }));
    manual_timer t(ioc, 5min);
    t.async_wait([&](error_code) { sig.emit(asio::cancellation_type::terminal); });
    steadfast::run_virtual(ioc, manual_clock::time_point(10h));
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((out->reason() == stop_reason::cancelled));
    BOOST_TEST(out->attempts() == 0u);
    BOOST_TEST(std::chrono::duration_cast<std::chrono::minutes>(out->elapsed()).count() == 5);
}

BOOST_AUTO_TEST_CASE(io_context_stop_leaves_nothing_behind) {
    // Destroying a stopped io_context destroys the suspended retry: no leak
    // (checked by the ASan run), no callback after the fact.
    virtual_time vt;
    bool called = false;
    {
        asio::io_context ioc;
        auto forever = retry_policy{}.with_backoff(backoff::fixed(1h)).with_stop(stop::never());
        steadfast::async_retry<manual_timer>(ioc.get_executor(), forever, flaky(1'000'000),
                                             [&](result_t) { called = true; });
        ioc.poll();
        ioc.stop();
    }
    BOOST_TEST(!called);
}

BOOST_AUTO_TEST_SUITE_END()
