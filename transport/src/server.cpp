// http::server on Beast. One of the two translation units that include Beast.
// Single executor: the acceptor, the sessions and shutdown run on the
// executor the server was made with (a strand if the io_context has threads).
#include "tls_context.hpp"

#include <steadfast/transport/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <set>
#include <stdexcept>

namespace steadfast::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;

bool is_json(const request& r) {
    auto ct = r.get("Content-Type");
    if (!ct) return false;
    std::string_view v = *ct;
    auto semi = v.find(';');
    v = v.substr(0, semi);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return beast::iequals(v, "application/json");
}

router& router::add(std::string method, std::string path, handler h) {
    routes_.push_back({std::move(method), std::move(path), std::move(h)});
    return *this;
}

const router::handler* router::find(std::string_view method, std::string_view target, response& error_out) const {
    const std::string_view path = path_of(target);
    std::string allow;
    for (const auto& r : routes_) {
        if (r.path != path) continue;
        if (r.method == method) return &r.h;
        if (!allow.empty()) allow += ", ";
        allow += r.method;
    }
    if (allow.empty()) {
        error_out = response::error(404, "no such path: " + std::string(path));
    } else {
        error_out = response::error(405, "method " + std::string(method) + " is not allowed on " + std::string(path));
        error_out.set("Allow", allow);
    }
    return nullptr;
}

std::pair<std::string, std::uint16_t> parse_listen_address(std::string_view s) {
    std::string_view host, port;
    if (!s.empty() && s.front() == '[') {
        auto close = s.find(']');
        if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
            throw std::invalid_argument("listen address \"" + std::string(s) + "\" must look like [::1]:PORT");
        host = s.substr(1, close - 1);
        port = s.substr(close + 2);
    } else {
        auto colon = s.rfind(':');
        if (colon == std::string_view::npos)
            throw std::invalid_argument("listen address \"" + std::string(s) + "\" must look like HOST:PORT");
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
    if (host.empty()) throw std::invalid_argument("listen address \"" + std::string(s) + "\" has no host");
    unsigned long p = 0;
    if (port.empty() || port.size() > 5)
        throw std::invalid_argument("listen address \"" + std::string(s) + "\": bad port");
    for (char c : port) {
        if (c < '0' || c > '9') throw std::invalid_argument("listen address \"" + std::string(s) + "\": bad port");
        p = p * 10 + static_cast<unsigned long>(c - '0');
    }
    if (p > 65535) throw std::invalid_argument("listen address \"" + std::string(s) + "\": port over 65535");
    return {std::string(host), static_cast<std::uint16_t>(p)};
}

namespace {
// The answer to a request that could not be read: shared by the session and
// parse_request(). nullopt: close without answering (the peer left, or timed out).
std::optional<response> read_error_answer(const beast::error_code& ec, const server::options& opts) {
    if (ec == bhttp::error::header_limit)
        return response::error(431, "request header over " + std::to_string(opts.max_header_bytes) + " bytes");
    if (ec == bhttp::error::body_limit)
        return response::error(413, "request body over " + std::to_string(opts.max_body_bytes) + " bytes");
    if (ec.category() == make_error_code(bhttp::error::bad_version).category() && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message)
        return response::error(400, "malformed HTTP request: " + ec.message());
    return std::nullopt;
}

bool asks_to_close(const response& res) {
    const auto c = res.get("Connection");
    return c && beast::iequals(*c, "close");
}

request to_request(bhttp::request<bhttp::string_body>& breq) {
    request req;
    req.method = std::string(breq.method_string());
    req.target = std::string(breq.target());
    req.headers.reserve(8);
    for (const auto& f : breq) req.headers.push_back({std::string(f.name_string()), std::string(f.value())});
    req.body = std::move(breq.body());
    return req;
}

void limit(bhttp::request_parser<bhttp::string_body>& p, const server::options& o) {
    p.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(o.max_header_bytes, UINT32_MAX)));
    p.body_limit(o.max_body_bytes);
}
}  // namespace

