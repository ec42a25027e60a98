// The HTTP server against raw sockets: limits, timeouts, malformed requests,
// handler failures and graceful shutdown.
#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <steadfast_test/threaded_server.hpp>
#include <thread>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
// A server with a few routes on its own thread.
struct test_server : steadfast_test::threaded_server {
    explicit test_server(http::server::options o = {}) : threaded_server(routes(), std::move(o)) {}
    static http::router routes() {
        http::router r;
        r.add("GET", "/hello", [](http::request&) -> asio::awaitable<http::response> {
            co_return http::response::json(200, "{\"hello\":true}");
        });
        r.add("POST", "/hello",
              [](http::request& q) -> asio::awaitable<http::response> { co_return http::response::json(200, q.body); });
        r.add("GET", "/slow", [](http::request&) -> asio::awaitable<http::response> {
            asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
            co_await t.async_wait(asio::use_awaitable);
            co_return http::response::json(200, "{\"slow\":true}");
        });
        r.add("GET", "/throws", [](http::request&) -> asio::awaitable<http::response> {
            throw std::runtime_error("handler bug");
            co_return http::response{};
        });
        return r;
    }
};

// Writes `bytes` (after `pause`, the rest), then reads until the server closes.
std::string raw_exchange(std::uint16_t port, const std::string& bytes, std::chrono::milliseconds pause = 0ms,
                         const std::string& more = {}) {
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    asio::write(s, asio::buffer(bytes));
    if (pause.count()) std::this_thread::sleep_for(pause);
    if (!more.empty()) {
        boost::system::error_code ec;
        asio::write(s, asio::buffer(more), ec);
    }
    std::string out;
    boost::system::error_code ec;
    asio::read(s, asio::dynamic_buffer(out), ec);  // until EOF or reset
    return out;
}

