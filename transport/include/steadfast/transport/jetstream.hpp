// A NATS JetStream client for the event loop, on the NATS C client (Debian's
// libnats-dev 3.4). The C client keeps its own threads for the socket and for
// subscription callbacks; those threads never touch an Asio object: they put
// what arrived in a queue under a mutex and post to the executor. Every
// operation here completes on the caller's executor (the handler's associated
// one), with a completion token (default: the client's default token) and
// per-operation cancellation of every type (terminal, partial, total: a
// cancelled request is forgotten; a late reply is dropped).
//
// Completions are posted to the client's executor, which then dispatches to
// the handler's associated executor; the cancellation slot is cleared there
// too. With an io_context run by several threads, give the client a strand.
//
// What it speaks is JetStream's JSON API over core NATS request/reply
// ($JS.API.*), with its own reply inbox: one wildcard subscription for all
// requests, so that many requests are in flight at once.
//
// Failures are error codes (category "jetstream"); classify() says which the
// retry engine should retry: no responders, timeouts, no connection, a lost
// leader (the API's 503) are retryable; a wrong expected sequence, a bad
// request, a permission error are not.
#pragma once

#include <steadfast/conditions/flag.hpp>
#include <steadfast/engine/classify.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace steadfast::jetstream {

using boost::system::error_code;

enum class errc {
    not_connected = 1,    // no server reachable now (the client keeps reconnecting)
    no_responders,        // nothing serves the subject: JetStream unavailable, no stream leader yet
    request_timeout,      // the server answered 408, or a pull expired
    unavailable,          // the API answered 503/500/504 (no leader, cluster not ready): retryable
    api_error,            // the API refused the request (a 4xx of its own): see the description
    wrong_last_sequence,  // 10071: the stream's last sequence for the subject is not the expected one
    not_found,            // 10037/10059/10014: no such message, stream or consumer
    config_mismatch,      // the stream exists with a configuration that does not fit
    bad_reply,            // a reply that could not be understood
    too_large,            // bigger than the server's max_payload
    closed,               // the client was closed
    abandoned,            // given up by abandon_requests() (a new stream leader): send it again
};
const boost::system::error_category& category() noexcept;
inline error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), category()};
}

/// What the engine should do about a failure: retryable (no responders,
/// timeouts, not connected, unavailable, a transport error) or permanent.
classification classify(const error_code& ec) noexcept;

/// A classifier for retry()/classified() over attempts that return
/// boost::system::result<T> (as the awaitable helpers below do).
struct classifier {
    template <class T>
    classification operator()(const boost::system::result<T, error_code>& r) const noexcept {
        return r.has_value() ? classification::success() : classify(r.error());
    }
    classification operator()(const error_code& ec) const noexcept {
        return ec ? classify(ec) : classification::success();
    }
};

/// How the client proves itself to NATS and checks the servers, the way NATS
/// users configure it (all optional; empty: not used).
struct security {
    bool tls = false;            // TLS to every server (a tls:// server URL sets it too)
    std::string ca_file;         // PEM: the CAs that signed the servers' certificates (else the system's)
    std::string cert_file;       // PEM: this client's certificate, for servers that verify clients
    std::string key_file;        //      and its key
    std::string server_name;     // the name the servers' certificates must carry (else the URL's host)
    std::string user, password;  // user and password (the server's `authorization { users }`)
    std::string token;           // a token (the server's `authorization { token }`)
    std::string creds_file;      // a .creds file: a user JWT and its nkey seed (decentralised auth)
    bool any_tls() const noexcept { return tls || !ca_file.empty() || !cert_file.empty() || !server_name.empty(); }
};

struct options {
    std::vector<std::string> servers;  // nats://HOST:PORT or tls://HOST:PORT, at least one
    std::string name = "steadfast";    // the connection's name on the server
    std::chrono::milliseconds reconnect_wait{200};
    std::chrono::milliseconds connect_timeout{2000};
    security sec;
};

/// Parses "nats://h:p[,tls://h:p...]" into options.servers; throws
/// std::invalid_argument naming what is wrong (credentials in a URL are
/// refused: they would be logged; give them through security).
std::vector<std::string> parse_servers(std::string_view list);

/// Whether a --secondary/--source value selects JetStream (nats:// or tls://).
bool is_nats_url(std::string_view s) noexcept;

