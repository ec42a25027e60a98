// The JetStream client: the NATS C client's connection and subscriptions,
// bridged to the executor. Threads of the C client only lock, queue and post.
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <nlohmann/json.hpp>

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace asio = boost::asio;

namespace steadfast::jetstream {

// ---- errors ----

namespace {
struct category_impl : boost::system::error_category {
    const char* name() const noexcept override { return "jetstream"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::not_connected:
                return "not connected to any NATS server";
            case errc::no_responders:
                return "no responders: JetStream is not available for the subject (no stream, no leader)";
            case errc::request_timeout:
                return "request timed out on the server";
            case errc::unavailable:
                return "JetStream is temporarily unavailable (no leader, cluster not ready)";
            case errc::api_error:
                return "JetStream refused the request";
            case errc::wrong_last_sequence:
                return "wrong last sequence for the subject (another writer?)";
            case errc::not_found:
                return "not found";
            case errc::config_mismatch:
                return "the JetStream stream exists with another configuration";
            case errc::bad_reply:
                return "a JetStream reply that could not be understood";
            case errc::too_large:
                return "larger than the server's max_payload";
            case errc::closed:
                return "the NATS client was closed";
            case errc::abandoned:
                return "abandoned for a new JetStream leader (to be sent again)";
        }
        return "jetstream error " + std::to_string(ev);
    }
};
}  // namespace

const boost::system::error_category& category() noexcept {
    static const category_impl c;
    return c;
}

classification classify(const error_code& ec) noexcept {
    if (!ec) return classification::success();
    if (ec.category() != category()) return classify_error(ec);
    switch (static_cast<errc>(ec.value())) {
        case errc::not_connected:
        case errc::no_responders:
        case errc::request_timeout:
        case errc::unavailable:
        case errc::bad_reply:
        case errc::abandoned:
            return classification::retryable(ec);
        default:
            return classification::permanent(ec);
    }
}