bool starts_with(const std::string& s, const std::string& p) {
    return s.rfind(p, 0) == 0;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(transport_server)

BOOST_AUTO_TEST_CASE(keep_alive_and_routing) {
    test_server t;
    const std::string two =
        "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    auto out = raw_exchange(t.port, two);
    BOOST_TEST(out.find("{\"hello\":true}") != std::string::npos);
    BOOST_TEST(out.find("HTTP/1.1 200", 10) != std::string::npos);  // the second answer on the same connection
    BOOST_TEST(starts_with(raw_exchange(t.port, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                           "HTTP/1.1 404"));
    auto m = raw_exchange(t.port, "DELETE /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    BOOST_TEST(starts_with(m, "HTTP/1.1 405"));
    BOOST_TEST(m.find("Allow: GET, POST") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(limits_and_malformed_requests) {
    http::server::options o;
    o.max_body_bytes = 1024;
    o.max_header_bytes = 512;
    test_server t(o);
    // The body limit is enforced from Content-Length, before the body is read.
    auto big = raw_exchange(t.port, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
    BOOST_TEST(starts_with(big, "HTTP/1.1 413"));
    BOOST_TEST(big.find("over 1024 bytes") != std::string::npos);
    auto hdr = raw_exchange(t.port, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1000, 'a') + "\r\n\r\n");
    BOOST_TEST(starts_with(hdr, "HTTP/1.1 431"));
    auto bad = raw_exchange(t.port, "THIS IS NOT HTTP\r\n\r\n");
    BOOST_TEST(starts_with(bad, "HTTP/1.1 400"));
    BOOST_TEST(bad.find("malformed HTTP request") != std::string::npos);
    auto boom = raw_exchange(t.port, "GET /throws HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    BOOST_TEST(starts_with(boom, "HTTP/1.1 500"));
    // The server keeps serving after all of that.
    BOOST_TEST(starts_with(raw_exchange(t.port, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                           "HTTP/1.1 200"));
}

// Answered 413 from its header while the client still sends the body: the
// server shuts its side and reads the rest away (a lingering close), so the
// client's writes all go through and it reads the whole answer, then a clean
// end. Closed at once instead, the unread bytes make the kernel send a reset,
// and the client's next write fails (reset or broken pipe) before it reads.
BOOST_AUTO_TEST_CASE(an_early_answer_reaches_a_client_still_sending) {
    http::server::options o;
    o.max_body_bytes = 1024;
    test_server t(o);
    const std::size_t body = 16 << 20;  // far more than loopback buffers hold
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), t.port});
    asio::write(
        s, asio::buffer("POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body) + "\r\n\r\n"));
    const std::string chunk(64 * 1024, 'x');
    boost::system::error_code wec;
    for (std::size_t sent = 0; sent < body && !wec; sent += chunk.size()) asio::write(s, asio::buffer(chunk), wec);
    BOOST_TEST(!wec, wec.message());
    boost::system::error_code sec;
    s.shutdown(tcp::socket::shutdown_send, sec);
    std::string out;
    boost::system::error_code rec;
    asio::read(s, asio::dynamic_buffer(out), rec);
    BOOST_TEST(starts_with(out, "HTTP/1.1 413"));
    BOOST_TEST(out.find("over 1024 bytes") != std::string::npos);
    BOOST_TEST((rec == asio::error::eof), rec.message());
}

// The number of connections the server has open, read on its own thread.
std::uint64_t active_connections(test_server& t) {
    std::promise<std::uint64_t> p;
    asio::post(t.ioc, [&] { p.set_value(t.srv->get_stats().active_connections); });
    return p.get_future().get();
}

// While it lingers, the connection's side is shut at once (the client reads
// the answer and then its end, not a wait of linger_timeout), and the
// connection still counts until it ends. (The longest linger_timeout there
// is: a deadline computed from it must not overflow into the past.)
BOOST_AUTO_TEST_CASE(a_lingering_connection_shuts_its_side_at_once) {
    http::server::options o;
    o.max_body_bytes = 1024;
    o.linger_timeout = std::chrono::nanoseconds::max();
    test_server t(o);
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), t.port});
    asio::write(s, asio::buffer(std::string("POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")));
    auto answer = std::async(std::launch::async, [&s] {
        std::string out;
        boost::system::error_code ec;
        asio::read(s, asio::dynamic_buffer(out), ec);
        return std::pair{out, ec};
    });
    if (answer.wait_for(10s) != std::future_status::ready) {
        BOOST_ERROR("no end of the answer within 10 s: the server's side is not shut while it lingers");
        boost::system::error_code ignored;
        s.shutdown(tcp::socket::shutdown_both, ignored);  // ends the read
        answer.wait();
        return;
    }
    auto [out, ec] = answer.get();
    BOOST_TEST(starts_with(out, "HTTP/1.1 413"));
    BOOST_TEST((ec == asio::error::eof), ec.message());
    BOOST_TEST(active_connections(t) == 1u);  // lingering (the server's shutdown closes it at once)
}

// A client that neither sends nor closes after such an answer holds its
// connection for linger_timeout, no longer.
BOOST_AUTO_TEST_CASE(a_lingering_connection_ends_after_linger_timeout) {
    http::server::options o;
    o.max_body_bytes = 1024;
    o.linger_timeout = 200ms;
    test_server t(o);
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), t.port});
    asio::write(s, asio::buffer(std::string("POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")));
    std::string out;
    boost::system::error_code rec;
    asio::read(s, asio::dynamic_buffer(out), rec);  // the answer, then the server's side shut
    BOOST_TEST(starts_with(out, "HTTP/1.1 413"));
    // Our socket stays open and silent; the server's connection ends on its own.
    std::uint64_t n = active_connections(t);
    for (int i = 0; i < 100 && n != 0; ++i) {
        std::this_thread::sleep_for(50ms);
        n = active_connections(t);
    }
    BOOST_TEST(n == 0u);
}

// A client that sends without a pause after such an answer is cut off too:
// at linger_timeout, or at linger_max_bytes. Its writes then fail (a reset).
BOOST_AUTO_TEST_CASE(a_client_sending_without_pause_is_cut_off) {
    for (const bool by_time : {true, false}) {
        BOOST_TEST_CONTEXT("cut off by " << (by_time ? "linger_timeout" : "linger_max_bytes")) {
            http::server::options o;
            o.max_body_bytes = 1024;
            o.linger_timeout = by_time ? std::chrono::nanoseconds(300ms) : std::chrono::nanoseconds(60s);
            o.linger_max_bytes = by_time ? UINT64_MAX : 1 << 20;
            test_server t(o);
            asio::io_context ioc;
            tcp::socket s(ioc);
            s.connect({asio::ip::make_address("127.0.0.1"), t.port});
            asio::write(s, asio::buffer(
                               std::string("POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n")));
            const std::string chunk(64 * 1024, 'x');
            boost::system::error_code wec;
            std::uint64_t sent = 0;
            const auto give_up = std::chrono::steady_clock::now() + 30s;
            while (!wec && std::chrono::steady_clock::now() < give_up) sent += asio::write(s, asio::buffer(chunk), wec);
            BOOST_TEST(wec.failed(), "still sending after 30 s (" << sent << " bytes)");
            // (Bounded by bytes: what the server read, plus what the two
            // sockets' buffers held when it closed.)
            if (!by_time) BOOST_TEST(sent < std::uint64_t(64) << 20);
        }
    }
}