/// Checks what `s` names before a client is made: files that exist and can
/// be read, a certificate with its key, user with password, one kind of
/// credential. Throws std::invalid_argument naming the problem.
void check_security(const security& s);

/// Whether `why` (a client's last_error()) says that the server refused this
/// client's credentials, or that TLS did not match (the server wants TLS, or
/// does not offer it, or the handshake failed): a configuration problem, not
/// an outage. "" when it is neither; else a short name of the problem.
std::string_view configuration_problem(std::string_view why) noexcept;

struct header {
    std::string name, value;
};

/// A reply (or a delivered message).
struct message {
    std::string subject;
    std::string reply;  // a delivered JetStream message: its ack subject
    std::string data;
    unsigned status = 0;      // a status message (503 no responders, 404, 408, 409): its code
    std::string description;  // and its description
    std::vector<header> headers;
    const std::string* get(std::string_view name) const noexcept;
};

/// The API's error object: {"code": 400, "err_code": 10071, "description": "..."}.
struct api_error {
    unsigned code = 0, err_code = 0;
    std::string description;
};
/// Decodes an API reply: its JSON, or the error it carries as a value
/// (ec from errc; description in `err`).
error_code api_reply_error(const message& m, api_error& err);

struct pub_ack {
    std::string stream;
    std::uint64_t seq = 0;
    bool duplicate = false;
};
error_code decode_pub_ack(const message& m, pub_ack& out, api_error& err);

struct stored_message {
    std::uint64_t seq = 0;  // 0: none (no message on the subject)
    std::string subject, data;
};
error_code decode_stored_message(const message& m, stored_message& out, api_error& err);

/// A delivered message's position, from its ack subject
/// ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>, or the
/// longer form with domain and account).
struct delivery_info {
    std::string stream, consumer;
    std::uint64_t delivered = 0, stream_seq = 0, consumer_seq = 0, pending = 0;
};
std::optional<delivery_info> parse_ack_subject(std::string_view reply);

struct stream_config {
    std::string name;
    std::vector<std::string> subjects;
    unsigned replicas = 1;
    std::chrono::seconds duplicate_window{120};
};
struct stream_state {
    unsigned replicas = 0;
    std::vector<std::string> subjects;
    std::uint64_t messages = 0, last_seq = 0;
    std::string leader;
};

class client {
    struct impl;

public:
    using executor_type = boost::asio::any_io_executor;
    using request_handler = boost::asio::any_completion_handler<void(error_code, message)>;

    /// Starts connecting at once (in the background: connected() says when;
    /// while no server answers, the client keeps trying). Throws
    /// std::invalid_argument for a bad server list.
    client(executor_type ex, options o);
    ~client();  // closes; pending requests complete with errc::closed
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    executor_type get_executor() const noexcept;
    /// True while connected to a server (set and cleared on the executor).
    std::shared_ptr<flag> connected() const noexcept;
    std::string connected_url() const;
    std::size_t max_payload() const;  // the server's (0 while not connected)
    std::uint64_t reconnects() const noexcept;
    std::uint64_t disconnects() const noexcept;
    std::string last_error() const;  // the last asynchronous error the server reported ("" if none)
    /// Why the connection cannot work ("" none): refused credentials or a
    /// TLS mismatch ("credentials_refused: <what the client said>",
    /// "tls_mismatch: ..."), or closed for another reason
    /// ("connection_closed: ..."). The C client closes a refused connection
    /// for good: a new client (a restart) tries again.
    std::string problem() const;