parsed_request parse_request(std::string_view bytes, const server::options& o) {
    parsed_request out;
    bhttp::request_parser<bhttp::string_body> p;
    limit(p, o);
    p.eager(true);
    beast::error_code ec;
    std::size_t used = 0;
    while (!ec && used < bytes.size() && !p.is_done()) {
        std::size_t n = p.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
        if (ec == bhttp::error::need_more) {
            ec = {};
            break;
        }
        if (n == 0 && !ec) break;
        used += n;
    }
    if (ec) {
        out.error = read_error_answer(ec, o);
        return out;
    }
    if (!p.is_done()) return out;
    out.keep_alive = p.get().keep_alive();
    out.req = to_request(p.get());
    return out;
}

struct server::impl : std::enable_shared_from_this<impl> {
    struct connection {
        beast::tcp_stream* stream;
        bool busy = false;
        bool reserve = false;     // beyond max_connections: reserved paths only, one request
        bool heard = false;       // a byte arrived (the reserve evicts silent ones first)
        bool answering = false;   // its request was read: never evicted
        bool evicted = false;     // closed to make room (in the reserve, or for a request)
        std::uint64_t order = 0;  // accept order: the oldest idle one is evicted first
        bool idle = false;        // between requests (keep-alive), waiting for the next one's first byte
        bool unread = false;      // answered before its request was read whole: lingers (options::linger_timeout)
        bool lingering = false;   // doing so: the first closed when its place is wanted
        std::chrono::steady_clock::time_point lingering_since{};
        std::chrono::steady_clock::time_point idle_since{};
    };

    impl(asio::any_io_executor e, router r, options o)
        : ex(std::move(e)), routes(std::move(r)), opts(std::move(o)), acceptor(ex), drained(ex) {
        if (opts.tls) ssl_ctx.emplace(detail::make_server_context(*opts.tls));
    }

    asio::any_io_executor ex;
    router routes;
    options opts;
    std::optional<asio::ssl::context> ssl_ctx;  // with options::tls
    tcp::acceptor acceptor;
    asio::steady_timer drained;
    std::set<connection*> connections;
    bool stopping = false;
    std::size_t reserve_active = 0;  // of st.active_connections, those in the reserve
    std::uint64_t accepted_order = 0;
    stats st;

    // Room in the reserve for one more: a free place, or a reserve connection
    // closed that has not delivered its request: the oldest that has sent
    // nothing, else the oldest that has (each has a second for its whole
    // request). A health check sends its request at once and is answered in
    // a moment; a flood of idle or dribbling connections only replaces
    // itself. False: reject.
    bool make_room_in_reserve() {
        if (opts.reserved_connections == 0) return false;
        if (reserve_active < opts.reserved_connections) return true;
        if (close_lingering(true)) return true;
        connection* oldest = nullptr;
        for (auto* c : connections) {
            if (!c->reserve || c->answering || c->evicted) continue;
            // Bytes waiting that its session has not read yet count as heard:
            // a health check just accepted is not taken for an idle one.
            if (!c->heard) {
                beast::error_code ec;
                c->heard = c->stream->socket().available(ec) > 0 && !ec;
            }
            if (!oldest || (c->heard == oldest->heard ? c->order < oldest->order : !c->heard)) oldest = c;
        }
        if (!oldest) return false;
        oldest->evicted = true;
        ++st.connections_rejected;  // turned away by the limit, only later
        beast::error_code ignored;
        oldest->stream->socket().close(ignored);  // its session ends and frees the place
        return true;
    }