namespace {
// The line after `marker` in a .creds file (trimmed; "" when there is none).
std::string creds_section(const std::string& text, std::string_view marker) {
    auto at = text.find(marker);
    if (at == std::string::npos) return {};
    std::size_t i = text.find('\n', at);
    while (i != std::string::npos) {
        const std::size_t end = text.find('\n', i + 1);
        std::string line = text.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.erase(0, 1);
        if (!line.empty()) return line;
        i = end;
    }
    return {};
}

// What is wrong with a .creds file's user JWT and nkey seed ("" nothing):
// libnats finds out only when it connects, and then says "invalid
// checksum" as if the server were at fault. The seed is an nkey: base32
// (RFC 4648, unpadded) of two prefix bytes, 32 bytes of seed and a CRC-16
// (XMODEM, little-endian) of the rest; a user's begins "SU".
std::string creds_problem(const std::string& text) {
    const std::string jwt = creds_section(text, "BEGIN NATS USER JWT");
    if (std::count(jwt.begin(), jwt.end(), '.') != 2 || jwt.front() == '.' || jwt.back() == '.')
        return "its user JWT is not a JWT (three dot-separated parts)";
    const std::string seed = creds_section(text, "BEGIN USER NKEY SEED");
    if (seed.size() < 2 || seed[0] != 'S' || seed[1] != 'U')
        return "its nkey seed is not a user's seed (one begins \"SU\")";
    std::vector<std::uint8_t> raw;
    std::uint32_t acc = 0;
    int bits = 0;
    for (char ch : seed) {
        int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= '2' && ch <= '7' ? ch - '2' + 26 : -1;
        if (v < 0) return "its nkey seed holds a character that base32 has not";
        acc = (acc << 5) | static_cast<std::uint32_t>(v);
        bits += 5;
        if (bits >= 8) {
            bits -= 8;
            raw.push_back(static_cast<std::uint8_t>(acc >> bits));
        }
    }
    if (raw.size() != 36) return "its nkey seed has the wrong length";
    std::uint16_t crc = 0;
    for (std::size_t i = 0; i < 34; ++i) {
        crc = static_cast<std::uint16_t>(crc ^ (raw[i] << 8));
        for (int b = 0; b < 8; ++b) crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    if (crc != static_cast<std::uint16_t>(raw[34] | (raw[35] << 8)))
        return "its nkey seed fails its checksum (damaged, or cut short)";
    return {};
}
}  // namespace

bool is_nats_url(std::string_view s) noexcept {
    return s.substr(0, 7) == "nats://" || s.substr(0, 6) == "tls://";
}

void check_security(const security& s) {
    auto readable = [](const std::string& file, const char* what) {
        if (file.empty()) return;
        std::ifstream f(file, std::ios::binary);
        if (!f || f.peek() == std::ifstream::traits_type::eof())
            throw std::invalid_argument(std::string(what) + " \"" + file + "\" cannot be read or is empty");
    };
    readable(s.ca_file, "the NATS CA file");
    readable(s.cert_file, "the NATS client certificate");
    readable(s.key_file, "the NATS client key");
    readable(s.creds_file, "the NATS credentials file");
    if (!s.creds_file.empty()) {
        // libnats reads it only when it connects: what it needs is checked now.
        std::ifstream f(s.creds_file, std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (text.find("BEGIN NATS USER JWT") == std::string::npos || text.find("NKEY SEED") == std::string::npos)
            throw std::invalid_argument("the NATS credentials file \"" + s.creds_file +
                                        "\" is not a .creds file (it needs a NATS USER JWT and a USER NKEY SEED "
                                        "section, as nsc writes them)");
        if (auto why = creds_problem(text); !why.empty())
            throw std::invalid_argument("the NATS credentials file \"" + s.creds_file + "\": " + why);
    }
    if (s.cert_file.empty() != s.key_file.empty())
        throw std::invalid_argument("a NATS client certificate and its key go together");
    if (s.user.empty() != s.password.empty()) throw std::invalid_argument("a NATS user and its password go together");
    const int kinds = !s.user.empty() + !s.token.empty() + !s.creds_file.empty();
    if (kinds > 1)
        throw std::invalid_argument(
            "one kind of NATS credential at a time: a user and password, a token, or a .creds file");
}

std::string_view configuration_problem(std::string_view why) noexcept {
    auto has = [&](std::string_view what) {
        return std::search(why.begin(), why.end(), what.begin(), what.end(), [](char a, char b) {
                   return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
               }) != why.end();
    };
    // TLS first: OpenSSL's messages may speak of a certificate "authority".
    if (has("secure connection") || has("tls") || has("ssl") || has("certificate")) return "tls_mismatch";
    if (has("authorization") || has("authentication") || has("not permitted")) return "credentials_refused";
    return {};
}

std::vector<std::string> parse_servers(std::string_view list) {
    std::vector<std::string> out;
    while (!list.empty()) {
        const auto comma = list.find(',');
        std::string_view one = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        if (!is_nats_url(one))
            throw std::invalid_argument("'" + std::string(one) +
                                        "' is not a nats://HOST:PORT address (or tls://HOST:PORT)");
        const auto scheme = one.find("://") + 3;
        const auto hostport = one.substr(scheme);
        if (hostport.find('@') != std::string_view::npos)
            throw std::invalid_argument("'" + std::string(one.substr(0, scheme)) +
                                        "...': credentials in a NATS URL would be logged; give them as files "
                                        "(--nats-user with --nats-password-file, --nats-token-file or --nats-creds)");
        const auto colon = hostport.rfind(':');
        unsigned port = 0;
        // The whole port, digits only: "4333x" or "4333?tls=true" is not a
        // port (from_chars stops at the first non-digit).
        const char* end = hostport.data() + hostport.size();
        const auto [stop, ec] = colon == std::string_view::npos
                                    ? std::from_chars_result{end, std::errc::invalid_argument}
                                    : std::from_chars(hostport.data() + colon + 1, end, port);
        if (colon == std::string_view::npos || colon == 0 || ec != std::errc{} || stop != end || port == 0 ||
            port > 65535 || hostport.find('/') != std::string_view::npos)
            throw std::invalid_argument("'" + std::string(one) +
                                        "' is not a nats://HOST:PORT address (or tls://; a port 1-65535, "
                                        "no path or options)");
        out.emplace_back(one);
    }
    if (out.empty()) throw std::invalid_argument("no NATS server given (nats://HOST:PORT[,nats://HOST:PORT...])");
    return out;
}

const std::string* message::get(std::string_view name) const noexcept {
    for (const auto& h : headers)
        if (h.name.size() == name.size() && std::equal(h.name.begin(), h.name.end(), name.begin(), [](char a, char b) {
                return std::tolower(a) == std::tolower(b);
            }))
            return &h.value;
    return nullptr;
}

// ---- the API's JSON ----

namespace {
error_code from_api(const api_error& e) {
    if (e.err_code == 10071) return errc::wrong_last_sequence;
    if (e.err_code == 10037 || e.err_code == 10059 || e.err_code == 10014) return errc::not_found;
    // 503/504: no leader, cluster not ready. A 500 with an error code of the
    // API's is a refusal ("replicas > 1 not supported in non-clustered mode").
    // 10005: no suitable peers for placement (a cluster still forming, a node down).
    if (e.code == 503 || e.code == 504 || (e.code == 500 && e.err_code == 0) || e.err_code == 10005)
        return errc::unavailable;
    if (e.code == 408) return errc::request_timeout;
    return errc::api_error;
}

// A reply's JSON, or the error of a status message.
error_code parse(const message& m, nlohmann::json& j, api_error& err) {
    if (m.status == 503) return errc::no_responders;
    if (m.status == 408) return errc::request_timeout;
    if (m.status != 0 && m.status != 200) {
        err = {m.status, 0, m.description};
        return errc::api_error;
    }
    j = nlohmann::json::parse(m.data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        err.description = "not a JSON object: " + m.data.substr(0, 200);
        return errc::bad_reply;
    }
    if (auto e = j.find("error"); e != j.end() && e->is_object()) {
        err.code = e->value("code", 0u);
        err.err_code = e->value("err_code", 0u);
        err.description = e->value("description", std::string{});
        return from_api(err);
    }
    return {};
}
}  // namespace

error_code api_reply_error(const message& m, api_error& err) {
    nlohmann::json j;
    return parse(m, j, err);
}

error_code decode_pub_ack(const message& m, pub_ack& out, api_error& err) {
    nlohmann::json j;
    if (auto ec = parse(m, j, err)) return ec;
    auto s = j.find("seq");
    auto st = j.find("stream");
    if (s == j.end() || !s->is_number_unsigned() || st == j.end() || !st->is_string()) {
        err.description = "a publish acknowledgement without stream and seq: " + m.data.substr(0, 200);
        return errc::bad_reply;
    }
    out.stream = st->get<std::string>();
    out.seq = s->get<std::uint64_t>();
    out.duplicate = j.value("duplicate", false);
    return {};
}

error_code decode_consumer_state(const message& m, consumer_state& out, api_error& err) {
    nlohmann::json j;
    if (auto ec = parse(m, j, err)) return ec;
    auto count = [&j](const char* name) {
        auto it = j.find(name);
        return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : std::uint64_t{0};
    };
    out.ack_pending = count("num_ack_pending");
    out.pending = count("num_pending");
    out.redelivered = count("num_redelivered");
    out.waiting = count("num_waiting");
    // {"delivered": {"consumer_seq": .., "stream_seq": ..}, "ack_floor": {..}}
    auto stream_seq = [&j](const char* name) {
        auto it = j.find(name);
        if (it == j.end() || !it->is_object()) return std::uint64_t{0};
        auto s = it->find("stream_seq");
        return s != it->end() && s->is_number_unsigned() ? s->get<std::uint64_t>() : std::uint64_t{0};
    };
    out.delivered_seq = stream_seq("delivered");
    out.ack_floor_seq = stream_seq("ack_floor");
    if (auto c = j.find("config"); c != j.end() && c->is_object()) {
        auto w = c->find("ack_wait");  // in nanoseconds
        if (w != c->end() && w->is_number_unsigned())
            out.ack_wait = std::chrono::nanoseconds(static_cast<std::int64_t>(w->get<std::uint64_t>()));
    }
    return {};
}

std::string last_by_subject_request(std::string_view subject) {
    return nlohmann::json{{"last_by_subj", subject}}.dump();
}

error_code decode_stored_message(const message& m, stored_message& out, api_error& err) {
    nlohmann::json j;
    auto ec = parse(m, j, err);
    if (ec == make_error_code(errc::not_found)) {
        out = {};
        return {};
    }
    if (ec) return ec;
    auto msg = j.find("message");
    if (msg == j.end() || !msg->is_object() || !msg->contains("seq") || !(*msg)["seq"].is_number_unsigned()) {
        err.description = "a stored message without seq: " + m.data.substr(0, 200);
        return errc::bad_reply;
    }
    out.seq = (*msg)["seq"].get<std::uint64_t>();
    out.subject = msg->value("subject", std::string{});
    const std::string b64 = msg->value("data", std::string{});
    out.data.resize(boost::beast::detail::base64::decoded_size(b64.size()));
    const auto [written, read] = boost::beast::detail::base64::decode(out.data.data(), b64.data(), b64.size());
    // Beast stops at the padding: what is left must be padding.
    if (b64.find_first_not_of('=', read) != std::string::npos) {
        err.description = "stored message data is not base64";
        return errc::bad_reply;
    }
    out.data.resize(written);
    return {};
}

std::optional<delivery_info> parse_ack_subject(std::string_view reply) {
    std::vector<std::string_view> t;
    while (true) {
        const auto dot = reply.find('.');
        t.push_back(reply.substr(0, dot));
        if (dot == std::string_view::npos) break;
        reply = reply.substr(dot + 1);
    }
    // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending> (9 tokens), or
    // $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>.<token> (12).
    if (t.size() < 9 || t[0] != "$JS" || t[1] != "ACK") return std::nullopt;
    const std::size_t base = t.size() == 9 ? 2 : 4;
    if (t.size() != 9 && t.size() < 11) return std::nullopt;
    auto num = [](std::string_view s, std::uint64_t& v) {
        return std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc{};
    };
    delivery_info d;
    d.stream = std::string(t[base]);
    d.consumer = std::string(t[base + 1]);
    std::uint64_t ts = 0;
    if (!num(t[base + 2], d.delivered) || !num(t[base + 3], d.stream_seq) || !num(t[base + 4], d.consumer_seq) ||
        !num(t[base + 5], ts) || !num(t[base + 6], d.pending))
        return std::nullopt;
    return d;
}

std::vector<header> publish_headers(const publish_options& o) {
    std::vector<header> h;
    if (!o.msg_id.empty()) h.push_back({"Nats-Msg-Id", o.msg_id});
    if (o.expected_last_subject_seq)
        h.push_back({"Nats-Expected-Last-Subject-Sequence", std::to_string(*o.expected_last_subject_seq)});
    h.insert(h.end(), o.extra.begin(), o.extra.end());
    return h;
}

std::string stream_create_request(const stream_config& cfg) {
    return nlohmann::json{{"name", cfg.name},
                          {"subjects", cfg.subjects},
                          {"retention", "limits"},
                          {"storage", "file"},
                          {"num_replicas", cfg.replicas},
                          {"discard", "old"},
                          {"duplicate_window", std::chrono::nanoseconds(cfg.duplicate_window).count()}}
        .dump();
}

error_code check_stream_reply(const message& m, const stream_config& cfg, stream_state& st, std::string& why) {
    nlohmann::json j;
    api_error e;
    if (auto ec = parse(m, j, e)) {
        // 10058: the name is in use with another configuration.
        if (e.err_code == 10058) ec = errc::config_mismatch;
        why = e.description;
        return ec;
    }
    const auto& c = j.value("config", nlohmann::json::object());
    st.replicas = c.value("num_replicas", 1u);
    st.subjects = c.value("subjects", std::vector<std::string>{});
    const auto& s = j.value("state", nlohmann::json::object());
    st.messages = s.value("messages", std::uint64_t{0});
    st.last_seq = s.value("last_seq", std::uint64_t{0});
    st.leader = j.value("cluster", nlohmann::json::object()).value("leader", std::string{});
    for (const auto& want : cfg.subjects)
        if (std::find(st.subjects.begin(), st.subjects.end(), want) == st.subjects.end()) {
            why = "stream " + cfg.name + " exists without the subject " + want;
            return errc::config_mismatch;
        }
    // Nothing may be removed from the log before every secondary has it: no
    // limits, limits retention (not work queue or interest), not sealed.
    auto limited = [&](const char* field, long long unlimited) {
        return c.contains(field) && c[field].is_number() && c[field].get<long long>() != unlimited;
    };
    for (auto [field, unlimited] : {std::pair{"max_msgs", -1LL}, std::pair{"max_bytes", -1LL},
                                    std::pair{"max_age", 0LL}, std::pair{"max_msgs_per_subject", -1LL}})
        if (limited(field, unlimited)) {
            why = "stream " + cfg.name + " has " + field + " " + c[field].dump() +
                  ": it could remove messages a secondary has not applied (the pair needs no limits)";
            return errc::config_mismatch;
        }
    if (c.value("retention", std::string("limits")) != "limits") {
        why = "stream " + cfg.name + " has retention " + c.value("retention", std::string{}) +
              ": the pair needs limits retention";
        return errc::config_mismatch;
    }
    if (c.value("sealed", false)) {
        why = "stream " + cfg.name + " is sealed: nothing more can be written";
        return errc::config_mismatch;
    }
    if (st.replicas != cfg.replicas) {
        why = "stream " + cfg.name + " exists with " + std::to_string(st.replicas) + " replicas, " +
              std::to_string(cfg.replicas) + " asked for";
        return errc::config_mismatch;
    }
    return {};
}

std::string consumer_create_request(const consumer_config& cfg) {
    return nlohmann::json{{"stream_name", cfg.stream},
                          {"config",
                           {{"durable_name", cfg.durable},
                            {"deliver_policy", "all"},
                            {"ack_policy", "explicit"},
                            {"ack_wait", std::chrono::nanoseconds(cfg.ack_wait).count()},
                            {"max_ack_pending", cfg.max_ack_pending},
                            {"max_deliver", -1},
                            {"replay_policy", "instant"}}}}
        .dump();
}

// ---- the client ----

namespace {
message to_message(natsMsg* msg) {
    message m;
    if (const char* s = natsMsg_GetSubject(msg)) m.subject = s;
    if (const char* r = natsMsg_GetReply(msg)) m.reply = r;
    if (const char* d = natsMsg_GetData(msg)) m.data.assign(d, static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
    const char** keys = nullptr;
    int count = 0;
    if (natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK) {
        for (int i = 0; i < count; ++i) {
            const char* v = nullptr;
            if (natsMsgHeader_Get(msg, keys[i], &v) == NATS_OK && v) m.headers.push_back({keys[i], v});
        }
        std::free(static_cast<void*>(keys));
    }
    // A status message (no responders, a pull's end): "NATS/1.0 503" becomes
    // the Status header in the C client, the text the Description.
    if (natsMsg_IsNoResponders(msg)) m.status = 503;
    if (const auto* s = m.get("Status")) {
        unsigned v = 0;
        if (std::from_chars(s->data(), s->data() + s->size(), v).ec == std::errc{}) m.status = v;
    }
    if (const auto* d = m.get("Description")) m.description = *d;
    return m;
}

error_code from_status(natsStatus s) {
    switch (s) {
        case NATS_OK:
            return {};
        case NATS_MAX_PAYLOAD:
            return errc::too_large;
        case NATS_CONNECTION_CLOSED:
            return errc::closed;
        default:
            return errc::not_connected;
    }
}
}  // namespace

struct client::inbox::state {
    std::mutex m;
    std::deque<message> queue;
    std::size_t max_queued = SIZE_MAX;
    std::uint64_t dropped = 0;
    bool wake_posted = false;
    inbox_sink* sink = nullptr;  // executor only
    executor_type ex;
    natsSubscription* sub = nullptr;
};

namespace {
// Why the servers closed a connection that was to retry for ever: one
// connect with the same servers and security, without retrying (the C
// client, retrying, says only "No server available for connection").
std::string diagnose_refusal(const options& o);
}  // namespace

struct client::impl : std::enable_shared_from_this<impl> {
    struct pending {
        request_handler handler;
        asio::any_io_executor work;  // outstanding work while the request waits
        asio::cancellation_slot slot;
    };

    executor_type ex;
    options opts;
    std::shared_ptr<flag> up;
    natsOptions* nopts = nullptr;
    natsConnection* nc = nullptr;
    natsSubscription* replies = nullptr;
    std::string prefix;  // _INBOX.<nuid>.
    mutable std::mutex m;
    std::map<std::uint64_t, pending> waiting;
    std::uint64_t next = 1;
    bool closed = false;
    std::string last_err;
    std::string closed_by;  // the connection's last error when it closed
    std::atomic<std::uint64_t> reconnects{0}, disconnects{0};
    std::shared_ptr<impl> keep_for_nats;  // released when the C client is done with us
    std::condition_variable closed_cv;    // ~client waits for the closed callback
    bool closed_called = false;

    static void complete(pending p, error_code ec, message msg) {
        // Posted to the operation's executor (from any thread), then run on
        // the handler's own associated executor.
        auto work = p.work;
        asio::post(work, [p = std::move(p), ec, msg = std::move(msg)]() mutable {
            if (p.slot.is_connected()) p.slot.clear();
            asio::dispatch(asio::append(std::move(p.handler), ec, std::move(msg)));
        });
    }

    std::size_t fail_all(error_code ec) {
        std::map<std::uint64_t, pending> all;
        {
            std::lock_guard l(m);
            all.swap(waiting);
        }
        for (auto& [id, p] : all) complete(std::move(p), ec, {});
        return all.size();
    }

    // C client threads.
    static void on_reply(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
        auto* self = static_cast<impl*>(closure);
        const char* subject = natsMsg_GetSubject(msg);
        std::uint64_t id = 0;
        std::string_view s(subject ? subject : "");
        if (s.size() > self->prefix.size()) std::from_chars(s.data() + self->prefix.size(), s.data() + s.size(), id);
        std::optional<pending> p;
        {
            std::lock_guard l(self->m);
            if (auto it = self->waiting.find(id); it != self->waiting.end()) {
                p.emplace(std::move(it->second));
                self->waiting.erase(it);
            }
        }
        if (p) {
            // Nothing subscribed to the request's subject: an error, not a reply.
            const error_code ec = natsMsg_IsNoResponders(msg) ? make_error_code(errc::no_responders) : error_code{};
            complete(std::move(*p), ec, to_message(msg));
        }
        natsMsg_Destroy(msg);
    }
    static void on_connected(natsConnection*, void* closure) {
        auto* self = static_cast<impl*>(closure);
        asio::post(self->ex, [up = self->up] { up->set(); });
    }
    static void on_reconnected(natsConnection* c, void* closure) {
        static_cast<impl*>(closure)->reconnects.fetch_add(1, std::memory_order_relaxed);
        on_connected(c, closure);
    }
    static void on_disconnected(natsConnection*, void* closure) {
        auto* self = static_cast<impl*>(closure);
        self->disconnects.fetch_add(1, std::memory_order_relaxed);
        asio::post(self->ex, [up = self->up] { up->clear(); });
        // Replies to what was sent on the lost connection will not come.
        self->fail_all(errc::not_connected);
    }
    static void on_closed(natsConnection* nc, void* closure) {
        auto* self = static_cast<impl*>(closure);
        bool by_us;
        {
            std::lock_guard l(self->m);
            by_us = self->closed;
        }
        if (!by_us) {
            // Not closed by ~client, and the client retries for ever: the
            // servers refused it (credentials, TLS). Learn why (bounded by
            // the connect timeout; nothing else runs on this connection).
            const char* text = nullptr;
            const natsStatus st = natsConnection_GetLastError(nc, &text);
            std::string why = diagnose_refusal(self->opts);
            if (why.empty()) why = std::string(natsStatus_GetText(st)) + (text ? std::string(": ") + text : "");
            std::lock_guard l(self->m);
            self->closed_by = std::move(why);
        }
        asio::post(self->ex, [up = self->up] { up->clear(); });
        self->fail_all(errc::closed);
        // The last callback of the connection: let go of the impl (on the
        // executor). Posted before ~client is told that the callback is done:
        // the caller may destroy the executor's io_context as soon as ~client
        // returns (a post after that was undefined behaviour, UBSan in CI).
        std::shared_ptr<impl> keep;
        {
            std::lock_guard l(self->m);
            keep = std::move(self->keep_for_nats);
        }
        asio::post(self->ex, [keep = std::move(keep)] {});
        // Last: nothing of `self` is touched once the lock is released.
        std::lock_guard l(self->m);
        self->closed_called = true;
        self->closed_cv.notify_all();
    }
    static void on_error(natsConnection*, natsSubscription*, natsStatus err, void* closure) {
        auto* self = static_cast<impl*>(closure);
        std::lock_guard l(self->m);
        self->last_err = natsStatus_GetText(err);
        if (const char* t = nats_GetLastError(nullptr)) self->last_err += std::string(": ") + t;
    }
    static void on_inbox(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
        auto& st = *static_cast<std::shared_ptr<inbox::state>*>(closure);
        std::lock_guard l(st->m);
        if (st->queue.size() >= st->max_queued) {
            natsMsg_Destroy(msg);
            ++st->dropped;
            return;
        }
        message m = to_message(msg);
        natsMsg_Destroy(msg);
        st->queue.push_back(std::move(m));
        if (!st->wake_posted) {
            st->wake_posted = true;
            asio::post(st->ex, [st] {
                {
                    std::lock_guard l2(st->m);
                    st->wake_posted = false;
                }
                if (st->sink) st->sink->on_messages();
            });
        }
    }
    static void on_inbox_complete(void* closure) { delete static_cast<std::shared_ptr<inbox::state>*>(closure); }
};

namespace {
void check(natsStatus s, const char* what) {
    if (s != NATS_OK) {
        std::string t = natsStatus_GetText(s);
        if (const char* l = nats_GetLastError(nullptr)) t += std::string(" (") + l + ")";
        throw std::runtime_error(std::string("NATS: ") + what + ": " + t);
    }
}

// Whether the connection speaks TLS: a security setting, or a tls:// server.
bool uses_tls(const options& o) {
    if (o.sec.any_tls()) return true;
    for (const auto& url : o.servers)
        if (url.rfind("tls://", 0) == 0) return true;
    return false;
}
}  // namespace

namespace {
// TLS and credentials (check_security() has checked the files and the
// combinations). A file the C client cannot load is a bad configuration.
void apply_security(natsOptions* n, const options& o) {
    const auto& s = o.sec;
    check_security(s);
    auto load = [](natsStatus st, const std::string& what) {
        if (st == NATS_OK) return;
        std::string t = natsStatus_GetText(st);
        if (const char* l = nats_GetLastError(nullptr)) t += std::string(" (") + l + ")";
        throw std::invalid_argument(what + ": " + t);
    };
    if (uses_tls(o)) {
        load(natsOptions_SetSecure(n, true), "NATS TLS");
        if (!s.ca_file.empty())
            load(natsOptions_LoadCATrustedCertificates(n, s.ca_file.c_str()), "the NATS CA file \"" + s.ca_file + "\"");
        if (!s.cert_file.empty())
            load(natsOptions_LoadCertificatesChain(n, s.cert_file.c_str(), s.key_file.c_str()),
                 "the NATS client certificate \"" + s.cert_file + "\" and key \"" + s.key_file + "\"");
        if (!s.server_name.empty())
            load(natsOptions_SetExpectedHostname(n, s.server_name.c_str()), "the NATS server name");
    }
    if (!s.user.empty()) load(natsOptions_SetUserInfo(n, s.user.c_str(), s.password.c_str()), "the NATS user");
    if (!s.token.empty()) load(natsOptions_SetToken(n, s.token.c_str()), "the NATS token");
    if (!s.creds_file.empty())
        load(natsOptions_SetUserCredentialsFromFiles(n, s.creds_file.c_str(), nullptr),
             "the NATS credentials file \"" + s.creds_file + "\"");
}
// natsConnection_Connect, made again when a .creds client is refused: libnats
// 3.4.1 (Debian 12's) sends a CONNECT without the nonce's signature when
// that ed25519 signature begins with a zero byte (its base64 encoder takes
// the bytes for a C string), so about one connect in 256 with a .creds file
// is refused by chance (nats.c PR #705, fixed in 3.8); and after a refused
// first connect it never tries again (fixed in 3.12). Each try has a new
// nonce: four unlucky signatures in a row are one in 4 billion.
natsStatus connect_past_dropped_signatures(natsConnection** nc, natsOptions* n, const options& o) {
    natsStatus s = NATS_ERR;
    for (int attempt = 0; attempt < 4; ++attempt) {
        s = natsConnection_Connect(nc, n);
        if (s != NATS_CONNECTION_AUTH_FAILED || o.sec.creds_file.empty()) break;
    }
    return s;
}
std::string diagnose_refusal(const options& o) {
    natsOptions* n = nullptr;
    if (natsOptions_Create(&n) != NATS_OK) return {};
    std::string why;
    try {
        std::vector<const char*> urls;
        for (const auto& s : o.servers) urls.push_back(s.c_str());
        natsOptions_SetServers(n, urls.data(), static_cast<int>(urls.size()));
        natsOptions_SetTimeout(n, o.connect_timeout.count());
        natsOptions_SetAllowReconnect(n, false);
        apply_security(n, o);
        natsConnection* nc = nullptr;
        const natsStatus s = connect_past_dropped_signatures(&nc, n, o);
        if (s != NATS_OK) {
            why = natsStatus_GetText(s);
            if (const char* l = nats_GetLastError(nullptr); l && why != l) why += std::string(" (") + l + ")";
            // A server that verifies clients drops one without a certificate
            // it trusts right after the handshake: the client only sees the
            // connection end where the first PONG was due.
            if (uses_tls(o) && s == NATS_PROTOCOL_ERROR)
                why =
                    "TLS: the server closed the connection after the handshake (does it require a client "
                    "certificate that it trusts?): " +
                    why;
        }
        natsConnection_Destroy(nc);
    } catch (const std::exception& e) {
        why = e.what();
    }
    natsOptions_Destroy(n);
    return why;
}
}  // namespace

client::client(executor_type ex, options o) : impl_(std::make_shared<impl>()) {
    auto& i = *impl_;
    if (o.servers.empty()) throw std::invalid_argument("no NATS server given");
    i.ex = ex;
    i.opts = std::move(o);
    i.up = make_flag(ex, "nats-connected", false);
    i.keep_for_nats = impl_;
    check(natsOptions_Create(&i.nopts), "options");
    std::vector<const char*> urls;
    for (const auto& s : i.opts.servers) urls.push_back(s.c_str());
    check(natsOptions_SetServers(i.nopts, urls.data(), static_cast<int>(urls.size())), "servers");
    check(natsOptions_SetName(i.nopts, i.opts.name.c_str()), "name");
    check(natsOptions_SetMaxReconnect(i.nopts, -1), "max reconnect");
    check(natsOptions_SetReconnectWait(i.nopts, i.opts.reconnect_wait.count()), "reconnect wait");
    check(natsOptions_SetReconnectJitter(i.nopts, 100, 100), "reconnect jitter");
    check(natsOptions_SetTimeout(i.nopts, i.opts.connect_timeout.count()), "timeout");
    check(natsOptions_SetPingInterval(i.nopts, 2000), "ping interval");
    check(natsOptions_SetMaxPingsOut(i.nopts, 2), "max pings out");
    check(natsOptions_SetReconnectBufSize(i.nopts, 64 << 20), "reconnect buffer");
    check(natsOptions_SetMaxPendingMsgs(i.nopts, 1 << 20), "max pending");
    check(natsOptions_SetDisconnectedCB(i.nopts, &impl::on_disconnected, &i), "disconnected callback");
    check(natsOptions_SetReconnectedCB(i.nopts, &impl::on_reconnected, &i), "reconnected callback");
    check(natsOptions_SetClosedCB(i.nopts, &impl::on_closed, &i), "closed callback");
    check(natsOptions_SetErrorHandler(i.nopts, &impl::on_error, &i), "error handler");
    apply_security(i.nopts, i.opts);
    natsStatus s = NATS_NOT_YET_CONNECTED;
    if (!i.opts.sec.creds_file.empty()) {
        // A first connect that libnats 3.4.1 would never make again once
        // refused (connect_past_dropped_signatures), then the one that
        // retries for ever. A failed connect of this kind calls no callback;
        // a real refusal still ends as before (closed, diagnosed), a little
        // later.
        check(natsOptions_SetRetryOnFailedConnect(i.nopts, false, nullptr, nullptr), "retry on failed connect");
        s = connect_past_dropped_signatures(&i.nc, i.nopts, i.opts);
        if (s != NATS_OK) i.nc = nullptr;
    }
    if (s != NATS_OK) {
        check(natsOptions_SetRetryOnFailedConnect(i.nopts, true, &impl::on_connected, &i), "retry on failed connect");
        s = natsConnection_Connect(&i.nc, i.nopts);
    }
    if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
        i.keep_for_nats.reset();
        check(s, "connect");
    }
    if (s == NATS_OK) i.up->set();
    char* name = nullptr;
    check(natsInbox_Create(&name), "inbox");
    i.prefix = std::string(name) + ".";
    natsInbox_Destroy(name);
    if (const natsStatus st = natsConnection_Subscribe(&i.replies, i.nc, (i.prefix + "*").c_str(), &impl::on_reply, &i);
        st == NATS_CONNECTION_CLOSED) {
        // Closed already (the servers refused this client, or one accepted
        // it and then said nothing): not thrown, since the closed callback
        // may still be running. It learns why (problem()); every request
        // fails as closed; ~client cleans up as for any client.
        i.replies = nullptr;
        return;
    } else {
        check(st, "subscribe");
    }
    natsSubscription_SetPendingLimits(i.replies, -1, -1);
}

client::~client() {
    auto& i = *impl_;
    {
        std::lock_guard l(i.m);
        i.closed = true;
    }
    if (i.replies) natsSubscription_Unsubscribe(i.replies);
    natsConnection_Close(i.nc);
    {
        // The C client calls back after Close returns: wait (bounded) until it
        // is done, so that nothing is posted after the caller moves on.
        std::unique_lock l(i.m);
        // The closed callback may be learning why the servers closed the
        // connection (diagnose_refusal: one connect attempt a server, each
        // bounded by the connect timeout): wait for that too.
        const auto bound = std::chrono::seconds(2) + i.opts.connect_timeout * (i.opts.servers.size() + 1);
        i.closed_cv.wait_for(l, bound, [&] { return i.closed_called; });
    }
    if (i.replies) natsSubscription_Destroy(i.replies);
    natsConnection_Destroy(i.nc);
    natsOptions_Destroy(i.nopts);
    i.fail_all(errc::closed);
}

client::executor_type client::get_executor() const noexcept {
    return impl_->ex;
}
std::shared_ptr<flag> client::connected() const noexcept {
    return impl_->up;
}
std::uint64_t client::reconnects() const noexcept {
    return impl_->reconnects.load(std::memory_order_relaxed);
}
std::uint64_t client::disconnects() const noexcept {
    return impl_->disconnects.load(std::memory_order_relaxed);
}

std::string client::connected_url() const {
    char buf[256] = {0};
    if (natsConnection_GetConnectedUrl(impl_->nc, buf, sizeof buf) != NATS_OK) return {};
    return buf;
}

std::size_t client::max_payload() const {
    const auto n = natsConnection_GetMaxPayload(impl_->nc);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
}

std::string client::last_error() const {
    std::lock_guard l(impl_->m);
    return impl_->last_err;
}

std::string client::problem() const {
    std::string why;
    {
        std::lock_guard l(impl_->m);
        why = impl_->closed_by;
    }
    const bool closed = !why.empty();
    if (why.empty()) {
        if (natsConnection_Status(impl_->nc) == NATS_CONN_STATUS_CONNECTED) return {};
        // While it keeps trying (a TLS mismatch is not final): the last
        // error of the connection's attempts.
        const char* text = nullptr;
        const natsStatus st = natsConnection_GetLastError(impl_->nc, &text);
        if (st == NATS_OK) return {};
        why = std::string(natsStatus_GetText(st)) + (text ? std::string(": ") + text : "");
    }
    const auto kind = configuration_problem(why);
    if (!kind.empty()) return std::string(kind) + ": " + why;
    // Closed for another reason (not by ~client): as final as a refusal.
    return closed ? "connection_closed: " + why : std::string{};
}

void client::start_request(std::string subject, std::string data, std::vector<header> headers, request_handler h) {
    auto& i = *impl_;
    // Constructed, never assigned: Boost 1.81's move assignment of
    // any_completion_handler recurses without end (it copies from an lvalue).
    auto slot = asio::get_associated_cancellation_slot(h);
    impl::pending p{std::move(h), asio::prefer(i.ex, asio::execution::outstanding_work.tracked), slot};
    std::uint64_t id;
    {
        std::lock_guard l(i.m);
        if (i.closed) {
            impl::complete(std::move(p), errc::closed, {});
            return;
        }
        id = i.next++;
    }
    const std::string reply = i.prefix + std::to_string(id);
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subject.c_str(), reply.c_str(), data.data(), static_cast<int>(data.size()));
    for (const auto& hd : headers)
        if (s == NATS_OK) s = natsMsgHeader_Set(msg, hd.name.c_str(), hd.value.c_str());
    if (s != NATS_OK) {
        if (msg) natsMsg_Destroy(msg);
        impl::complete(std::move(p), from_status(s), {});
        return;
    }
    // Registered before it is sent: the reply may come before PublishMsg returns.
    {
        std::lock_guard l(i.m);
        i.waiting.emplace(id, std::move(p));
    }
    if (slot.is_connected()) {
        slot.assign([w = std::weak_ptr<impl>(impl_), id](asio::cancellation_type) {
            auto self = w.lock();
            if (!self) return;
            std::optional<impl::pending> q;
            {
                std::lock_guard l(self->m);
                if (auto it = self->waiting.find(id); it != self->waiting.end()) {
                    q.emplace(std::move(it->second));
                    self->waiting.erase(it);
                }
            }
            if (q) impl::complete(std::move(*q), asio::error::operation_aborted, {});
        });
    }
    s = natsConnection_PublishMsg(i.nc, msg);
    natsMsg_Destroy(msg);
    if (s != NATS_OK) {
        std::optional<impl::pending> q;
        {
            std::lock_guard l(i.m);
            if (auto it = i.waiting.find(id); it != i.waiting.end()) {
                q.emplace(std::move(it->second));
                i.waiting.erase(it);
            }
        }
        if (q) impl::complete(std::move(*q), from_status(s), {});
    }
}

std::size_t client::abandon_requests() {
    // A reply that comes after all finds no one waiting and is dropped.
    return impl_->fail_all(errc::abandoned);
}

error_code client::publish(std::string_view subject, std::string_view data) {
    const std::string s(subject);
    return from_status(natsConnection_Publish(impl_->nc, s.c_str(), data.data(), static_cast<int>(data.size())));
}

error_code client::publish_request(std::string_view subject, std::string_view reply, std::string_view data) {
    const std::string s(subject), r(reply);
    return from_status(
        natsConnection_PublishRequest(impl_->nc, s.c_str(), r.c_str(), data.data(), static_cast<int>(data.size())));
}

std::string client::new_inbox() {
    char* name = nullptr;
    check(natsInbox_Create(&name), "inbox");
    std::string subject = name;
    natsInbox_Destroy(name);
    return subject;
}

std::unique_ptr<client::inbox> client::subscribe_inbox(inbox_sink& sink) {
    return subscribe(new_inbox(), sink);
}

std::unique_ptr<client::inbox> client::subscribe(const std::string& subject, inbox_sink& sink, std::size_t max_queued) {
    auto in = std::unique_ptr<inbox>(new inbox);
    in->st_ = std::make_shared<inbox::state>();
    in->st_->sink = &sink;
    in->st_->max_queued = max_queued;
    in->st_->ex = impl_->ex;
    in->subject_ = subject;
    auto* closure = new std::shared_ptr<inbox::state>(in->st_);
    natsSubscription* sub = nullptr;
    const natsStatus s = natsConnection_Subscribe(&sub, impl_->nc, in->subject_.c_str(), &impl::on_inbox, closure);
    if (s == NATS_CONNECTION_CLOSED) {
        // Refused by the servers (problem() says why): an inbox that
        // receives nothing, as a closed connection would give.
        delete closure;
        return in;
    }
    if (s != NATS_OK) {
        delete closure;
        check(s, "subscribe");
    }
    natsSubscription_SetPendingLimits(sub, -1, -1);
    natsSubscription_SetOnCompleteCB(sub, &impl::on_inbox_complete, closure);
    in->st_->sub = sub;
    return in;
}

client::inbox::~inbox() {
    if (!st_) return;
    st_->sink = nullptr;
    if (st_->sub) {
        natsSubscription_Unsubscribe(st_->sub);
        natsSubscription_Destroy(st_->sub);
    }
}

std::vector<message> client::inbox::drain(std::size_t max) {
    std::vector<message> out;
    std::lock_guard l(st_->m);
    while (!st_->queue.empty() && out.size() < max) {
        out.push_back(std::move(st_->queue.front()));
        st_->queue.pop_front();
    }
    return out;
}

std::size_t client::inbox::queued() const {
    std::lock_guard l(st_->m);
    return st_->queue.size();
}

std::uint64_t client::inbox::dropped() const {
    std::lock_guard l(st_->m);
    return st_->dropped;
}

// ---- the pull consumer ----

struct pull_consumer::waiter {
    fetch_handler handler;
    asio::any_io_executor work;
    asio::cancellation_slot slot;
    asio::steady_timer timer;
    std::size_t batch;
    // Constructed, never assigned (see client::start_request).
    waiter(fetch_handler h, asio::any_io_executor ex, std::size_t b)
        : handler(std::move(h)),
          work(asio::prefer(ex, asio::execution::outstanding_work.tracked)),
          slot(asio::get_associated_cancellation_slot(handler)),
          timer(ex),
          batch(b) {}
};

pull_consumer::pull_consumer(client& c, consumer_config cfg)
    : c_(c), cfg_(std::move(cfg)), inbox_base_(client::new_inbox()) {
    inbox_ = c_.subscribe(inbox_base_ + ".*", *this);
}

pull_consumer::~pull_consumer() {
    inbox_.reset();  // no more on_messages()
    finish(asio::error::operation_aborted);
}

void pull_consumer::on_messages() {
    for (auto& m : inbox_->drain(SIZE_MAX)) {
        if (m.status != 0) {
            // 404 no messages, 408 the pull expired, 409 the pull was ended
            // (leadership change, consumer deleted, limits): ask again.
            // 100: an idle heartbeat, ignored. A status comes on its pull's
            // reply subject: an earlier pull's (one this side gave up on)
            // ends nothing, the pull under way goes on.
            if (m.status == 100) continue;
            // News of the consumer, whichever pull it ends.
            if (m.status == 409 && m.description == "Consumer Deleted") ++endings_.deleted;
            if (pull_reply_.empty() || m.subject != pull_reply_) {
                ++endings_.late;
                continue;
            }
            pulling_ = false;
            switch (m.status) {
                case 404:
                    ++endings_.no_messages;
                    break;
                case 408:
                    ++endings_.expired;
                    break;
                case 409:
                    ++endings_.ended;
                    break;
                case 503:
                    ++endings_.no_responders;
                    break;
                default:
                    ++endings_.other;
                    break;
            }
            endings_.last_status = m.status;
            endings_.last_description = m.description;
            continue;
        }
        auto info = parse_ack_subject(m.reply);
        if (!info) continue;  // not a JetStream delivery
        // (A delivery comes with its stream subject, not its pull's: it is
        // counted against the pull under way.)
        if (pull_left_ > 0 && --pull_left_ == 0) pulling_ = false;
        ++deliveries_;
        if (info->delivered > 1) ++redeliveries_;
        last_pending_ = info->pending;
        ready_.push_back({std::move(m), std::move(*info)});
    }
    if (waiting_ && (!ready_.empty() || !pulling_)) finish({});
}

void pull_consumer::finish(error_code ec) {
    auto w = std::move(waiting_);
    if (!w) return;
    w->timer.cancel();
    std::vector<delivery> out;
    if (!ec) {
        const std::size_t n = std::min(w->batch, ready_.size());
        out.assign(std::make_move_iterator(ready_.begin()),
                   std::make_move_iterator(ready_.begin() + static_cast<std::ptrdiff_t>(n)));
        ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    asio::post(w->work, [w, ec, out = std::move(out)]() mutable {
        if (w->slot.is_connected()) w->slot.clear();
        asio::dispatch(asio::append(std::move(w->handler), ec, std::move(out)));
    });
}

void pull_consumer::start_fetch(std::size_t batch, std::chrono::milliseconds wait, fetch_handler h) {
    auto w = std::make_shared<waiter>(std::move(h), c_.get_executor(), std::max<std::size_t>(batch, 1));
    if (waiting_) {
        // One fetch at a time.
        asio::post(w->work, [w]() mutable {
            asio::dispatch(
                asio::append(std::move(w->handler), error_code(asio::error::in_progress), std::vector<delivery>{}));
        });
        return;
    }
    waiting_ = w;
    if (!ready_.empty()) {
        finish({});
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!pulling_ || now > pull_until_) {
        // max_bytes: a catch-up of large messages is fetched in bounded pieces.
        const auto body =
            nlohmann::json{
                {"batch", w->batch}, {"max_bytes", 32 << 20}, {"expires", std::chrono::nanoseconds(wait).count()}}
                .dump();
        const std::string api = "$JS.API.CONSUMER.MSG.NEXT." + cfg_.stream + "." + cfg_.durable;
        pull_reply_ = inbox_base_ + '.' + std::to_string(++pulls_);
        auto ec = c_.publish_request(api, pull_reply_, body);
        if (ec) {
            pull_reply_.clear();
            finish(ec);
            return;
        }
        pulling_ = true;
        pull_left_ = w->batch;
        // A pull the server forgot (its node died) ends here.
        pull_until_ = now + wait + std::chrono::seconds(2);
    }
    w->timer.expires_at(pull_until_);
    w->timer.async_wait([this, weak = std::weak_ptr<waiter>(w)](const boost::system::error_code& e) {
        auto alive = weak.lock();
        if (e || !alive || alive != waiting_) return;
        // What came already goes first: after the process was held up (a
        // busy machine, SIGSTOP) the pull's own answer may wait in the inbox
        // behind this timer, and the pull was answered.
        on_messages();
        if (alive != waiting_) return;  // (it ended the fetch)
        if (pulling_) {                 // (not a pull that already ended: a waiter whose messages were taken)
            ++endings_.unanswered;
            pull_reply_.clear();  // an answer that comes after all is late
        }
        pulling_ = false;
        finish({});
    });
    if (w->slot.is_connected())
        w->slot.assign([this, weak = std::weak_ptr<waiter>(w)](asio::cancellation_type) {
            auto alive = weak.lock();
            if (alive && alive == waiting_) finish(asio::error::operation_aborted);
        });
}

error_code pull_consumer::ack(const delivery& d) {
    return c_.publish(d.msg.reply, "+ACK");
}
error_code pull_consumer::nak(const delivery& d, std::chrono::milliseconds delay) {
    return c_.publish(d.msg.reply, "-NAK {\"delay\":" + std::to_string(std::chrono::nanoseconds(delay).count()) + "}");
}
error_code pull_consumer::term(const delivery& d) {
    return c_.publish(d.msg.reply, "+TERM");
}

}  // namespace steadfast::jetstream