    /// Sends `data` to `subject` with a reply inbox and completes with the
    /// first reply. No timeout of its own: bound it with the engine's attempt
    /// timeout or cancel it (the reply, if it comes later, is dropped).
    template <class CompletionToken = boost::asio::default_completion_token_t<executor_type>>
    auto async_request(std::string subject, std::string data, std::vector<header> headers = {},
                       CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, message)>(
            [this](auto handler, std::string s, std::string d, std::vector<header> h) {
                start_request(std::move(s), std::move(d), std::move(h), request_handler(std::move(handler)));
            },
            token, std::move(subject), std::move(data), std::move(headers));
    }

    /// Completes every request still waiting for its reply with
    /// errc::abandoned (retryable): when the cluster elects a new leader, a
    /// request sent to the old one is never answered, and waiting out its
    /// timeout would only delay sending it again (the engine's retry does).
    /// Returns how many were waiting.
    std::size_t abandon_requests();

    /// Publishes without waiting for anything (an ack to a delivered message).
    error_code publish(std::string_view subject, std::string_view data);
    /// Publishes with a reply subject of the caller's (a pull request).
    error_code publish_request(std::string_view subject, std::string_view reply, std::string_view data);

    /// A fresh inbox subject whose messages are handed to `sink` on the
    /// executor (for pull consumers). The sink must outlive the client's use
    /// of it: call unsubscribe() first.
    struct inbox_sink {
        virtual ~inbox_sink() = default;
        virtual void on_messages() = 0;  // on the executor: take them with drain()
    };
    class inbox {
    public:
        ~inbox();
        const std::string& subject() const noexcept { return subject_; }
        /// Moves out what arrived (up to `max`).
        std::vector<message> drain(std::size_t max);
        std::size_t queued() const;
        /// Messages dropped because `max_queued` were waiting already.
        std::uint64_t dropped() const;

    private:
        friend class client;
        friend struct client::impl;
        struct state;
        std::shared_ptr<state> st_;
        std::string subject_;
    };
    std::unique_ptr<inbox> subscribe_inbox(inbox_sink& sink);
    /// A fresh inbox name (_INBOX.<unique>), subscribed to nothing.
    static std::string new_inbox();
    /// The same on a subject of the caller's (no reply inbox): what is
    /// published to `subject` is handed to `sink`.
    /// At most `max_queued` wait to be drained; more are dropped and counted
    /// (a subject anyone may publish to cannot grow memory without end).
    std::unique_ptr<inbox> subscribe(const std::string& subject, inbox_sink& sink, std::size_t max_queued = SIZE_MAX);

private:
    void start_request(std::string subject, std::string data, std::vector<header> headers, request_handler h);
    std::shared_ptr<impl> impl_;
};

namespace detail {
// A handler that converts a reply before the caller's handler sees it, and
// keeps the caller's associations (executor, allocator, cancellation slot).
template <class Handler, class Fn>
struct transformed {
    Handler handler;
    Fn fn;
    void operator()(error_code ec, message m) { fn(std::move(handler), ec, std::move(m)); }
};
}  // namespace detail

/// Publishes one message to JetStream and completes with its ack.
/// `msg_id` goes in Nats-Msg-Id (the server's deduplication window);
/// `expected_last_subject_seq`, when set, in Nats-Expected-Last-Subject-Sequence
/// (0: the subject must have no message yet).
struct publish_options {
    std::string msg_id;
    std::optional<std::uint64_t> expected_last_subject_seq;
    std::vector<header> extra;  // more headers
};
std::vector<header> publish_headers(const publish_options& o);

template <class CompletionToken = boost::asio::default_completion_token_t<client::executor_type>>
auto async_publish(client& c, std::string subject, std::string data, const publish_options& po,
                   CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, pub_ack, api_error)>(
        [&c](auto handler, std::string s, std::string d, std::vector<header> h) {
            auto done = [](auto&& hd, error_code ec, message m) {
                pub_ack a;
                api_error e;
                if (!ec) ec = decode_pub_ack(m, a, e);
                std::move(hd)(ec, std::move(a), std::move(e));
            };
            c.async_request(
                std::move(s), std::move(d), std::move(h),
                detail::transformed<std::decay_t<decltype(handler)>, decltype(done)>{std::move(handler), done});
        },
        token, std::move(subject), std::move(data), publish_headers(po));
}

std::string last_by_subject_request(std::string_view subject);

/// The last message stored for `subject` in `stream` (seq 0: none); on an
/// error, the API's own words in the api_error.
template <class CompletionToken = boost::asio::default_completion_token_t<client::executor_type>>
auto async_last_message(client& c, const std::string& stream, const std::string& subject,
                        CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, stored_message, api_error)>(
        [&c](auto handler, std::string api, std::string body) {
            auto done = [](auto&& hd, error_code ec, message m) {
                stored_message s;
                api_error e;
                if (!ec) ec = decode_stored_message(m, s, e);
                std::move(hd)(ec, std::move(s), std::move(e));
            };
            c.async_request(
                std::move(api), std::move(body), {},
                detail::transformed<std::decay_t<decltype(handler)>, decltype(done)>{std::move(handler), done});
        },
        token, "$JS.API.STREAM.MSG.GET." + stream, last_by_subject_request(subject));
}

