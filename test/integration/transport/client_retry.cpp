// The HTTP client against a real loopback server that misbehaves on cue: each
// case is classified as the README's table says and retried (or not) through
// the engine as it says.
#include <steadfast/engine.hpp>
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/pool.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>
#include <steadfast_test/fault_server.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::fault_server;
using steadfast_test::step;

namespace {
struct run_result {
    retry_result<http::outcome> r;
    std::vector<classification> seen;
    std::vector<bool> hinted;
    std::uint64_t client_connections = 0;
};

http::client::options client_opts(const fault_server& s) {
    http::client::options o;
    o.port = s.port();
    o.read_timeout = 300ms;
    return o;
}

// Sends `req` through the engine with client `c` (whose io_context is `ioc`):
// quick retries, and Retry-After values honoured up to 2 s (never shortened:
// the fault server's "Retry-After: 1" costs a real second).
run_result send(asio::io_context& ioc, http::client& c, http::request req, std::uint32_t attempts = 5) {
    run_result out;
    auto policy =
        retry_policy{}
            .with_backoff(backoff::fixed(1ms))
            .with_max_delay(2s)
            .with_stop(stop::max_attempts(attempts))
            .with_hooks({.after_attempt = [&](const attempt_context&, const classification& cl, const decision& d) {
                out.seen.push_back(cl);
                out.hinted.push_back(d.hinted);
            }});
    auto attempt = classified([&](const attempt_context&) { return c.send(req); }, http::make_classifier(req));
    asio::co_spawn(ioc, steadfast::retry(policy, attempt), [&](std::exception_ptr e, retry_result<http::outcome> r) {
        if (e) std::rethrow_exception(e);
        out.r = std::move(r);
    });
    ioc.restart();
    ioc.run();
    out.client_connections = c.connections_opened();
    return out;
}

// The same with a fresh client.
run_result send(http::client::options o, http::request req, std::uint32_t attempts = 5) {
    asio::io_context ioc;
    http::client c(ioc.get_executor(), std::move(o));
    return send(ioc, c, std::move(req), attempts);
}

http::request get() {
    return http::request{"GET", "/x", {}, {}};
}
http::request post(bool with_key) {
    http::request r{"POST", "/x", {{"Content-Type", "application/json"}}, "{}"};
    if (with_key) r.set("Idempotency-Key", "m-1");
    return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(transport_client)

BOOST_AUTO_TEST_CASE(keep_alive_reuses_one_connection) {
    fault_server s;
    asio::io_context ioc;
    http::client c(ioc.get_executor(), client_opts(s));
    for (int i = 0; i < 20; ++i) BOOST_TEST(send(ioc, c, get(), 1).r.ok());
    BOOST_TEST(s.connections() == 1u);
    BOOST_TEST(c.connections_opened() == 1u);
}

BOOST_AUTO_TEST_CASE(status_503_with_retry_after_is_retried_on_the_same_connection) {
    fault_server s;
    s.script({step::answer(503, "1"), step::answer(429, "Sun, 06 Nov 1994 08:49:37 GMT"), step::answer(502)});
    auto r = send(client_opts(s), post(false));  // statuses are retryable even for POST: nothing was processed
    BOOST_TEST(r.r.ok());
    BOOST_TEST(r.r.attempts() == 4u);
    BOOST_TEST(r.hinted.at(0));   // Retry-After: 1 (waited: a second)
    BOOST_TEST(r.hinted.at(1));   // an HTTP-date in the past: retry at once
    BOOST_TEST(!r.hinted.at(2));  // no header: the backoff
    BOOST_TEST((r.seen.at(0).ec == http::status_error(503)));
    BOOST_TEST(r.client_connections == 1u);
    BOOST_TEST(s.connections() == 1u);
}

BOOST_AUTO_TEST_CASE(permanent_statuses_and_configurable_500) {
    fault_server s;
    s.script({step::answer(400)});
    auto r = send(client_opts(s), get());
    BOOST_TEST((r.r.reason() == stop_reason::permanent));
    BOOST_TEST(r.r.attempts() == 1u);
    BOOST_TEST((r.r.last_error() == http::status_error(400)));
    BOOST_TEST(r.r.value().res().status == 400u);  // the answer is kept

    s.script({step::answer(500), step::answer(500)});
    auto r500 = send(client_opts(s), get(), 2);
    BOOST_TEST((r500.r.reason() == stop_reason::attempts_exhausted));
    http::outcome o{http::response::error(500, "x")};
    BOOST_TEST((http::classify(o, {.retry_500 = false}).kind == verdict::permanent));
}

BOOST_AUTO_TEST_CASE(dropped_connection_before_the_answer) {
    fault_server s;
    // GET: idempotent, retried. (First request of a fresh client: no silent reconnect.)
    s.script({step::drop_connection()});
    auto r = send(client_opts(s), get());
    BOOST_TEST(r.r.ok());
    BOOST_TEST(r.r.attempts() == 2u);
    BOOST_TEST((r.seen.at(0).kind == verdict::retryable));

    // POST without an Idempotency-Key: it may have been processed, not retried.
    s.script({step::drop_connection()});
    auto p = send(client_opts(s), post(false));
    BOOST_TEST((p.r.reason() == stop_reason::permanent));
    BOOST_TEST(p.r.attempts() == 1u);
    BOOST_TEST(p.r.value().error().request_sent);
    BOOST_TEST((p.r.value().error().phase == http::phase::read));

    // POST with an Idempotency-Key: the receiver deduplicates, retried.
    s.script({step::drop_connection()});
    auto k = send(client_opts(s), post(true));
    BOOST_TEST(k.r.ok());
    BOOST_TEST(k.r.attempts() == 2u);
}

BOOST_AUTO_TEST_CASE(answer_after_the_read_timeout) {
    fault_server s;
    s.script({step::answer_late(800ms)});
    auto r = send(client_opts(s), get());
    BOOST_TEST(r.r.ok());
    BOOST_TEST(r.r.attempts() == 2u);
    BOOST_TEST((r.seen.at(0).ec == boost::beast::error::timeout));  // a socket timeout IS retried (unlike HttpClient)

    s.script({step::answer_late(800ms)});
    auto p = send(client_opts(s), post(false));
    BOOST_TEST((p.r.reason() == stop_reason::permanent));
    BOOST_TEST(p.r.attempts() == 1u);
}

BOOST_AUTO_TEST_CASE(garbage_and_truncated_answers) {
    fault_server s;
    s.script({step::send_garbage(), step::send_truncated()});
    auto r = send(client_opts(s), get());
    BOOST_TEST(r.r.ok());
    BOOST_TEST(r.r.attempts() == 3u);
    BOOST_TEST((r.seen.at(0).kind == verdict::retryable));
    BOOST_TEST((r.seen.at(1).ec == boost::beast::http::error::partial_message));

    s.script({step::send_garbage()});
    auto p = send(client_opts(s), post(false));
    BOOST_TEST((p.r.reason() == stop_reason::permanent));
}

BOOST_AUTO_TEST_CASE(idle_keep_alive_closed_by_the_server_reconnects_transparently) {
    http::server::options so;
    so.idle_timeout = 50ms;
    fault_server s(so);
    asio::io_context ioc;
    http::client c(ioc.get_executor(), client_opts(s));
    BOOST_TEST(send(ioc, c, get(), 1).r.ok());
    std::this_thread::sleep_for(200ms);  // the server closes the idle connection
    for (bool key : {false, true}) {
        auto r = send(ioc, c, key ? post(true) : get(), 1);
        BOOST_TEST(r.r.ok());  // one engine attempt: the reconnect is inside the client
        std::this_thread::sleep_for(200ms);
    }
    BOOST_TEST(c.connections_opened() == 3u);
    BOOST_TEST(s.connections() == 3u);
}

BOOST_AUTO_TEST_CASE(connection_refused_is_retryable_and_not_sent) {
    asio::io_context ioc;
    asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    http::client::options o;
    o.port = std::to_string(a.local_endpoint().port());
    a.close();
    auto r = send(o, post(false), 3);
    BOOST_TEST((r.r.reason() == stop_reason::attempts_exhausted));
    BOOST_TEST((r.r.last_error() == asio::error::connection_refused));
    BOOST_TEST(!r.r.value().error().request_sent);
    BOOST_TEST((r.r.value().error().phase == http::phase::connect));
}

BOOST_AUTO_TEST_CASE(thousand_requests_with_503_retries_use_one_connection) {
    fault_server s;
    std::deque<step> script;
    for (int i = 0; i < 1000; ++i) {
        if (i % 10 == 0) script.push_back(step::answer(503, "0"));
        script.push_back(step{});
    }
    s.script(std::move(script));
    asio::io_context ioc;
    http::client c(ioc.get_executor(), client_opts(s));
    std::uint32_t attempts = 0;
    int ok = 0;
    for (int i = 0; i < 1000; ++i) {
        auto r = send(ioc, c, post(true), 5);
        ok += r.r.ok();
        attempts += r.r.attempts();
    }
    BOOST_TEST(ok == 1000);
    BOOST_TEST(attempts == 1100u);
    BOOST_TEST(s.requests() == 1100u);
    BOOST_TEST(s.connections() == 1u);  // counted at the server
}

// The bytes requests put on the wire, read by a bare socket: the request
// line, the caller's fields in their order, Host and User-Agent, the body's
// length (none for a GET without a body), a blank line, the body; four
// requests on one connection, back to back, the third with a body of 300 KB
// (more than one write's worth), the fourth with fields the client drops or
// collapses.
BOOST_AUTO_TEST_CASE(the_requests_on_the_wire) {
    asio::io_context server_ctx;
    asio::ip::tcp::acceptor acceptor(server_ctx, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = std::to_string(acceptor.local_endpoint().port());
    std::string received;
    std::thread server([&] {
        asio::ip::tcp::socket sock(server_ctx);
        boost::system::error_code ec;
        acceptor.accept(sock, ec);
        char buf[65536];
        // Answers each request once its header and its body (by its length)
        // are in; ends when the client closes.
        for (std::size_t start = 0; !ec;) {
            const std::size_t n = sock.read_some(asio::buffer(buf), ec);
            received.append(buf, n);
            for (;;) {
                const auto end = received.find("\r\n\r\n", start);
                if (end == std::string::npos) break;
                std::size_t length = 0;
                if (const auto at = received.find("Content-Length: ", start); at != std::string::npos && at < end)
                    length = std::stoul(received.substr(at + 16));
                if (received.size() < end + 4 + length) break;
                start = end + 4 + length;
                boost::system::error_code wec;
                asio::write(sock, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")), wec);
            }
        }
    });
    http::client::options o;
    o.port = port;
    o.user_agent = "probe/1";
    asio::io_context ioc;
    http::client c(ioc.get_executor(), o);
    http::request p{"POST", "/x?y=1", {{"Content-Type", "application/json"}}, R"({"a":"b"})"};
    p.set("Idempotency-Key", "m-1");
    std::string big(300 * 1024, 'x');
    for (std::size_t i = 0; i < big.size(); i += 1000) big[i] = static_cast<char>('a' + i / 1000 % 26);
    const bool first = send(ioc, c, p, 1).r.ok();
    const bool second = send(ioc, c, get(), 1).r.ok();
    const bool third = send(ioc, c, http::request{"PUT", "/x", {}, big}, 1).r.ok();
    // Of two fields with one name the later stands (as Beast's set() kept
    // it); the caller's Content-Length and "Connection: close" go (the
    // body's length does, the connection is kept); an empty POST says 0.
    const bool fourth =
        send(ioc, c,
             http::request{
                 "POST", "/x", {{"X-A", "1"}, {"Connection", "close"}, {"Content-Length", "7"}, {"x-a", "2"}}, {}},
             1)
            .r.ok();
    const auto opened = c.connections_opened();
    c.close();  // the server's read ends
    if (opened == 0) {
        asio::ip::tcp::socket nudge(ioc);  // the server's accept ends too (the test fails, not hangs)
        boost::system::error_code ignored;
        nudge.connect({asio::ip::make_address("127.0.0.1"), acceptor.local_endpoint().port()}, ignored);
    }
    server.join();
    BOOST_TEST(first);
    BOOST_TEST(second);
    BOOST_TEST(third);
    BOOST_TEST(fourth);
    BOOST_TEST(opened == 1u);
    const std::string expected =
        "POST /x?y=1 HTTP/1.1\r\nContent-Type: application/json\r\nIdempotency-Key: m-1\r\nHost: 127.0.0.1:" + port +
        "\r\nUser-Agent: probe/1\r\nContent-Length: 9\r\n\r\n{\"a\":\"b\"}" +
        "GET /x HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\nUser-Agent: probe/1\r\n\r\n" +
        "PUT /x HTTP/1.1\r\nHost: 127.0.0.1:" + port +
        "\r\nUser-Agent: probe/1\r\nContent-Length: " + std::to_string(big.size()) + "\r\n\r\n" + big +
        "POST /x HTTP/1.1\r\nx-a: 2\r\nHost: 127.0.0.1:" + port +
        "\r\nUser-Agent: probe/1\r\nContent-Length: 0\r\n\r\n";
    BOOST_TEST(received.size() == expected.size());
    BOOST_TEST((received == expected));  // (not printed: 300 KB)
}

// A method, target or header that would break the request's framing (a line
// break or NUL in it, an empty method or target) is refused before anything
// is sent or connected: invalid_argument, naming the problem.
BOOST_AUTO_TEST_CASE(a_request_that_would_break_its_framing_is_never_sent) {
    fault_server s;
    std::vector<http::request> bad;
    bad.push_back(http::request{"POST", "/x", {{"X-A", "1\r\nX-Injected: 2"}}, "{}"});
    bad.push_back(http::request{"POST", "/x", {{"X-A\n", "1"}}, "{}"});
    bad.push_back(http::request{"POST", "/x", {{"X:A", "1"}}, "{}"});
    bad.push_back(http::request{"GET", "/x HTTP/1.0\r\nX: y", {}, {}});
    bad.push_back(http::request{"", "/x", {}, {}});
    bad.push_back(http::request{"GET", "", {}, {}});
    bad.push_back(http::request{"GET", "/x", {{"X-A", std::string("a\0b", 3)}}, {}});
    bad.push_back(http::request{"TRACE", "/x", {}, "a body"});
    for (const auto& req : bad) {
        asio::io_context ioc;
        http::client c(ioc.get_executor(), client_opts(s));
        std::optional<http::outcome> got;
        asio::co_spawn(ioc, c.send(req), [&](std::exception_ptr, http::outcome o) { got = std::move(o); });
        ioc.run();
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST_REQUIRE(!got->has_response());
        BOOST_TEST((got->error().ec == asio::error::invalid_argument));
        BOOST_TEST(!got->error().request_sent);
        BOOST_TEST(got->error().detail.find("would not be one HTTP request") != std::string::npos);
        BOOST_TEST(c.connections_opened() == 0u);
    }
    BOOST_TEST(s.requests() == 0u);
}

// client::cancel() ends the send in flight however far it got: waiting for
// an answer that comes after 3 s (operation_aborted in the read phase, the
// request sent, not the late answer), or just started (the cancel posted
// behind the send's first step: nothing sent); the client works after it.
// A pool's cancel() ends its send in flight and the one waiting for its
// only client.
BOOST_AUTO_TEST_CASE(cancel_ends_the_send_in_flight_wherever_it_is) {
    fault_server s;
    asio::io_context ioc;
    http::client c(ioc.get_executor(), client_opts(s) /* read timeout 300 ms: */);
    http::client::options slow = client_opts(s);
    slow.read_timeout = 1h;
    http::client patient(ioc.get_executor(), slow);
    const http::request req = get();  // (send() keeps a reference: alive until it ends)
    auto run_one = [&](http::client& cl, bool cancel_at_once) {
        std::optional<http::outcome> got;
        asio::co_spawn(ioc, cl.send(req), [&](std::exception_ptr, http::outcome o) { got = std::move(o); });
        asio::steady_timer t(ioc, 200ms);
        if (cancel_at_once)
            asio::post(ioc, [&] { cl.cancel(); });
        else
            t.async_wait([&](boost::system::error_code) { cl.cancel(); });
        ioc.restart();
        ioc.run();
        return got;
    };
    s.script({step::answer_late(3000ms)});
    auto late = run_one(patient, false);
    BOOST_TEST_REQUIRE(late.has_value());
    BOOST_TEST_REQUIRE(!late->has_response());  // not the answer 3 s later
    BOOST_TEST((late->error().ec == asio::error::operation_aborted));
    BOOST_TEST((late->error().phase == http::phase::read));
    BOOST_TEST(late->error().request_sent);

    auto early = run_one(c, true);
    BOOST_TEST_REQUIRE(early.has_value());
    BOOST_TEST_REQUIRE(!early->has_response());
    BOOST_TEST((early->error().ec == asio::error::operation_aborted));
    BOOST_TEST(!early->error().request_sent);

    c.cancel();  // nothing in flight: nothing happens
    auto fine = send(ioc, c, get(), 1);
    BOOST_TEST(fine.r.ok());
    BOOST_TEST(fine.r.value().res().body == "ok");

    // A pool of one client: one send in flight, one waiting for the client.
    http::client_pool pool(ioc.get_executor(), slow, 1);
    s.script({step::answer_late(3000ms), step::answer_late(3000ms)});
    std::vector<http::outcome> pooled;
    for (int i = 0; i < 2; ++i)
        asio::co_spawn(ioc, pool.send(req),
                       [&](std::exception_ptr, http::outcome o) { pooled.push_back(std::move(o)); });
    asio::steady_timer t(ioc, 200ms);
    t.async_wait([&](boost::system::error_code) {
        BOOST_TEST(pool.waiting() == 1u);
        pool.cancel();
    });
    ioc.restart();
    ioc.run();
    BOOST_TEST_REQUIRE(pooled.size() == 2u);
    for (const auto& o : pooled) {
        BOOST_TEST_REQUIRE(!o.has_response());
        BOOST_TEST((o.error().ec == asio::error::operation_aborted));
    }
    // The one in flight had sent its request; the one that waited had not.
    BOOST_TEST(pooled[0].error().request_sent + pooled[1].error().request_sent == 1);
    BOOST_TEST(pool.waiting() == 0u);
    std::optional<http::outcome> after;
    asio::co_spawn(ioc, pool.send(req), [&](std::exception_ptr, http::outcome o) { after = std::move(o); });
    ioc.restart();
    ioc.run();
    BOOST_TEST_REQUIRE(after.has_value());
    BOOST_TEST(after->has_response());

    // A cancel() after a sender was handed the client it waited for, before
    // it resumed (found by a review): it does not send either.
    s.script({});
    const auto before = s.requests();
    std::optional<http::outcome> first, second;
    asio::co_spawn(ioc, pool.send(req), [&](std::exception_ptr, http::outcome o) {
        first = std::move(o);
        pool.cancel();  // the client was just given back, to the waiting send
    });
    asio::co_spawn(ioc, pool.send(req), [&](std::exception_ptr, http::outcome o) { second = std::move(o); });
    ioc.restart();
    ioc.run();
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST(first->has_response());
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST_REQUIRE(!second->has_response());
    BOOST_TEST((second->error().ec == asio::error::operation_aborted));
    BOOST_TEST(s.requests() == before + 1);
}

BOOST_AUTO_TEST_SUITE_END()
