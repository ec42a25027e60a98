// http::client on Beast. One of the two translation units that include Beast.
#include "tls_context.hpp"
#include "utf8.hpp"

#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/health.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

namespace steadfast::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;

std::string_view to_string(phase p) noexcept {
    switch (p) {
        case phase::resolve:
            return "resolve";
        case phase::connect:
            return "connect";
        case phase::handshake:
            return "handshake";
        case phase::write:
            return "write";
        case phase::read:
            return "read";
    }
    return "unknown";
}

bool transport_error::refused() const noexcept {
    return phase == phase::connect && ec == asio::error::connection_refused;
}

bool transport_error::answer_timed_out() const noexcept {
    return phase == phase::read && request_sent && ec == beast::error::timeout;
}

namespace {
bool has_line_break(std::string_view s) noexcept {
    return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// The request's header, as it goes on the wire, as Beast's serializer wrote
// it for the message the client used to build (set() for each field, then
// keep_alive(true) and prepare_payload()): the request line, the caller's
// fields in their order (of two with one name, the later; a Content-Length
// or Transfer-Encoding of theirs dropped, the body's own length goes; a
// "Connection: close" dropped, the connection is kept), Host and User-Agent
// unless the caller set them, the body's length (for an empty body, only
// with OPTIONS, PUT or POST), a blank line. Written straight from `req`, in
// one string: no Beast message is built (its fields cost an allocation
// each). The request then goes out as one gather write of the header and the
// body from the caller's buffer (Beast's own async_write steps its
// serializer through views of views of its buffers at every write, which
// cost the primary's delivery about as much CPU as the send system call
// itself: perf, one message a request). Empty when the request could not be
// one HTTP request (a line break or NUL in the method, the target or a
// field, a space in the method or the target, an empty one, a TRACE with a
// body): never sent.
std::string header_text(const request& req, const client::options& o) {
    const std::string_view m = req.method;
    if (m.empty() || has_line_break(m) || m.find(' ') != std::string_view::npos || req.target.empty() ||
        has_line_break(req.target) || req.target.find(' ') != std::string::npos || (m == "TRACE" && !req.body.empty()))
        return {};
    std::size_t size = m.size() + req.target.size() + o.host.size() + o.port.size() + o.user_agent.size() + 96;
    for (const auto& h : req.headers) size += h.name.size() + h.value.size() + 4;
    std::string out;
    out.reserve(size);
    out.append(m).append(" ").append(req.target).append(" HTTP/1.1\r\n");
    bool host = false, agent = false;
    const auto& hs = req.headers;
    for (std::size_t i = 0; i < hs.size(); ++i) {
        const header& h = hs[i];
        if (h.name.empty() || has_line_break(h.name) || h.name.find(':') != std::string::npos ||
            has_line_break(h.value))
            return {};
        if (beast::iequals(h.name, "Content-Length") || beast::iequals(h.name, "Transfer-Encoding") ||
            (beast::iequals(h.name, "Connection") && beast::iequals(h.value, "close")))
            continue;
        bool later = false;  // set() again further on: that one stands
        for (std::size_t j = i + 1; j < hs.size() && !later; ++j) later = beast::iequals(hs[j].name, h.name);
        if (later) continue;
        host = host || beast::iequals(h.name, "Host");
        agent = agent || beast::iequals(h.name, "User-Agent");
        out.append(h.name).append(": ").append(h.value).append("\r\n");
    }
    if (!host) out.append("Host: ").append(o.host).append(":").append(o.port).append("\r\n");
    if (!agent) out.append("User-Agent: ").append(o.user_agent).append("\r\n");
    if (!req.body.empty() || m == "OPTIONS" || m == "PUT" || m == "POST")
        out.append("Content-Length: ").append(std::to_string(req.body.size())).append("\r\n");
    out.append("\r\n");
    return out;
}

// One HTTP exchange step on either kind of stream.
template <class Stream>
asio::awaitable<std::tuple<beast::error_code, std::size_t>> write_request(Stream& s, const std::string& header,
                                                                          std::string_view body) {
    // A vector, not a std::array of two: asio's write of such an array
    // passes the written header on as an empty first buffer, and Beast's
    // ssl_stream (its flat_stream) then writes that empty buffer alone for a
    // body of 16 KiB or more: zero bytes, which ends the write with the body
    // unsent. A vector's written buffers are dropped.
    const std::vector<asio::const_buffer> wire{asio::buffer(header), asio::buffer(body.data(), body.size())};
    // Everything the socket takes at each write (asio's transfer_all hands
    // it 64 KiB at a time: a 4 MB batch would be 64 system calls).
    auto all_at_once = [](const beast::error_code& ec, std::size_t) -> std::size_t {
        return ec ? 0 : std::numeric_limits<std::size_t>::max();
    };
    co_return co_await asio::async_write(s, wire, all_at_once, asio::as_tuple(asio::use_awaitable));
}
template <class Stream, class Parser>
asio::awaitable<std::tuple<beast::error_code, std::size_t>> read_response(Stream& s, beast::flat_buffer& b, Parser& p) {
    co_return co_await bhttp::async_read(s, b, p, asio::as_tuple(asio::use_awaitable));
}
bool is_ip_address(const std::string& host) {
    beast::error_code ec;
    (void)asio::ip::make_address(host, ec);
    return !ec;
}
}  // namespace

struct client::impl {
    impl(asio::any_io_executor e, options o) : ex(std::move(e)), opts(std::move(o)), resolver(ex) {
        if (opts.tls) ssl_ctx.emplace(detail::make_client_context(*opts.tls));
    }