std::string stream_create_request(const stream_config& cfg);
/// Checks a STREAM.INFO/CREATE reply against what is wanted.
error_code check_stream_reply(const message& m, const stream_config& cfg, stream_state& st, std::string& why);

/// Creates the stream, or checks that the existing one fits `cfg` (its
/// subjects cover cfg's, same replicas): errc::config_mismatch, with what
/// differs in `why`, when not.
template <class CompletionToken = boost::asio::default_completion_token_t<client::executor_type>>
auto async_ensure_stream(client& c, const stream_config& cfg, CompletionToken&& token = {});

/// Creates (or updates to the same configuration) a durable pull consumer
/// with explicit acks over the whole stream.
struct consumer_config {
    std::string stream, durable;
    // No limit (-1): a secondary that naks a stream's later messages while it
    // waits for a hole to be resent keeps receiving, so the resent copy at
    // the end of the log reaches it.
    std::int64_t max_ack_pending = -1;
    // A delivery not acknowledged in this time (its secondary was killed
    // before its commit) comes again; the stream's later messages wait for it.
    std::chrono::seconds ack_wait{5};
};

std::string consumer_create_request(const consumer_config& cfg);

/// A durable consumer as the server describes it (its create or info reply).
struct consumer_state {
    std::uint64_t ack_pending = 0;         // delivered and not yet acknowledged (come again after ack_wait)
    std::uint64_t pending = 0;             // in the stream, not yet delivered (the lag)
    std::uint64_t redelivered = 0;         // delivered more than once and not yet acknowledged
    std::uint64_t waiting = 0;             // pull requests the server holds for it
    std::uint64_t delivered_seq = 0;       // the stream seq it last delivered
    std::uint64_t ack_floor_seq = 0;       // the stream seq up to which everything is acknowledged
    std::chrono::nanoseconds ack_wait{0};  // its configuration's (0: not said)
};
/// Decodes a consumer create or info reply (an API error as a value).
error_code decode_consumer_state(const message& m, consumer_state& out, api_error& err);

/// A durable pull consumer: fetch() asks the server for up to `batch`
/// messages and completes as soon as some arrived (or the pull expired:
/// then with none). Use it from one executor (or a strand).
class pull_consumer : client::inbox_sink {
public:
    struct delivery {
        message msg;
        delivery_info info;
    };
    pull_consumer(client& c, consumer_config cfg);
    ~pull_consumer() override;

    using fetch_handler = boost::asio::any_completion_handler<void(error_code, std::vector<delivery>)>;
    template <class CompletionToken = boost::asio::default_completion_token_t<client::executor_type>>
    auto async_fetch(std::size_t batch, std::chrono::milliseconds wait, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, std::vector<delivery>)>(
            [this](auto handler, std::size_t b, std::chrono::milliseconds w) {
                start_fetch(b, w, fetch_handler(std::move(handler)));
            },
            token, batch, wait);
    }

    error_code ack(const delivery& d);                                   // +ACK
    error_code nak(const delivery& d, std::chrono::milliseconds delay);  // -NAK, redelivered after delay
    error_code term(const delivery& d);                                  // +TERM: never again

    const consumer_config& config() const noexcept { return cfg_; }
    std::uint64_t last_pending() const noexcept { return last_pending_; }  // consumer lag, from the last delivery
    std::uint64_t deliveries() const noexcept { return deliveries_; }      // every delivery, as it arrives
    std::uint64_t redeliveries() const noexcept { return redeliveries_; }

    /// How its pulls ended without messages, since it was made: the
    /// server's status replies (404 no messages, 408 expired, 409 ended by
    /// the server, 503 no responders; heartbeats not counted), the last of
    /// them, and pulls the server never answered (ended by this side's own
    /// timer, `wait` and 2 s after the pull). Each pull has a reply subject
    /// of its own, so a status is its pull's: one for an earlier pull (a
    /// pull this side gave up on, answered after all) ends nothing and is
    /// counted in `late` only. (Messages delivered to an earlier pull are
    /// taken as any others.) `deleted`: 409s saying "Consumer Deleted", for
    /// whichever pull (the consumer is gone: its later pulls are never
    /// answered).
    struct pull_endings {
        std::uint64_t no_messages = 0, expired = 0, ended = 0, no_responders = 0, other = 0, unanswered = 0, late = 0,
                      deleted = 0;
        unsigned last_status = 0;
        std::string last_description;
    };
    const pull_endings& endings() const noexcept { return endings_; }
    /// The reply subject of the pull under way, or of the last one if it
    /// ended with the server's answer ("" before the first pull and after
    /// one ended on this side's timer).
    const std::string& pull_subject() const noexcept { return pull_reply_; }

