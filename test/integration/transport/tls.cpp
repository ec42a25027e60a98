// The HTTP client and server over TLS on loopback, with the throwaway CA of
// test/tls/make-certs.sh (CTest makes it first; SF_TEST_CERTS names the
// folder): keep-alive reuse, the classification of handshake failures
// (certificates and names permanent; a reset or a stall during the handshake
// retryable, within the connect timeout) and mutual TLS.
#include <steadfast/engine.hpp>
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <steadfast_test/threaded_server.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
std::string cert(const char* name) {
    const char* dir = std::getenv("SF_TEST_CERTS");
    BOOST_REQUIRE_MESSAGE(dir && *dir, "SF_TEST_CERTS must name the folder made by test/tls/make-certs.sh");
    return std::string(dir) + "/" + name;
}

std::uint64_t digest(const std::string& s) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// An HTTPS server with GET /hello and POST /echo on its own thread.
struct tls_server : steadfast_test::threaded_server {
    explicit tls_server(std::string client_ca = {}) : threaded_server(routes(), options(std::move(client_ca))) {}
    static http::router routes() {
        http::router r;
        r.add("GET", "/hello", [](http::request&) -> asio::awaitable<http::response> {
            co_return http::response::json(200, "{\"hello\":true}");
        });
        // The body's length and a digest of its bytes.
        r.add("POST", "/echo", [](http::request& req) -> asio::awaitable<http::response> {
            co_return http::response::json(200, "{\"bytes\":" + std::to_string(req.body.size()) +
                                                    ",\"digest\":" + std::to_string(digest(req.body)) + "}");
        });
        return r;
    }
    static http::server::options options(std::string client_ca) {
        http::server::options o;
        o.tls = http::tls_server_options{cert("server.pem"), cert("server.key"), std::move(client_ca)};
        return o;
    }
};