    // A reserve connection whose request is not for a reserved path (or has
    // a body) takes the place of the regular connection that has been idle
    // the longest between requests, which is closed for it: connections that
    // hold their places without using them (a client that sends a health
    // check now and then on each) cannot lock out one that has a request to
    // make, such as a primary's delivery. Only a whole request header gets
    // this, so a flood of silent connections cannot take anyone's place (as
    // nginx reuses idle keep-alive connections when it runs out). Closing a
    // keep-alive connection between requests is HTTP's right; one whose next
    // request has begun to arrive is not idle. A place free again (a regular
    // connection ended since this one was accepted) is taken as it is. False:
    // none idle, or this connection was itself evicted meanwhile.
    // `may_evict`: options::may_take_place let this request close another.
    bool take_idle_place(connection& conn, bool may_evict) {
        if (conn.evicted) return false;
        if (st.active_connections - reserve_active < opts.max_connections || close_lingering(false)) {
            conn.reserve = false;
            --reserve_active;
            return true;
        }
        if (!may_evict) return false;
        connection* oldest = nullptr;
        for (auto* c : connections) {
            if (c->reserve || !c->idle || c->evicted) continue;
            beast::error_code ec;
            if (c->stream->socket().available(ec) > 0 || ec) continue;
            if (!oldest || c->idle_since < oldest->idle_since) oldest = c;
        }
        if (!oldest) return false;
        oldest->evicted = true;
        ++st.connections_rejected;  // closed by the limit
        beast::error_code ignored;
        oldest->stream->socket().close(ignored);  // its session ends and frees its place
        conn.reserve = false;
        --reserve_active;
        return true;
    }

    // A lingering connection (in the reserve, or a regular one) closed to
    // free its place, the one lingering longest: it was answered already,
    // and lingers only as a courtesy, so it goes before any connection still
    // waiting for an answer (an attacker that sends bodies beyond the limit
    // cannot hold places by never closing). False: none.
    bool close_lingering(bool in_reserve) {
        connection* oldest = nullptr;
        for (auto* c : connections)
            if (c->lingering && !c->evicted && c->reserve == in_reserve &&
                (!oldest || c->lingering_since < oldest->lingering_since))
                oldest = c;
        if (!oldest) return false;
        oldest->evicted = true;
        beast::error_code ignored;
        oldest->stream->socket().close(ignored);  // its linger ends and frees the place
        return true;
    }