    asio::any_io_executor ex;
    options opts;
    tcp::resolver resolver;
    std::optional<asio::ssl::context> ssl_ctx;  // with options::tls
    // The connection: plain, or TLS over TCP (exactly one is set while open).
    std::optional<beast::tcp_stream> plain;
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
    beast::flat_buffer buffer;
    std::uint64_t opened = 0;
    bool busy = false;       // a send is in flight
    bool cancelled = false;  // cancel() was called during it

    void cancel() {
        if (!busy) return;
        cancelled = true;
        resolver.cancel();
        // Closed, not only cancelled: an operation between two steps of a
        // composed one (Beast's read, the TLS handshake) when this runs
        // starts its next step on a closed socket, which fails at once.
        if (open()) {
            beast::error_code ignored;
            lowest().socket().close(ignored);
        }
    }

    bool open() const noexcept { return plain.has_value() || tls.has_value(); }
    beast::tcp_stream& lowest() { return plain ? *plain : beast::get_lowest_layer(*tls); }

    void close() {
        if (open()) {
            // No TLS close_notify: HTTP framing ends every answer, and waiting
            // for the peer's close_notify could hang a close.
            beast::error_code ignored;
            lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
            lowest().close();
            plain.reset();
            tls.reset();
        }
        buffer.clear();
    }
};

client::client(asio::any_io_executor ex, options o) : impl_(std::make_unique<impl>(std::move(ex), std::move(o))) {
    if (impl_->opts.max_response_bytes == 0)
        throw std::invalid_argument("steadfast::http::client: max_response_bytes must be positive");
}
client::~client() = default;

const client::options& client::settings() const noexcept {
    return impl_->opts;
}
std::uint64_t client::connections_opened() const noexcept {
    return impl_->opened;
}
void client::close() {
    impl_->close();
}
void client::cancel() {
    impl_->cancel();
}

asio::awaitable<outcome> client::send(const request& req) {
    impl& d = *impl_;
    // One request at a time: a second one would interleave on the connection.
    if (d.busy) co_return outcome{transport_error{asio::error::in_progress, phase::connect, false, {}}};
    d.busy = true;
    d.cancelled = false;
    struct busy_guard {
        impl& d;
        ~busy_guard() {
            d.busy = false;
            d.cancelled = false;
        }
    } guard{d};
    // After each step: cancel() was called (the step may have completed
    // before it, or between two of its parts): the send ends here.
    auto aborted = [&d](enum phase ph, bool sent) {
        d.close();
        return outcome{transport_error{asio::error::operation_aborted, ph, sent, {}}};
    };
    // The body is sent from req's own buffer, without a copy.
    const std::string header = header_text(req, d.opts);
    if (header.empty())
        co_return outcome{transport_error{asio::error::invalid_argument, phase::write, false,
                                          "the request cannot be sent as one HTTP/1.1 request: a line break or NUL "
                                          "in its method, target or a header, a space in the method or target, a "
                                          "colon in a header name, an empty method, target or header name, or a "
                                          "TRACE with a body: it would not be one HTTP request"}};
    const bool repeatable = is_idempotent_method(req.method) || req.get("Idempotency-Key").has_value();

    for (int round = 0;; ++round) {
        const bool reused = d.open();
        if (!reused) {
            auto [rec, results] =
                co_await d.resolver.async_resolve(d.opts.host, d.opts.port, asio::as_tuple(asio::use_awaitable));
            if (d.cancelled) co_return aborted(phase::resolve, false);
            if (rec) co_return outcome{transport_error{rec, phase::resolve, false, {}}};
            d.plain.emplace(d.ex);
            d.plain->expires_after(d.opts.connect_timeout);
            auto [cec, ep] = co_await d.plain->async_connect(results, asio::as_tuple(asio::use_awaitable));
            if (d.cancelled) co_return aborted(phase::connect, false);
            if (cec) {
                d.close();
                co_return outcome{transport_error{cec, phase::connect, false, {}}};
            }
            beast::error_code ignored;
            d.plain->socket().set_option(tcp::no_delay(true), ignored);
            ++d.opened;
            if (d.ssl_ctx) {
                // TLS over the connection: SNI, then the certificate chain and
                // the name checked during the handshake (within the connect timeout).
                d.tls.emplace(std::move(*d.plain), *d.ssl_ctx);
                d.plain.reset();
                const std::string& name = d.opts.tls->server_name.empty() ? d.opts.host : d.opts.tls->server_name;
                // The name is checked by OpenSSL itself (not a verify callback),
                // so that a mismatch has its own verify result to report.
                SSL* ssl = d.tls->native_handle();
                bool name_set = false;
                if (is_ip_address(name)) {
                    name_set = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
                } else {
                    SSL_set_tlsext_host_name(ssl, name.c_str());
                    name_set = SSL_set1_host(ssl, name.c_str()) == 1;
                }
                if (!name_set) {
                    // A name OpenSSL cannot check (a scoped IPv6 address such as
                    // "::1%lo"): never a handshake without the check.
                    d.close();
                    const error_code refused(
                        static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_CERTIFICATE_VERIFY_FAILED)),
                        asio::error::get_ssl_category());
                    co_return outcome{
                        transport_error{refused, phase::handshake, false,
                                        "the name \"" + name + "\" cannot be checked against a certificate"}};
                }
                d.lowest().expires_after(d.opts.connect_timeout);
                auto [hec] = co_await d.tls->async_handshake(asio::ssl::stream_base::client,
                                                             asio::as_tuple(asio::use_awaitable));
                if (d.cancelled) co_return aborted(phase::handshake, false);
                if (hec) {
                    const long verify = SSL_get_verify_result(d.tls->native_handle());
                    std::string why = verify == X509_V_OK ? std::string() : X509_verify_cert_error_string(verify);
                    d.close();
                    co_return outcome{transport_error{hec, phase::handshake, false, std::move(why)}};
                }
            }
        }

