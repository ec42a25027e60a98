// http::client: an HTTP/1.1 client on Boost.Beast for C++20 coroutines.
//
// - Keep-alive: one connection, reused for every request (and so across
//   retries: a 503 does not cost a new TCP connection).
// - Transparent reconnect: when a reused connection turns out to have been
//   closed by the server while idle (the write fails, or it closes before any
//   byte of the answer), the request is sent once more on a fresh connection,
//   if it is safe to repeat (idempotent method or Idempotency-Key).
// - Separate connect, write and read timeouts; a bounded response size.
// - http:// and https:// (TLS 1.2+, the server's certificate and name
//   verified; optional client certificate, see tls.hpp). Keep-alive, the
//   reconnect rule and the timeouts hold over TLS too; the handshake is timed
//   by the connect timeout and fails with phase::handshake.
//
// One request at a time per client (like one connection): a send while another
// is in flight is refused at once with transport_error{in_progress}, never
// interleaved. For concurrent senders use client_pool (pool.hpp). Runs on the
// executor it was made with.
#pragma once

#include <steadfast/engine/error.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/tls.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace steadfast::http {

/// Where in the exchange a transport failure happened.
enum class phase { resolve, connect, handshake, write, read };
std::string_view to_string(phase p) noexcept;

/// A failure below HTTP: no complete, valid answer was received.
struct transport_error {
    error_code ec;
    enum phase phase = phase::connect;
    bool request_sent = false;  // at least part of the request reached the wire
    // A failed TLS handshake: why the peer's certificate was refused, in
    // OpenSSL's words ("certificate has expired", "hostname mismatch",
    // "unable to get local issuer certificate"); "" otherwise.
    std::string detail = {};

    /// The peer's host refused the connection: nothing listens at the
    /// address (a peer restarting, or not started).
    bool refused() const noexcept;
    /// The request was written whole and no answer came within the read
    /// timeout (the client's own timer: a slow or hung peer, or a connection
    /// the network dropped). Not the kernel's ETIMEDOUT, which means the
    /// request was never acknowledged, nor a reset or a truncated answer.
    bool answer_timed_out() const noexcept;
};

/// What one request produced: an answer (any status), or a transport failure.
struct outcome {
    std::variant<response, transport_error> v;

    bool has_response() const noexcept { return v.index() == 0; }
    const response& res() const { return std::get<0>(v); }
    response& res() { return std::get<0>(v); }
    const transport_error& error() const { return std::get<1>(v); }
};

class client {
public:
    struct options {
        std::string host = "127.0.0.1";
        std::string port = "80";
        std::chrono::nanoseconds connect_timeout = std::chrono::seconds(2);
        std::chrono::nanoseconds write_timeout = std::chrono::seconds(5);
        std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);
        std::size_t max_response_bytes = 1 << 20;
        std::string user_agent = "steadfast";
        /// Set (by from_url for https://): the connection is TLS.
        std::optional<tls_client_options> tls;
    };

    client(boost::asio::any_io_executor ex, options o);
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Parses "http://host[:port]" (port 80 by default) or
    /// "https://host[:port]" (443; TLS with the system's trust store unless
    /// options::tls is changed) into options. Throws std::invalid_argument
    /// naming the problem. The constructor throws std::invalid_argument for
    /// TLS files it cannot use.
    static options from_url(std::string_view url);

    /// Sends one request and reads its answer. Never throws for network
    /// failures: they come back as transport_error. Cancellation: terminal
    /// (the connection is closed). The header: the request line, then
    /// `req.headers` in their order, except that of two with one name
    /// (case-insensitive) the later stands, and a Content-Length,
    /// Transfer-Encoding or "Connection: close" of the caller's is dropped
    /// (the body's own length is sent; the connection is kept); then Host
    /// (host:port) and User-Agent unless `req` has them; then Content-Length
    /// when the body is not empty or the method is POST, PUT or OPTIONS. A
    /// request that could not be sent as one HTTP/1.1 request (a line break
    /// or NUL in the method, target or a field, a space in the method or
    /// target, a colon in a field name, an empty method, target or name, a
    /// TRACE with a body) completes with transport_error{invalid_argument}
    /// (phase write, nothing sent or connected, `detail` saying so).
    /// The body is written from `req` itself, without a copy: `req` must live
    /// until the send completes (a temporary in the co_await expression does).
    /// (Not by value: g++ 12 miscompiled a prvalue aggregate passed to a
    /// by-value coroutine parameter here; ASan caught the bad free.)
    boost::asio::awaitable<outcome> send(const request& req);

    /// Closes the connection (the next send opens a new one).
    void close();

    /// Ends the send in flight, if any, promptly: whatever it waits on (the
    /// resolver, the connection, the handshake, the write or the read) is
    /// cancelled, it completes with transport_error{operation_aborted} in
    /// the phase it was in, and the connection is closed. For a caller that
    /// cannot reach the send's own cancellation slot (something watching a
    /// shutdown, say). Call it on the client's executor; with no send in
    /// flight it does nothing, and a send after it works as usual.
    void cancel();

    const options& settings() const noexcept;
    /// TCP connections opened so far (for tests and metrics).
    std::uint64_t connections_opened() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace steadfast::http