    asio::awaitable<void> accept_loop() {
        auto self = shared_from_this();
        asio::steady_timer backoff(ex);
        while (!stopping) {
            auto [ec, sock] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec) {
                if (stopping || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) break;
                // Out of descriptors and the like: say so, breathe, then go
                // on accepting (the connection waits in the backlog).
                ++st.accept_failures;
                if (opts.accept_failed) try {
                        opts.accept_failed(ec);
                    } catch (...) {  // the caller's report failed (out of memory): accepting goes on
                    }
                backoff.expires_after(std::chrono::milliseconds(50));
                co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
                continue;
            }
            // At the cap, a lingering connection's place goes to the new one
            // (with no reserve, nothing else could take it).
            bool reserve = opts.max_connections && st.active_connections - reserve_active >= opts.max_connections;
            if (reserve && close_lingering(false)) reserve = false;
            if (reserve && !make_room_in_reserve()) {
                ++st.connections_rejected;
                beast::error_code ignored;
                sock.close(ignored);
                continue;
            }
            ++st.connections_accepted;
            ++st.active_connections;  // here, not in the session: it starts later
            if (reserve) {
                ++reserve_active;
                ++st.reserved_connections;
            }
            asio::co_spawn(ex, session(std::move(sock), reserve, ++accepted_order), asio::detached);
        }
    }

    template <class Stream>
    asio::awaitable<beast::error_code> write(Stream& stream, response& res, unsigned version, bool keep) {
        bhttp::response<bhttp::string_body> bres;
        bres.version(version);
        bres.result(res.status);
        for (auto& h : res.headers) bres.set(h.name, h.value);
        bres.body() = std::move(res.body);
        bres.keep_alive(keep);
        bres.prepare_payload();
        beast::get_lowest_layer(stream).expires_after(opts.write_timeout);
        auto [ec, n] = co_await bhttp::async_write(stream, bres, asio::as_tuple(asio::use_awaitable));
        co_return ec;
    }

    asio::awaitable<response> dispatch(request& req) {
        response res;
        const router::handler* h = routes.find(req.method, req.target, res);
        if (!h) co_return res;
        bool failed = false;
        try {
            res = co_await (*h)(req);
        } catch (...) {
            failed = true;
        }
        if (failed) res = response::error(500, "internal error");
        co_return res;
    }

    // How long a connection may take to send its first request's header.
    // (Never longer than read_timeout, which bounds any request's reading.)
    std::chrono::nanoseconds header_deadline(const connection& c) const {
        const auto t = std::min(opts.header_timeout, opts.read_timeout);
        return c.reserve ? std::min<std::chrono::nanoseconds>(t, std::chrono::seconds(1)) : t;
    }

    asio::awaitable<void> session(tcp::socket sock, bool reserve, std::uint64_t order) {
        auto self = shared_from_this();
        beast::tcp_stream tcp_stream(std::move(sock));
        beast::error_code ignored;
        tcp_stream.socket().set_option(tcp::no_delay(true), ignored);
        if (ssl_ctx) {
            beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp_stream), *ssl_ctx);
            connection conn{&beast::get_lowest_layer(stream), false, reserve, false, false, false, order};
            connections.insert(&conn);
            // The handshake must end in time, like a request's header. Its
            // first bytes are read here, so that a connection in its
            // handshake is known to have spoken (the reserve's eviction).
            beast::get_lowest_layer(stream).expires_after(header_deadline(conn));
            beast::flat_buffer hello;
            auto [rec, rn] = co_await beast::get_lowest_layer(stream).async_read_some(
                hello.prepare(4096), asio::as_tuple(asio::use_awaitable));
            if (rec) {
                if (rec == beast::error::timeout) ++st.header_timeouts;
                end(conn);
                co_return;
            }
            hello.commit(rn);
            conn.heard = true;
            auto [hec, used] = co_await stream.async_handshake(asio::ssl::stream_base::server, hello.data(),
                                                               asio::as_tuple(asio::use_awaitable));
            if (hec)
                ++st.tls_handshake_failures;
            else
                co_await serve(stream, conn);
            co_await linger(conn);
            end(conn);
        } else {
            connection conn{&tcp_stream, false, reserve, false, false, false, order};
            connections.insert(&conn);
            co_await serve(tcp_stream, conn);
            co_await linger(conn);
            end(conn);
        }
    }

    // After an answer given before the request was read whole: our side
    // shut, the client's bytes read and dropped until it closes, or
    // linger_timeout passes, or linger_max_bytes came, so that closing sends
    // no reset ahead of the answer (options::linger_timeout). Raw TCP under
    // TLS too: nothing more is answered. Idle meanwhile: a shutdown closes it
    // at once. The deadline has a timer of its own, not the stream's: each
    // read restarts and cancels that one, and a read that finishes at once
    // (bytes already waiting) cancels it before an expiry is seen, so a
    // client sending without a pause would never be cut off by it.
    asio::awaitable<void> linger(connection& conn) {
        if (!conn.unread || stopping || opts.linger_timeout <= std::chrono::nanoseconds::zero()) co_return;
        beast::tcp_stream& tcp_layer = *conn.stream;
        if (!tcp_layer.socket().is_open()) co_return;
        beast::error_code ignored;
        tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
        conn.busy = false;
        conn.lingering = true;
        conn.lingering_since = std::chrono::steady_clock::now();
        tcp_layer.expires_never();
        // (Its handler may run after this coroutine ended, with the
        // connection gone: it closes the socket only while `on` says the
        // linger still runs; one executor, so no race.)
        auto on = std::make_shared<bool>(true);
        asio::steady_timer cut(ex, opts.linger_timeout);  // (relative: saturates, where a time point would overflow)
        cut.async_wait([on, &conn](const beast::error_code& ec) {
            beast::error_code close_ec;
            if (!ec && *on) conn.stream->socket().close(close_ec);  // ends the read below
        });
        std::array<char, 16384> sink;  // in this coroutine's frame: only while lingering
        std::uint64_t dropped = 0;
        for (;;) {
            auto [ec, n] = co_await tcp_layer.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
            // The client closed (or reset), the time is up, or a shutdown or
            // a newer connection closed it.
            if (ec) break;
            dropped += n;
            if (dropped >= opts.linger_max_bytes) break;
        }
        *on = false;
    }

    // The connection is done: closed without a TLS close_notify (every answer
    // is framed by HTTP; waiting for the peer's could hang a shutdown).
    void end(connection& conn) {
        beast::error_code ignored;
        conn.stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
        conn.stream->close();
        connections.erase(&conn);
        --st.active_connections;
        if (conn.reserve) --reserve_active;
        if (stopping && st.active_connections == 0) drained.cancel();
    }

    // Requests and answers on one connection until it ends.
    template <class Stream>
    asio::awaitable<void> serve(Stream& stream, connection& conn) {
        beast::tcp_stream& tcp_layer = beast::get_lowest_layer(stream);
        beast::flat_buffer buf;
        // The first request's header must arrive within header_timeout from
        // the start, however the bytes trickle in; later ones may wait
        // idle_timeout for their first byte, then have read_timeout.
        bool first = true;
        if (!conn.heard) tcp_layer.expires_after(header_deadline(conn));
        for (;;) {
            conn.busy = false;
            if (stopping) break;
            if (buf.size() == 0) {
                if (!first) {  // between requests
                    tcp_layer.expires_after(opts.idle_timeout);
                    conn.idle = true;
                    conn.idle_since = std::chrono::steady_clock::now();
                }
                auto [ec, n] = co_await stream.async_read_some(buf.prepare(4096), asio::as_tuple(asio::use_awaitable));
                conn.idle = false;
                if (ec) {
                    if (first && ec == beast::error::timeout) ++st.header_timeouts;
                    break;
                }
                buf.commit(n);
                conn.heard = true;
            }
            conn.busy = true;
            // A request started: it must arrive in time. On expiry tcp_stream
            // closes the socket, so a slow client is cut off without an answer.
            if (!first) tcp_layer.expires_after(opts.read_timeout);
            bhttp::request_parser<bhttp::string_body> parser;
            limit(parser, opts);
            auto [hec, hn] =
                co_await bhttp::async_read_header(stream, buf, parser, asio::as_tuple(asio::use_awaitable));
            if (hec) {
                if (first && hec == beast::error::timeout) ++st.header_timeouts;
                auto err = read_error_answer(hec, opts);
                if (err && tcp_layer.socket().is_open()) {
                    co_await write(stream, *err, 11, false);
                    conn.unread = true;
                }
                break;
            }
            if (conn.evicted) break;  // closed for a newer one while its header arrived
            if (conn.reserve) {
                // Beyond the cap: a reserved path, and no body (a health check
                // or a scrape sends none), answered at once; anything else is
                // refused before its body is read.
                const auto& h = parser.get();
                const bool reserved = std::find(opts.reserved_paths.begin(), opts.reserved_paths.end(),
                                                path_of(h.target())) != opts.reserved_paths.end();
                const bool body = parser.chunked() || parser.content_length().value_or(0) > 0;
                auto may_evict = [&] {
                    return !opts.may_take_place ||
                           opts.may_take_place(std::string_view(h[bhttp::field::authorization]));
                };
                if ((!reserved || body) && !take_idle_place(conn, may_evict())) {
                    ++st.connections_rejected;  // refused by the limit, at its header
                    conn.answering = true;
                    auto res = response::error(503, "the server is at its connection limit (" +
                                                        std::to_string(opts.max_connections) +
                                                        "); beyond it only health, readiness and metrics are answered, "
                                                        "without a body");
                    res.set("Retry-After", "1");
                    co_await write(stream, res, h.version(), false);
                    conn.unread = body;
                    break;
                }
            }
            // The body, from here; a reserve connection keeps its one second for
            // the whole request.
            if (first && !conn.reserve) tcp_layer.expires_after(opts.read_timeout);
            first = false;
            if (!parser.is_done()) {
                // A client that asked to be told to go on (Expect:
                // 100-continue, HTTP/1.1) waits for it before it sends the
                // body: curl for a second, others for as long as they like.
                const auto& h = parser.get();
                if (h.version() >= 11) {
                    if (auto e = h.find(bhttp::field::expect);
                        e != h.end() && beast::iequals(e->value(), "100-continue")) {
                        // No route for it (404, 405): the final answer at
                        // once instead, and the body is never sent.
                        response no_route;
                        // (A client that stops waiting sends the body anyway: curl
                        // after a second. So these linger too.)
                        if (!routes.find(std::string(h.method_string()), h.target(), no_route)) {
                            conn.answering = true;
                            co_await write(stream, no_route, h.version(), false);
                            conn.unread = true;
                            break;
                        }
                        if (opts.before_continue) {
                            if (auto early = opts.before_continue(to_request(parser.get()))) {
                                conn.answering = true;
                                co_await write(stream, *early, h.version(), false);
                                conn.unread = true;
                                break;
                            }
                        }
                        static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
                        auto [cec, cn] = co_await asio::async_write(stream, asio::buffer(go_on.data(), go_on.size()),
                                                                    asio::as_tuple(asio::use_awaitable));
                        if (cec) break;
                    }
                }
                auto [ec, n] = co_await bhttp::async_read(stream, buf, parser, asio::as_tuple(asio::use_awaitable));
                if (ec) {
                    auto err = read_error_answer(ec, opts);
                    if (err && tcp_layer.socket().is_open()) {
                        co_await write(stream, *err, 11, false);
                        conn.unread = true;
                    }
                    break;
                }
            }
            conn.answering = true;
            auto& breq = parser.get();
            request req = to_request(breq);
            ++st.requests;
            response res = co_await dispatch(req);
            if (res.drop_connection) break;
            if (res.raw) {
                tcp_layer.expires_after(opts.write_timeout);
                co_await asio::async_write(stream, asio::buffer(*res.raw), asio::as_tuple(asio::use_awaitable));
                break;
            }
            // A reserve connection answers one request: its place is for the next health check.
            // (A handler closes with "Connection: close": what follows on the
            // connection cannot be read as a request, say.)
            const bool keep = breq.keep_alive() && !stopping && !conn.reserve && !asks_to_close(res);
            auto wec = co_await write(stream, res, breq.version(), keep);
            if (wec || !keep) break;
        }
    }
};