// A lingering connection holds no place anyone wants: at the connection
// limit, a request takes a lingering connection's place, regular or in the
// reserve, however long it could still linger.
BOOST_AUTO_TEST_CASE(a_lingering_connection_gives_up_its_place) {
    http::server::options o;
    o.max_body_bytes = 1024;
    o.max_connections = 1;
    o.reserved_connections = 1;
    o.linger_timeout = 60s;
    asio::io_context ioc;
    const std::string over = "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n";
    auto refused = [&](tcp::socket& s, std::uint16_t port, const std::string& request) {
        s.connect({asio::ip::make_address("127.0.0.1"), port});
        asio::write(s, asio::buffer(request));
        std::string out;
        boost::system::error_code ec;
        asio::read(s, asio::dynamic_buffer(out), ec);  // the answer, then the server's side shut; ours stays open
        return out;
    };
    {
        // The regular place lingering: a request beyond the cap takes it.
        test_server t(o);
        tcp::socket lingering(ioc);
        BOOST_TEST(starts_with(refused(lingering, t.port, over), "HTTP/1.1 413"));
        BOOST_TEST(starts_with(raw_exchange(t.port, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                               "HTTP/1.1 200"));
    }
    {
        // The regular place busy (a header arriving), the reserve's lingering
        // after a request with a body was refused there (503, its body
        // unread): a health check takes it.
        test_server t(o);
        tcp::socket busy(ioc), lingering(ioc);
        busy.connect({asio::ip::make_address("127.0.0.1"), t.port});
        asio::write(busy, asio::buffer(std::string("GET /hello HTTP/1.1\r\n")));
        const auto r = refused(lingering, t.port, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n");
        BOOST_TEST(starts_with(r, "HTTP/1.1 503"), r);
        // (No /health route here: a 404 shows it was answered, not turned away.)
        BOOST_TEST(starts_with(raw_exchange(t.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                               "HTTP/1.1 404"));
    }
    {
        // No reserve: a new connection takes the lingering one's place when it is accepted.
        auto none = o;
        none.reserved_connections = 0;
        test_server t(none);
        tcp::socket lingering(ioc);
        BOOST_TEST(starts_with(refused(lingering, t.port, over), "HTTP/1.1 413"));
        BOOST_TEST(starts_with(raw_exchange(t.port, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                               "HTTP/1.1 200"));
    }
}

BOOST_AUTO_TEST_CASE(slow_clients_time_out) {
    http::server::options o;
    o.read_timeout = 150ms;
    o.idle_timeout = 150ms;
    test_server t(o);
    // Half a request, then silence: the connection is closed, without an
    // answer, once the read timeout runs out.
    const auto s0 = std::chrono::steady_clock::now();
    auto slow = raw_exchange(t.port, "GET /hello HTTP/1.1\r\nHo");
    BOOST_TEST(slow.empty());
    BOOST_TEST((std::chrono::steady_clock::now() - s0 >= 140ms));
    // Trickling bytes does not extend the deadline (slowloris).
    const auto s1 = std::chrono::steady_clock::now();
    auto trickle = raw_exchange(t.port, "GET /hello HTTP/1.1\r\n", 100ms, "X-A: 1\r\n");
    BOOST_TEST(trickle.empty());
    BOOST_TEST((std::chrono::steady_clock::now() - s1 < 2s));
    // An idle keep-alive connection is closed without an answer.
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), t.port});
    const auto t0 = std::chrono::steady_clock::now();
    char c;
    boost::system::error_code ec;
    s.read_some(asio::buffer(&c, 1), ec);
    BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset));
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
}

BOOST_AUTO_TEST_CASE(graceful_shutdown_finishes_requests_in_flight) {
    test_server t;
    auto in_flight = std::async(std::launch::async, [&] {
        return raw_exchange(t.port, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");  // keep-alive: the server must close it
    });
    std::this_thread::sleep_for(100ms);
    t.shutdown_and_join();
    const auto answer = in_flight.get();
    BOOST_TEST(starts_with(answer, "HTTP/1.1 200"));
    BOOST_TEST(answer.find("Connection: close") != std::string::npos);
    asio::io_context ioc;
    tcp::socket s(ioc);
    boost::system::error_code ec;
    s.connect({asio::ip::make_address("127.0.0.1"), t.port}, ec);
    BOOST_TEST((ec == asio::error::connection_refused));
}

BOOST_AUTO_TEST_CASE(listen_errors_are_clear) {
    asio::io_context ioc;
    http::server a(ioc.get_executor(), http::router{});
    const auto port = a.listen("127.0.0.1", 0).port();
    http::server b(ioc.get_executor(), http::router{});
    try {
        b.listen("127.0.0.1", port);
        BOOST_FAIL("a second listen on the same port must fail");
    } catch (const boost::system::system_error& e) {
        BOOST_TEST(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(port)) !=
                   std::string::npos);
    }
    BOOST_CHECK_THROW(b.listen("not-an-ip", 1), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
