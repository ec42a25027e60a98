// http::client on Beast. One of the two translation units that include Beast.
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/health.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/span_body.hpp>

#include <optional>
#include <stdexcept>

namespace steadfast::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;

std::string_view to_string(phase p) noexcept {
    switch (p) {
        case phase::resolve: return "resolve";
        case phase::connect: return "connect";
        case phase::handshake: return "handshake";
        case phase::write: return "write";
        case phase::read: return "read";
    }
    return "unknown";
}

struct client::impl {
    impl(asio::any_io_executor e, options o) : ex(std::move(e)), opts(std::move(o)), resolver(ex) {}

    asio::any_io_executor ex;
    options opts;
    tcp::resolver resolver;
    std::optional<beast::tcp_stream> stream;
    beast::flat_buffer buffer;
    std::uint64_t opened = 0;
    bool busy = false;  // a send is in flight

    void close() {
        if (stream) {
            beast::error_code ignored;
            stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
            stream->close();
            stream.reset();
        }
        buffer.clear();
    }
};

client::client(asio::any_io_executor ex, options o) : impl_(std::make_unique<impl>(std::move(ex), std::move(o))) {
    if (impl_->opts.max_response_bytes == 0)
        throw std::invalid_argument("steadfast::http::client: max_response_bytes must be positive");
}
client::~client() = default;

const client::options& client::settings() const noexcept { return impl_->opts; }
std::uint64_t client::connections_opened() const noexcept { return impl_->opened; }
void client::close() { impl_->close(); }

client::options client::from_url(std::string_view url) {
    options o;
    std::string_view rest;
    if (url.substr(0, 7) == "http://") {
        rest = url.substr(7);
    } else if (url.substr(0, 8) == "https://") {
        throw std::invalid_argument("\"" + std::string(url) + "\": https is not built into this version");
    } else {
        throw std::invalid_argument("\"" + std::string(url) + "\" is not an http:// URL");
    }
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        if (rest.substr(slash) != "/")
            throw std::invalid_argument("\"" + std::string(url) + "\": give only scheme, host and port");
        rest = rest.substr(0, slash);
    }
    std::string_view host = rest, port = "80";
    if (!rest.empty() && rest.front() == '[') {
        auto close = rest.find(']');
        if (close == std::string_view::npos) throw std::invalid_argument("\"" + std::string(url) + "\": unclosed [");
        host = rest.substr(1, close - 1);
        if (close + 1 < rest.size()) {
            if (rest[close + 1] != ':') throw std::invalid_argument("\"" + std::string(url) + "\": bad port");
            port = rest.substr(close + 2);
        }
    } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
    }
    if (host.empty()) throw std::invalid_argument("\"" + std::string(url) + "\" has no host");
    unsigned long p = 0;
    for (char c : port) {
        if (c < '0' || c > '9') throw std::invalid_argument("\"" + std::string(url) + "\": port must be a number");
        p = p * 10 + static_cast<unsigned long>(c - '0');
        if (p > 65535) break;
    }
    if (port.empty() || p == 0 || p > 65535)
        throw std::invalid_argument("\"" + std::string(url) + "\": port must be 1 to 65535");
    o.host = std::string(host);
    o.port = std::string(port);
    return o;
}

asio::awaitable<outcome> client::send(const request& req) {
    impl& d = *impl_;
    // One request at a time: a second one would interleave on the connection.
    if (d.busy) co_return outcome{transport_error{asio::error::in_progress, phase::connect, false}};
    d.busy = true;
    struct busy_guard {
        impl& d;
        ~busy_guard() { d.busy = false; }
    } guard{d};
    // The body is sent from req's own buffer (span_body), without a copy.
    bhttp::request<bhttp::span_body<const char>> breq;
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
    const bool repeatable = is_idempotent_method(req.method) || req.get("Idempotency-Key").has_value();

    for (int round = 0;; ++round) {
        const bool reused = d.stream.has_value();
        if (!reused) {
            auto [rec, results] = co_await d.resolver.async_resolve(d.opts.host, d.opts.port, asio::as_tuple(asio::use_awaitable));
            if (rec) co_return outcome{transport_error{rec, phase::resolve, false}};
            d.stream.emplace(d.ex);
            d.stream->expires_after(d.opts.connect_timeout);
            auto [cec, ep] = co_await d.stream->async_connect(results, asio::as_tuple(asio::use_awaitable));
            if (cec) {
                d.close();
                co_return outcome{transport_error{cec, phase::connect, false}};
            }
            beast::error_code ignored;
            d.stream->socket().set_option(tcp::no_delay(true), ignored);
            ++d.opened;
        }

        d.stream->expires_after(d.opts.write_timeout);
        auto [wec, written] = co_await bhttp::async_write(*d.stream, breq, asio::as_tuple(asio::use_awaitable));
        if (wec) {
            d.close();
            // A reused connection the server closed while idle: try once on a fresh one.
            if (reused && round == 0 && wec != asio::error::operation_aborted && (repeatable || written == 0)) continue;
            co_return outcome{transport_error{wec, phase::write, written > 0}};
        }

        d.stream->expires_after(d.opts.read_timeout);
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(d.opts.max_response_bytes);
        parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(d.opts.max_response_bytes, 64 * 1024)));
        auto [rec, read] = co_await bhttp::async_read(*d.stream, d.buffer, parser, asio::as_tuple(asio::use_awaitable));
        if (rec) {
            const bool nothing_received = !parser.got_some() && d.buffer.size() == 0;
            d.close();
            const bool closed_idle = rec == bhttp::error::end_of_stream || rec == asio::error::eof ||
                                     rec == asio::error::connection_reset;
            if (reused && round == 0 && nothing_received && closed_idle && repeatable) continue;
            co_return outcome{transport_error{rec, phase::read, true}};
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

}  // namespace steadfast::http