server::server(asio::any_io_executor ex, router r, options o)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(r), std::move(o))) {}
server::server(asio::any_io_executor ex, router r) : server(std::move(ex), std::move(r), options{}) {}
server::~server() {
    // Sessions hold the impl; closing the acceptor ends the accept loop.
    beast::error_code ignored;
    impl_->stopping = true;
    impl_->acceptor.close(ignored);
}

tcp::endpoint server::listen(const std::string& host, std::uint16_t port) {
    auto& a = impl_->acceptor;
    beast::error_code ec;
    const auto addr = asio::ip::make_address(host, ec);
    if (ec) throw std::invalid_argument("cannot listen on \"" + host + "\": not an IP address");
    const tcp::endpoint ep(addr, port);
    const std::string where = host + ":" + std::to_string(port);
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        a.close();
        // Without the source location Asio attached (a path inside Boost is
        // no help to an operator).
        throw boost::system::system_error(boost::system::error_code(ec.value(), ec.category()),
                                          "cannot listen on " + where);
    }
    return a.local_endpoint();
}

void server::start() {
    asio::co_spawn(impl_->ex, impl_->accept_loop(), asio::detached);
}

asio::awaitable<void> server::shutdown() {
    auto d = impl_;
    d->stopping = true;
    beast::error_code ignored;
    d->acceptor.close(ignored);
    for (auto* c : d->connections)
        if (!c->busy) c->stream->socket().close(ignored);  // idle: its read ends now
    if (d->st.active_connections > 0) {
        d->drained.expires_after(d->opts.shutdown_grace);
        co_await d->drained.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    for (auto* c : d->connections) c->stream->socket().close(ignored);  // past the grace period
}

server::stats server::get_stats() const noexcept {
    return impl_->st;
}

}  // namespace steadfast::http
