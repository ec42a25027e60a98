// http::client on Beast. One of the two translation units that include Beast.
#include "tls_context.hpp"

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
#include <boost/beast/http/span_body.hpp>
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

namespace {
using span_request = bhttp::request<bhttp::span_body<const char>>;

// The request's header as Beast's serializer writes it (its fields writer:
// the request line, "name: value" lines in the fields' order, a blank line),
// in one string. The request then goes out as one gather write of the header
// and the body from the caller's buffer: Beast's own async_write steps its
// serializer through views of views of its buffers at every write, which
// cost the primary's delivery about as much CPU as the send system call
// itself (perf, one message a request).
std::string header_text(const span_request& req) {
    std::string out;
    out.reserve(256);
    out.append(req.method_string()).append(" ").append(req.target()).append(" HTTP/1.1\r\n");
    for (const auto& f : req) out.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
    out.append("\r\n");
    return out;
}

// One HTTP exchange step on either kind of stream.
template <class Stream>
asio::awaitable<std::tuple<beast::error_code, std::size_t>> write_request(Stream& s, const std::string& header,
                                                                          const span_request& req) {
    // A vector, not a std::array of two: asio's write of such an array
    // passes the written header on as an empty first buffer, and Beast's
    // ssl_stream (its flat_stream) then writes that empty buffer alone for a
    // body of 16 KiB or more: zero bytes, which ends the write with the body
    // unsent. A vector's written buffers are dropped.
    const std::vector<asio::const_buffer> wire{asio::buffer(header),
                                               asio::buffer(req.body().data(), req.body().size())};
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
    bool busy = false;  // a send is in flight

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

asio::awaitable<outcome> client::send(const request& req) {
    impl& d = *impl_;
    // One request at a time: a second one would interleave on the connection.
    if (d.busy) co_return outcome{transport_error{asio::error::in_progress, phase::connect, false, {}}};
    d.busy = true;
    struct busy_guard {
        impl& d;
        ~busy_guard() { d.busy = false; }
    } guard{d};
    // The body is sent from req's own buffer (span_body), without a copy.
    span_request breq;
    if (auto verb = bhttp::string_to_verb(req.method); verb != bhttp::verb::unknown)
        breq.method(verb);
    else
        breq.method_string(req.method);
    breq.target(req.target);
    breq.version(11);
    for (const auto& h : req.headers) breq.set(h.name, h.value);
    if (!req.get("Host")) breq.set(bhttp::field::host, d.opts.host + ":" + d.opts.port);
    if (!req.get("User-Agent")) breq.set(bhttp::field::user_agent, d.opts.user_agent);
    breq.body() = {req.body.data(), req.body.size()};
    breq.keep_alive(true);
    breq.prepare_payload();
    const std::string header = header_text(breq);
    const bool repeatable = is_idempotent_method(req.method) || req.get("Idempotency-Key").has_value();

    for (int round = 0;; ++round) {
        const bool reused = d.open();
        if (!reused) {
            auto [rec, results] =
                co_await d.resolver.async_resolve(d.opts.host, d.opts.port, asio::as_tuple(asio::use_awaitable));
            if (rec) co_return outcome{transport_error{rec, phase::resolve, false, {}}};
            d.plain.emplace(d.ex);
            d.plain->expires_after(d.opts.connect_timeout);
            auto [cec, ep] = co_await d.plain->async_connect(results, asio::as_tuple(asio::use_awaitable));
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
            w = co_await write_request(*d.tls, header, breq);
        else
            w = co_await write_request(*d.plain, header, breq);
        auto [wec, written] = w;
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

asio::awaitable<health_report> health_check_report(client& c, std::string target) {
    const request req{"GET", std::move(target), {}, {}};
    auto o = co_await c.send(req);
    health_report r;
    if (o.has_response()) {
        r.healthy = o.res().status == 200;
        if (!r.healthy) r.why = "HTTP " + std::to_string(o.res().status);
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