        d.lowest().expires_after(d.opts.write_timeout);
        // (No co_await inside ?: : g++ 12 mishandles it; see BUILD-NOTES.)
        std::tuple<beast::error_code, std::size_t> w;
        if (d.tls)
            w = co_await write_request(*d.tls, header, req.body);
        else
            w = co_await write_request(*d.plain, header, req.body);
        auto [wec, written] = w;
        if (d.cancelled) co_return aborted(phase::write, written > 0);
        if (wec) {
            d.close();
            // A reused connection the server closed while idle: try once on a fresh one.
            if (reused && round == 0 && wec != asio::error::operation_aborted && (repeatable || written == 0)) continue;
            co_return outcome{transport_error{wec, phase::write, written > 0, {}}};
        }

        d.lowest().expires_after(d.opts.read_timeout);
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(d.opts.max_response_bytes);
        parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(d.opts.max_response_bytes, 64 * 1024)));
        std::tuple<beast::error_code, std::size_t> r;
        if (d.tls)
            r = co_await read_response(*d.tls, d.buffer, parser);
        else
            r = co_await read_response(*d.plain, d.buffer, parser);
        auto [rec, read] = r;
        if (d.cancelled) co_return aborted(phase::read, true);
        if (rec) {
            const bool nothing_received = !parser.got_some() && d.buffer.size() == 0;
            d.close();
            const bool closed_idle = rec == bhttp::error::end_of_stream || rec == asio::error::eof ||
                                     rec == asio::error::connection_reset || rec == asio::ssl::error::stream_truncated;
            if (reused && round == 0 && nothing_received && closed_idle && repeatable) continue;
            co_return outcome{transport_error{rec, phase::read, true, {}}};
        }
        auto& bres = parser.get();
        response res;
        res.status = bres.result_int();
        res.headers.reserve(8);
        for (const auto& f : bres) res.headers.push_back({std::string(f.name_string()), std::string(f.value())});
        res.body = std::move(bres.body());
        if (!bres.keep_alive()) d.close();
        co_return outcome{std::move(res)};
    }
}

