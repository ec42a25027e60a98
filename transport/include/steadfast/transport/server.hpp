// http::server: a coroutine HTTP/1.1 server on Boost.Beast for the apps.
//
// One coroutine per connection, keep-alive, limits on header and body size,
// an idle timeout between requests and a read timeout once a request started
// (against slow clients), JSON error answers, routing by method and path
// (404 for an unknown path, 405 with Allow for a known path and another
// method), and a graceful shutdown that stops accepting, closes idle
// connections and lets requests in flight finish. Plain HTTP or HTTPS.
#pragma once

#include <steadfast/transport/http.hpp>
#include <steadfast/transport/tls.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::http {

class router {
public:
    using handler = std::function<boost::asio::awaitable<response>(request&)>;

    /// Routes `method` on the exact `path` (the query string is ignored for matching).
    router& add(std::string method, std::string path, handler h);

    /// The handler for a request, or the error answer (404, or 405 with Allow).
    /// Plain code: the fuzz target and unit tests call it without sockets.
    const handler* find(std::string_view method, std::string_view target, response& error_out) const;

private:
    struct route {
        std::string method, path;
        handler h;
    };
    std::vector<route> routes_;
};

/// The path part of a target ("/publish?stream=a" -> "/publish").
std::string_view path_of(std::string_view target) noexcept;
/// A query parameter's value, percent-decoded (Boost.URL), if present. A
/// target that is not valid origin-form gives the raw value, for the
/// caller's own check to refuse.
std::optional<std::string> query_param(std::string_view target, std::string_view name);
/// How many times a query parameter is given (a second value is ambiguous:
/// callers refuse it rather than pick one).
std::size_t query_param_count(std::string_view target, std::string_view name);
/// The query parameters not in `known` (names compared exactly: "STREAM" is
/// not "stream"), comma-separated in order, each once; "" when none. A name left
/// empty with a value ("?=x") counts as unknown, shown as ""; a stray "&" not.
std::string unknown_query_params(std::string_view target, std::initializer_list<std::string_view> known);
/// Whether the Content-Type is application/json (parameters allowed).
bool is_json(const request& r);

/// An HTTP/1.1 server. All of its work (accepting, every connection,
/// shutdown) runs on the executor it is made with: an io_context run by one
/// thread, or a strand when the io_context has several.
class server {
public:
    struct options {
        std::size_t max_header_bytes = 8 * 1024;
        std::size_t max_body_bytes = 1 << 20;                              // over it: 413
        std::chrono::nanoseconds idle_timeout = std::chrono::seconds(30);  // waiting for a request
        // A new connection (or one in the reserve) must deliver its first
        // request's header within this: one that sends nothing, or dribbles,
        // does not hold a slot for idle_timeout. Then read_timeout applies.
        std::chrono::nanoseconds header_timeout = std::chrono::seconds(5);
        std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);  // once a request started
        std::chrono::nanoseconds write_timeout = std::chrono::seconds(10);
        std::chrono::nanoseconds shutdown_grace = std::chrono::seconds(10);
        // Answered before its body was read (413, 431, 400, a refusal at the
        // connection limit), a connection is not closed at once: closing a
        // socket with bytes unread sends a reset, which can reach the client
        // before it has read the answer (it then sees "connection reset", not
        // the status). Its sending side is shut, and what the client still
        // sends is read and dropped until it closes too, for at most this
        // long and at most linger_max_bytes (nginx's lingering close); then
        // it is closed (a client still sending then sees a reset). A
        // lingering connection is the first closed when its place is wanted
        // (and is not counted in connections_rejected: it was answered).
        // 0: closed at once.
        std::chrono::nanoseconds linger_timeout = std::chrono::seconds(2);
        std::uint64_t linger_max_bytes = 64 << 20;
        // Connections open at once; one more is closed as soon as it is
        // accepted (and counted), so that idle keep-alive connections cannot
        // use up descriptors and memory. 0: no limit.
        std::size_t max_connections = 256;
        // Beyond max_connections, this many more connections are accepted for
        // reserved_paths only (health checks and scraping while publishers
        // fill the cap): one request each, header within a second. Any other
        // request takes the place of the connection idle the longest between
        // requests (closed for it), or is answered 503 when none is idle.
        // When the reserve is full too, a new connection replaces the
        // reserve's oldest one that has sent nothing.
        std::size_t reserved_connections = 8;
        std::vector<std::string> reserved_paths{"/health", "/ready", "/metrics"};
        // Which requests beyond the cap may take an idle connection's place,
        // given the request's Authorization header ("" when it has none):
        // the daemons let only a request with a valid token push a client
        // out. Unset: any request.
        std::function<bool(std::string_view authorization)> may_take_place;
        // Called (on the server's executor) with a request's header, its body
        // not read yet, when the client asked to be told to go on (Expect:
        // 100-continue): an answer returned is sent instead of the 100, the
        // body is never read, and the connection closes. The daemons refuse
        // a missing or wrong token here, so that a client without one does
        // not upload its body first. Unset: every such request goes on.
        std::function<std::optional<response>(const request& header)> before_continue;
        // Called (on the server's executor) when accepting a connection fails
        // (out of descriptors, out of memory, ...): the server pauses 50 ms
        // and accepts again, and counts it in stats::accept_failures; the
        // caller decides how loudly to say so.
        std::function<void(const boost::system::error_code&)> accept_failed;
        // Set: every connection is TLS (HTTPS); the handshake must end within
        // read_timeout. The constructor throws std::invalid_argument for files
        // it cannot use.
        std::optional<tls_server_options> tls;
    };

    struct stats {
        std::uint64_t connections_accepted = 0;
        std::uint64_t requests = 0;
        std::uint64_t active_connections = 0;
        // Turned away by max_connections: refused at accept (the reserve
        // full), evicted from the reserve, refused at a reserve request's
        // header, or closed idle to give a request its place.
        std::uint64_t connections_rejected = 0;
        std::uint64_t reserved_connections = 0;    // accepted into the reserve
        std::uint64_t header_timeouts = 0;         // closed: no complete request header in time
        std::uint64_t tls_handshake_failures = 0;  // a wrong certificate, no client certificate, not TLS, ...
        std::uint64_t accept_failures = 0;         // accept() failed (out of descriptors, ...): retried 50 ms later
    };

    server(boost::asio::any_io_executor ex, router r, options o);
    server(boost::asio::any_io_executor ex, router r);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// Binds and listens. Throws boost::system::system_error naming the address on failure.
    boost::asio::ip::tcp::endpoint listen(const std::string& host, std::uint16_t port);
    /// Starts accepting (after listen).
    void start();
    /// Stops accepting, closes idle connections, waits for requests in flight
    /// (at most shutdown_grace, then closes what is left).
    boost::asio::awaitable<void> shutdown();

    stats get_stats() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

/// How the server reads requests, apart from I/O: feeds `bytes` to the same
/// parser with the same limits and returns the request, or the error answer the
/// server would send (400 malformed, 413 body too large, 431 header too large),
/// or nullopt for an incomplete request (the server would read on).
/// The fuzz target and unit tests call it.
struct parsed_request {
    std::optional<request> req;
    std::optional<response> error;
    bool keep_alive = false;
};
parsed_request parse_request(std::string_view bytes, const server::options& o);

/// Parses "127.0.0.1:8080" (or "[::1]:8080", "localhost:8080") into host and
/// port. Throws std::invalid_argument naming the problem.
std::pair<std::string, std::uint16_t> parse_listen_address(std::string_view s);

}  // namespace steadfast::http