// A TCP listener that never speaks TLS: it closes each connection at once
// (a reset during the handshake) or holds it silent (a stalled handshake).
struct mute_listener {
    asio::io_context ioc;
    tcp::acceptor acc{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
    std::list<tcp::socket> held;
    bool hold;
    std::thread th;
    explicit mute_listener(bool hold_open) : hold(hold_open) {
        accept();
        th = std::thread([this] { ioc.run(); });
    }
    void accept() {
        acc.async_accept([this](boost::system::error_code ec, tcp::socket s) {
            if (ec) return;
            if (hold)
                held.push_back(std::move(s));
            else
                s.close();
            accept();
        });
    }
    std::uint16_t port() const { return acc.local_endpoint().port(); }
    ~mute_listener() {
        asio::post(ioc, [this] {
            acc.close();
            held.clear();
        });
        th.join();
    }
};

http::client::options https(std::uint16_t port, http::tls_client_options t) {
    auto o = http::client::from_url("https://127.0.0.1:" + std::to_string(port));
    o.tls = std::move(t);
    o.connect_timeout = 300ms;
    o.read_timeout = 2s;
    return o;
}

struct sent {
    retry_result<http::outcome> r;
    std::vector<classification> seen;
    std::uint64_t connections = 0;
};

// `n` GETs one after the other through retry() on one client.
std::vector<sent> send(http::client::options o, int n = 1, std::uint32_t attempts = 3) {
    asio::io_context ioc;
    http::client c(ioc.get_executor(), std::move(o));
    std::vector<sent> out(static_cast<std::size_t>(n));
    const http::request req{"GET", "/hello", {}, {}};
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (auto& s : out) {
                auto policy = retry_policy{}
                                  .with_backoff(backoff::fixed(1ms))
                                  .with_stop(stop::max_attempts(attempts))
                                  .with_hooks({.after_attempt = [&s](const attempt_context&, const classification& cl,
                                                                     const decision&) { s.seen.push_back(cl); }});
                auto attempt =
                    classified([&](const attempt_context&) { return c.send(req); }, http::make_classifier(req));
                s.r = co_await steadfast::retry(policy, attempt);
                s.connections = c.connections_opened();
            }
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    ioc.run();
    return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(transport_tls)

BOOST_AUTO_TEST_CASE(requests_reuse_one_verified_connection) {
    tls_server s;
    auto out = send(https(s.port, {cert("ca.pem"), {}, {}, {}}), 5);
    for (auto& x : out) {
        BOOST_REQUIRE(x.r.has_value());
        BOOST_REQUIRE(x.r.value().has_response());
        BOOST_TEST(x.r.value().res().status == 200u);
        BOOST_TEST(x.r.value().res().body == "{\"hello\":true}");
    }
    BOOST_TEST(out.back().connections == 1u);  // keep-alive over TLS
    // The name may also be given apart from the address.
    auto named = send(https(s.port, {cert("ca.pem"), {}, {}, "localhost"}));
    BOOST_TEST(named[0].r.ok());
}

BOOST_AUTO_TEST_CASE(a_certificate_that_does_not_verify_is_permanent) {
    tls_server s;
    for (auto t : {http::tls_client_options{cert("other-ca.pem"), {}, {}, {}},            // another CA
                   http::tls_client_options{cert("ca.pem"), {}, {}, "wrong.example"}}) {  // another name
        auto out = send(https(s.port, t));
        const auto& r = out[0].r;
        BOOST_TEST(!r.ok());
        BOOST_TEST(r.attempts() == 1u);  // not retried: the configuration is wrong
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST((r.value().error().phase == http::phase::handshake));
        BOOST_TEST(http::is_tls_error(r.value().error().ec), r.value().error().ec.message());
        BOOST_TEST((out[0].seen.at(0).kind == verdict::permanent));
    }
}

BOOST_AUTO_TEST_CASE(a_reset_or_a_stall_during_the_handshake_is_retried) {
    mute_listener closes(false);
    auto reset = send(https(closes.port(), {cert("ca.pem"), {}, {}, {}}), 1, 3);
    BOOST_TEST(reset[0].r.attempts() == 3u);
    for (auto& cl : reset[0].seen) BOOST_TEST((cl.kind == verdict::retryable), cl.ec.message());
    BOOST_TEST((reset[0].r.value().error().phase == http::phase::handshake));

    // A stalled handshake ends by the connect timeout (300 ms): the read
    // timeout is an hour, so using it instead would hang (CTest's timeout).
    mute_listener stalls(true);
    auto o = https(stalls.port(), {cert("ca.pem"), {}, {}, {}});
    o.read_timeout = 1h;
    o.write_timeout = 1h;
    auto stall = send(o, 1, 2);
    BOOST_TEST(stall[0].r.attempts() == 2u);
    for (auto& cl : stall[0].seen) {
        BOOST_TEST((cl.kind == verdict::retryable), cl.ec.message());
        BOOST_TEST((cl.ec == boost::beast::error::timeout), cl.ec.message());
    }
}

BOOST_AUTO_TEST_CASE(mutual_tls_refuses_a_client_without_a_certificate_of_its_ca) {
    tls_server s(cert("ca.pem"));
    auto none = send(https(s.port, {cert("ca.pem"), {}, {}, {}}));
    BOOST_TEST(!none[0].r.ok());
    BOOST_TEST(none[0].r.attempts() == 1u);
    BOOST_TEST(http::is_tls_error(none[0].r.value().error().ec), none[0].r.value().error().ec.message());
    auto other = send(https(s.port, {cert("ca.pem"), cert("other-client.pem"), cert("other-client.key"), {}}));
    BOOST_TEST(!other[0].r.ok());
    auto good = send(https(s.port, {cert("ca.pem"), cert("client.pem"), cert("client.key"), {}}), 3);
    for (auto& x : good) BOOST_TEST(x.r.ok());
    BOOST_TEST(good.back().connections == 1u);
    BOOST_TEST(s.srv->get_stats().tls_handshake_failures >= 2u);
}

BOOST_AUTO_TEST_CASE(files_that_cannot_be_used_are_named) {
    try {
        http::check_tls(http::tls_server_options{cert("server.pem"), cert("missing.key"), {}});
        BOOST_FAIL("a missing key was accepted");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("missing.key") != std::string::npos, e.what());
    }
    try {
        http::check_tls(http::tls_client_options{cert("server.key"), {}, {}, {}});  // a key is not a CA
        BOOST_FAIL("a key was accepted as a CA file");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("server.key") != std::string::npos, e.what());
    }
    BOOST_CHECK_THROW(http::check_tls(http::tls_client_options{cert("ca.pem"), cert("client.pem"), {}, {}}),
                      std::invalid_argument);  // a certificate without its key
    // https:// defaults to port 443 and TLS with the system's trust store.
    auto o = http::client::from_url("https://example.org");
    BOOST_TEST(o.port == "443");
    BOOST_TEST(o.tls.has_value());
    BOOST_TEST(!http::client::from_url("http://example.org").tls.has_value());
}

// Request bodies around and above a TLS record (16 KiB) arrive whole, one
// request after another on one connection.
BOOST_AUTO_TEST_CASE(bodies_around_and_above_a_record_arrive_whole) {
    tls_server s;
    asio::io_context ioc;
    auto o = https(s.port, {cert("ca.pem"), {}, {}, {}});
    o.write_timeout = o.read_timeout = 5s;
    http::client c(ioc.get_executor(), o);
    const std::vector<std::size_t> sizes{0, 1, 16000, 16383, 16384, 16385, 70000, 300000};
    std::vector<std::string> answers;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (const std::size_t n : sizes) {
                std::string body(n, 'x');
                for (std::size_t i = 0; i < n; i += 7) body[i] = static_cast<char>('a' + i % 26);
                const http::request req{"POST", "/echo", {{"Content-Type", "application/octet-stream"}}, body};
                auto out = co_await c.send(req);
                answers.push_back(out.has_response() ? std::to_string(out.res().status) + " " + out.res().body
                                                     : "error " + out.error().ec.message());
            }
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    ioc.run();
    BOOST_TEST_REQUIRE(answers.size() == sizes.size());
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        std::string body(sizes[k], 'x');
        for (std::size_t i = 0; i < sizes[k]; i += 7) body[i] = static_cast<char>('a' + i % 26);
        BOOST_TEST(answers[k] ==
                   "200 {\"bytes\":" + std::to_string(sizes[k]) + ",\"digest\":" + std::to_string(digest(body)) + "}");
    }
    BOOST_TEST(c.connections_opened() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