asio::awaitable<bool> health_check(client& c, std::string target) {
    const request req{"GET", std::move(target), {}, {}};
    auto o = co_await c.send(req);
    co_return o.has_response() && o.res().status == 200;
}

namespace {
// What an answer's body says, for a line of log and a JSON field: its blanks
// (newlines too) one space each, at most 160 bytes of it cut between
// characters, control characters and bytes that are not UTF-8 as "?" (any
// page of any server becomes valid UTF-8).
std::string body_excerpt(std::string_view body) {
    constexpr std::size_t most = 160;
    std::string out;
    bool blank = false;
    for (std::size_t i = 0; i < body.size();) {
        const char ch = body[i];
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
            blank = !out.empty();
            ++i;
            continue;
        }
        const std::size_t n = detail::utf8_sequence(body, i);
        const std::size_t take = (blank ? 1 : 0) + (n == 0 ? 1 : n);
        if (out.size() + take > most) {
            out += "...";
            return out;
        }
        if (blank) out += ' ';
        blank = false;
        const auto c = static_cast<unsigned char>(ch);
        if (n == 0 || c < 0x20 || c == 0x7F)
            out += '?';
        else
            out.append(body.substr(i, n));
        i += n == 0 ? 1 : n;
    }
    return out;
}
}  // namespace

asio::awaitable<health_report> health_check_report(client& c, std::string target) {
    const request req{"GET", std::move(target), {}, {}};
    auto o = co_await c.send(req);
    health_report r;
    if (o.has_response()) {
        r.healthy = o.res().status == 200;
        if (!r.healthy) {
            // The status, and what the answer says of it (a steadfast
            // secondary's storage_failed; another server's page).
            r.why = "HTTP " + std::to_string(o.res().status);
            if (auto said = body_excerpt(o.res().body); !said.empty()) r.why += ": " + said;
        }
        if (auto id = o.res().get("X-Steadfast-Instance")) r.instance = std::string(*id);
    } else {
        const auto& e = o.error();
        r.tls_failure = is_tls_error(e.ec);
        r.refused = e.refused();
        r.why = std::string(to_string(e.phase)) + ": " + e.ec.message();
        if (!e.detail.empty()) r.why += " (" + e.detail + ")";
    }
    co_return r;
}

}  // namespace steadfast::http
