// The HTTP health check driving a probe condition against a real server.
#include <steadfast/conditions.hpp>
#include <steadfast/transport/health.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <steadfast_test/fault_server.hpp>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::fault_server;
using steadfast_test::step;

BOOST_AUTO_TEST_SUITE(transport_health)

BOOST_AUTO_TEST_CASE(probe_follows_the_peer) {
    fault_server s;
    // ok, ok, then three failures of different kinds, then healthy for good.
    s.script({step{}, step{}, step::answer(503), step::drop_connection(), step::answer(500)});
    asio::io_context ioc;
    http::client::options co;
    co.port = s.port();
    co.read_timeout = 200ms;
    http::client c(ioc.get_executor(), co);
    probe_options o;
    o.interval = 10ms;
    o.failing_backoff = backoff::fixed(10ms);
    o.failures_to_offline = 2;
    auto online = make_probe(
        ioc.get_executor(), "secondary-online", [&] { return http::health_check(c, "/x"); }, o);
    std::vector<bool> transitions;
    watchable::subscription sub;
    online->subscribe(sub, [&](bool v) {
        transitions.push_back(v);
        if (transitions.size() == 3) online->stop();
    });
    asio::steady_timer guard(ioc, 10s);  // the test fails rather than hangs
    guard.async_wait([&](error_code ec) {
        if (!ec) online->stop();
    });
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await online->async_wait_until(true, asio::use_awaitable);   // first success
            co_await online->async_wait_until(false, asio::use_awaitable);  // two failures in a row
            co_await online->async_wait_until(true, asio::use_awaitable);   // back
            guard.cancel();
        },
        asio::detached);
    ioc.run();
    BOOST_TEST(transitions == (std::vector<bool>{true, false, true}), boost::test_tools::per_element());
    // ok, ok, 503, then drop + 500 in one check (the dropped keep-alive
    // connection is reopened inside the client for an idempotent GET), ok.
    BOOST_TEST(online->checks() == 5u);
}

// What a failed check says of its cause: a refused connection (nothing
// listens: a peer restarting) apart from an answer that is not 200.
BOOST_AUTO_TEST_CASE(a_refused_connection_is_told_apart) {
    asio::io_context ioc;
    std::string closed_port;
    {
        asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
        closed_port = std::to_string(a.local_endpoint().port());
    }  // closed: connections to it are refused
    fault_server s;
    s.script({step::answer(503)});
    std::vector<http::health_report> seen;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (const auto& port : {closed_port, s.port(), s.port()}) {
                http::client::options co;
                co.port = port;
                http::client c(co_await asio::this_coro::executor, co);
                seen.push_back(co_await http::health_check_report(c, "/x"));
            }
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(seen.size() == 3u);
    BOOST_TEST(!seen[0].healthy);
    BOOST_TEST(seen[0].refused);
    BOOST_TEST(seen[0].why.find("connect") == 0u, seen[0].why);
    BOOST_TEST(!seen[1].healthy);
    BOOST_TEST(!seen[1].refused);
    BOOST_TEST(seen[1].why.rfind("HTTP 503: ", 0) == 0u, seen[1].why);  // and what the answer said
    BOOST_TEST(seen[1].why.find("scripted") != std::string::npos, seen[1].why);
    BOOST_TEST(seen[2].healthy);
    BOOST_TEST(!seen[2].refused);
}

BOOST_AUTO_TEST_SUITE_END()