private:
    void on_messages() override;
    void start_fetch(std::size_t batch, std::chrono::milliseconds wait, fetch_handler h);
    void finish(error_code ec);
    struct waiter;

    client& c_;
    consumer_config cfg_;
    std::string inbox_base_;                // each pull's reply subject is inbox_base_.<its number>
    std::unique_ptr<client::inbox> inbox_;  // on inbox_base_.*
    std::string pull_reply_;
    std::uint64_t pulls_ = 0;
    std::shared_ptr<waiter> waiting_;
    bool pulling_ = false;
    std::size_t pull_left_ = 0;
    std::chrono::steady_clock::time_point pull_until_{};
    std::uint64_t last_pending_ = 0, deliveries_ = 0, redeliveries_ = 0;
    pull_endings endings_;
    std::vector<delivery> ready_;
};

template <class CompletionToken>
auto async_ensure_stream(client& c, const stream_config& cfg, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, stream_state, std::string)>(
        [&c](auto handler, stream_config cf) {
            // Read it first: INFO needs only the stream's leader (CREATE of an
            // existing replicated stream can wait for a peer that is down).
            // Created only when missing.
            auto info = [&c, cf](auto&& hd, error_code ec, message m) {
                stream_state st;
                std::string why;
                if (!ec) ec = check_stream_reply(m, cf, st, why);
                if (ec != make_error_code(errc::not_found)) {
                    std::move(hd)(ec, std::move(st), std::move(why));
                    return;
                }
                auto created = [cf](auto&& h2, error_code e2, message m2) {
                    stream_state s2;
                    std::string w2;
                    if (!e2) e2 = check_stream_reply(m2, cf, s2, w2);
                    std::move(h2)(e2, std::move(s2), std::move(w2));
                };
                c.async_request(
                    "$JS.API.STREAM.CREATE." + cf.name, stream_create_request(cf), {},
                    detail::transformed<std::decay_t<decltype(hd)>, decltype(created)>{std::move(hd), created});
            };
            c.async_request(
                "$JS.API.STREAM.INFO." + cf.name, std::string{}, {},
                detail::transformed<std::decay_t<decltype(handler)>, decltype(info)>{std::move(handler), info});
        },
        token, cfg);
}

/// Creates the durable consumer, or finds it with this configuration, and
/// completes with its state (what it delivered and is still owed an ack for:
/// a secondary that starts again can tell what its previous run left).
template <class CompletionToken = boost::asio::default_completion_token_t<client::executor_type>>
auto async_ensure_consumer(client& c, const consumer_config& cfg, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, consumer_state, std::string)>(
        [&c](auto handler, std::string subject, std::string body) {
            auto done = [](auto&& hd, error_code ec, message m) {
                api_error e;
                consumer_state st;
                if (!ec) ec = decode_consumer_state(m, st, e);
                std::move(hd)(ec, st, std::move(e.description));
            };
            c.async_request(
                std::move(subject), std::move(body), {},
                detail::transformed<std::decay_t<decltype(handler)>, decltype(done)>{std::move(handler), done});
        },
        token, "$JS.API.CONSUMER.DURABLE.CREATE." + cfg.stream + "." + cfg.durable, consumer_create_request(cfg));
}

}  // namespace steadfast::jetstream

template <>
struct boost::system::is_error_code_enum<steadfast::jetstream::errc> : std::true_type {};

// transformed<> keeps the wrapped handler's associated executor, allocator and
// cancellation slot (as Asio's own append/prepend do).
template <template <class, class> class Associator, class Handler, class Fn, class DefaultCandidate>
struct boost::asio::associator<Associator, steadfast::jetstream::detail::transformed<Handler, Fn>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
    static typename Associator<Handler, DefaultCandidate>::type get(
        const steadfast::jetstream::detail::transformed<Handler, Fn>& h) noexcept {
        return Associator<Handler, DefaultCandidate>::get(h.handler);
    }
    static auto get(const steadfast::jetstream::detail::transformed<Handler, Fn>& h, const DefaultCandidate& c) noexcept
        -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
        return Associator<Handler, DefaultCandidate>::get(h.handler, c);
    }
};
