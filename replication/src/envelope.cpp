// The wire format: strict decoding that keeps payloads byte for byte, and the
// encoders of every body the pair exchanges. Errors name the field.
//
// Decoding validates the whole body (simdjson, then nlohmann's parser when
// simdjson refuses; both iterative: deep input cannot overflow the stack)
// without keeping a document, then walks
// the now-known-valid text with a small scanner to find each field's span.
// Field values are small and parsed alone; payloads are never parsed into a
// document, so their text (number spelling, key order, escapes) is kept.
#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/http.hpp>

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace steadfast::envelope {

namespace {
using nlohmann::json;

struct too_deep {};

bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// ---- a scanner over text already known to be valid JSON ----
struct scanner {
    std::string_view s;
    std::size_t i = 0;

    void ws() {
        while (i < s.size() && is_ws(s[i])) ++i;
    }
    // Past the string starting at s[i] == '"'.
    void skip_string() {
        ++i;
        while (s[i] != '"') i += s[i] == '\\' ? 2 : 1;
        ++i;
    }
    // The span of the value at i; `depth` gets its nesting (0 for a scalar).
    std::string_view value(std::size_t& depth) {
        const std::size_t start = i;
        depth = 0;
        if (s[i] == '"') {
            skip_string();
        } else if (s[i] == '{' || s[i] == '[') {
            std::size_t d = 0;
            do {
                const char c = s[i];
                if (c == '"') {
                    skip_string();
                    continue;
                }
                if (c == '{' || c == '[') depth = std::max(depth, ++d);
                if (c == '}' || c == ']') --d;
                ++i;
            } while (d > 0);
        } else {
            while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) ++i;
        }
        return s.substr(start, i - start);
    }
};

// The members of the object at sc.i: fn(key, value, depth) for each; false
// from fn stops. Keys with escapes are decoded.
template <class Fn>
void members(scanner& sc, Fn fn) {
    ++sc.i;  // '{'
    sc.ws();
    if (sc.s[sc.i] == '}') {
        ++sc.i;
        return;
    }
    for (;;) {
        sc.ws();
        const std::size_t k0 = sc.i;
        sc.skip_string();
        std::string_view raw = sc.s.substr(k0 + 1, sc.i - k0 - 2);
        std::string key = raw.find('\\') == std::string_view::npos
                              ? std::string(raw)
                              : json::parse(sc.s.substr(k0, sc.i - k0)).get<std::string>();
        sc.ws();
        ++sc.i;  // ':'
        sc.ws();
        std::size_t depth = 0;
        const std::string_view v = sc.value(depth);
        if (!fn(key, v, depth)) return;
        sc.ws();
        if (sc.s[sc.i++] == '}') return;
    }
}

std::string describe_value(std::string_view v) {
    switch (v.front()) {
        case '{':
            return "an object";
        case '[':
            return "an array";
        case '"':
            return "a string";
        case 't':
        case 'f':
            return "a boolean";
        case 'n':
            return "null";
        default:
            break;
    }
    if (v.find_first_of(".eE") != std::string_view::npos) return "a fraction";
    return v.front() == '-' ? "a negative number" : "a number";
}

// An unsigned integer field: nullopt unless v is a plain integer in range.
std::optional<std::uint64_t> to_u64(std::string_view v) {
    if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    std::uint64_t n = 0;
    for (char c : v) {
        const auto d = static_cast<std::uint64_t>(c - '0');
        if (n > (UINT64_MAX - d) / 10) return std::nullopt;
        n = n * 10 + d;
    }
    return n;
}

std::string read_string(std::string_view v) {
    if (v.find('\\') == std::string_view::npos) return std::string(v.substr(1, v.size() - 2));
    return json::parse(v).get<std::string>();
}

// Reads the envelope at sc.i into `out`, or returns an error text.
std::string read_message(scanner& sc, message& out, const limits& l) {
    if (sc.s[sc.i] != '{') {
        std::size_t d = 0;
        return "an envelope must be a JSON object, got " + describe_value(sc.value(d));
    }
    std::string err;
    bool has_id = false, has_stream = false, has_seq = false, has_payload = false, has_epoch = false;
    std::size_t payload_depth = 0;
    std::string_view seq_text;
    members(sc, [&](const std::string& key, std::string_view v, std::size_t depth) {
        auto once = [&](bool& seen) {
            if (seen) err = "duplicate field \"" + key + "\"";
            seen = true;
            return err.empty();
        };
        if (key == "id") {
            if (!once(has_id)) return false;
            if (v.front() != '"') return err = "\"id\" must be a string, got " + describe_value(v), false;
            out.id = read_string(v);
        } else if (key == "stream") {
            if (!once(has_stream)) return false;
            if (v.front() != '"') return err = "\"stream\" must be a string, got " + describe_value(v), false;
            out.stream = read_string(v);
        } else if (key == "seq") {
            if (!once(has_seq)) return false;
            seq_text = v;
        } else if (key == "epoch") {
            if (!once(has_epoch)) return false;
            auto e = to_u64(v);
            if (!e)
                return err = "\"epoch\" must be an integer from 0 to 18446744073709551615, got " + describe_value(v),
                       false;
            out.epoch = *e;
        } else if (key == "payload") {
            if (!once(has_payload)) return false;
            out.payload.assign(v);
            payload_depth = depth;
        } else {
            return err = "unknown field \"" + key + "\"", false;
        }
        return true;
    });
    if (!err.empty()) return err;
    if (!has_id) return "missing field \"id\"";
    if (out.id.empty()) return "\"id\" must not be empty";
    if (out.id.size() > l.max_id_bytes) return "\"id\" is longer than " + std::to_string(l.max_id_bytes) + " bytes";
    if (!has_stream) return "missing field \"stream\"";
    if (!valid_stream_name(out.stream, l))
        return "\"stream\" must be 1 to " + std::to_string(l.max_stream_bytes) + " characters of A-Z a-z 0-9 . _ -";
    if (!has_seq) return "missing field \"seq\"";
    auto seq = to_u64(seq_text);
    if (!seq || *seq == 0)
        return "\"seq\" must be an integer from 1 to 18446744073709551615, got " +
               (seq ? std::string("0") : describe_value(seq_text));
    out.seq = *seq;
    if (!has_epoch) out.epoch = 0;
    if (!has_payload) return "missing field \"payload\"";
    if (1 + payload_depth > l.max_depth) return "JSON nested deeper than " + std::to_string(l.max_depth) + " levels";
    return {};
}

bool starts_with_bom(std::string_view text) {
    return text.substr(0, 3) == "\xEF\xBB\xBF";
}

// Valid JSON (one value), or the parser's complaint. simdjson (Debian's
// libsimdjson-dev) checks a batch ten times faster than nlohmann's accept();
// what it refuses is asked of nlohmann, the reference: simdjson refuses some
// valid JSON (integers beyond 64 bits, nesting deeper than 1,024), and
// nlohmann's message names the position. The fuzz target checks that simdjson
// never accepts what nlohmann refuses. A NUL byte is never valid JSON, but
// nlohmann's lexer takes it for the end of the input ("1\0junk" passed): it
// is refused first, so that what the primary accepts the secondary does too.
std::optional<json_error> validate(std::string_view text, std::size_t max_depth) {
    if (const auto nul = text.find('\0'); nul != std::string_view::npos)
        return json_error{"a NUL byte at position " + std::to_string(nul) + " (not allowed in JSON text)", false};
    // The parser keeps buffers of up to about 13 times the largest text it
    // parsed (2-3 times for text that is mostly strings): the one kept per
    // thread is for texts up to the default body limit (1 MiB); a larger one
    // (a raised --max-body, a large JetStream message) gets its own, freed
    // after it. (Fresh buffers for every batch would cost their page faults.)
    thread_local simdjson::dom::parser kept;
    std::optional<simdjson::dom::parser> own;
    simdjson::dom::parser& fast = text.size() <= limits{}.max_body_bytes ? kept : own.emplace();
    if (!fast.parse(text.data(), text.size(), true).error()) return std::nullopt;
    if (json::accept(text)) return std::nullopt;
    auto parsed = parse_json(text, max_depth);
    if (auto* e = std::get_if<json_error>(&parsed)) return *e;
    return json_error{"invalid JSON", false};  // not reached: accept() and parse() agree
}

void append_u64(std::string& out, std::uint64_t v) {
    char buf[24];
    char* p = buf + sizeof buf;
    do {
        *--p = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v);
    out.append(p, static_cast<std::size_t>(buf + sizeof buf - p));
}
std::size_t digits(std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 10) v /= 10, ++n;
    return n;
}
}  // namespace

std::variant<json, json_error> parse_json(std::string_view text, std::size_t max_depth) {
    try {
        return json::parse(text, [max_depth](int depth, json::parse_event_t, json&) {
            if (static_cast<std::size_t>(depth) > max_depth) throw too_deep{};
            return true;
        });
    } catch (const too_deep&) {
        return json_error{"JSON nested deeper than " + std::to_string(max_depth) + " levels", true};
    } catch (const json::exception& e) {
        // nlohmann's message names the byte position and the unexpected token.
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
        return json_error{std::move(what), false};
    }
}

bool valid_stream_name(std::string_view s, const limits& l) {
    if (s.empty() || s.size() > l.max_stream_bytes) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
    });
}

std::variant<decoded, decode_error> decode(std::string_view body, const limits& l) {
    if (body.size() > l.max_body_bytes)
        return decode_error{"body of " + std::to_string(body.size()) + " bytes is over the limit of " +
                            std::to_string(l.max_body_bytes)};
    if (starts_with_bom(body)) return decode_error{"malformed JSON: a byte order mark is not allowed"};
    if (auto e = validate(body, l.max_depth + 2))
        return decode_error{e->too_deep ? e->message : "malformed JSON: " + e->message};
    scanner sc{body};
    sc.ws();

    // A batch is an object whose first member is "messages".
    bool is_batch = false;
    std::size_t fields = 0;
    if (body[sc.i] == '{') {
        scanner probe = sc;
        members(probe, [&](const std::string& key, std::string_view, std::size_t) {
            if (fields++ == 0) is_batch = key == "messages";
            return true;
        });
    }
    if (is_batch && fields != 1) return decode_error{"a batch has only the field \"messages\""};
    if (!is_batch) {
        message m;
        if (auto err = read_message(sc, m, l); !err.empty()) return decode_error{err};
        return decoded{std::move(m)};
    }

    batch b;
    std::string err;
    bool seen = false;
    members(sc, [&](const std::string& key, std::string_view v, std::size_t) {
        if (key != "messages" || seen) return err = "a batch has only the field \"messages\"", false;
        seen = true;
        if (v.front() != '[') return err = "\"messages\" must be an array, got " + describe_value(v), false;
        scanner arr{v, 1};
        arr.ws();
        if (v[arr.i] == ']') return err = "\"messages\" must not be empty", false;
        for (std::size_t n = 0;; ++n) {
            if (n == l.max_batch)
                return err = "a batch holds at most " + std::to_string(l.max_batch) + " messages", false;
            arr.ws();
            auto& m = b.messages.emplace_back();
            if (auto e = read_message(arr, m, l); !e.empty())
                return err = "messages[" + std::to_string(n) + "]: " + e, false;
            arr.ws();
            if (v[arr.i++] == ']') break;
        }
        return true;
    });
    if (!err.empty()) return decode_error{err};

    std::map<std::string_view, std::uint64_t> last_seq;
    std::set<std::string_view> ids;
    for (std::size_t i = 0; i < b.messages.size(); ++i) {
        const message& m = b.messages[i];
        if (!ids.insert(m.id).second)
            return decode_error{"messages[" + std::to_string(i) + "]: duplicate id \"" + m.id + "\" in the batch"};
        auto [it, fresh] = last_seq.emplace(m.stream, m.seq);
        if (!fresh) {
            if (it->second == UINT64_MAX || m.seq != it->second + 1)
                return decode_error{"messages[" + std::to_string(i) + "]: seq " + std::to_string(m.seq) +
                                    " of stream \"" + m.stream + "\" does not follow " + std::to_string(it->second) +
                                    " (seqs must be contiguous within a stream)"};
            it->second = m.seq;
        }
    }
    return decoded{std::move(b)};
}

namespace {
// Ids are plain ASCII in practice: append them as they are when nothing needs
// escaping (the common case costs one scan, no allocation).
bool needs_escape(std::string_view s) {
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x80 || c == '"' || c == '\\') return true;
    }
    return false;
}
void append_escaped(std::string& out, std::string_view s) {
    if (needs_escape(s))
        out += http::json_escape(s);
    else
        out += s;
}
std::size_t escaped_size(std::string_view s) {
    return needs_escape(s) ? http::json_escape(s).size() : s.size();
}

constexpr std::string_view k_id = "{\"id\":\"", k_stream = "\",\"stream\":\"",
                           k_seq = "\",\"seq\":", k_epoch = ",\"epoch\":", k_payload = ",\"payload\":", k_end = "}";
}  // namespace

void encode_to(std::string& out, std::string_view id, std::string_view stream, std::uint64_t seq, std::uint64_t epoch,
               std::string_view payload) {
    out += k_id;
    append_escaped(out, id);
    out += k_stream;
    out += stream;
    out += k_seq;
    append_u64(out, seq);
    out += k_epoch;
    append_u64(out, epoch);
    out += k_payload;
    out += payload;
    out += k_end;
}

std::size_t encoded_size(std::string_view id, std::string_view stream, std::uint64_t seq, std::uint64_t epoch,
                         std::size_t payload_bytes) {
    return k_id.size() + escaped_size(id) + k_stream.size() + stream.size() + k_seq.size() + digits(seq) +
           k_epoch.size() + digits(epoch) + k_payload.size() + payload_bytes + k_end.size();
}

std::string encode(const message& m) {
    std::string out;
    out.reserve(encoded_size(m.id, m.stream, m.seq, m.epoch, m.payload.size()));
    encode_to(out, m.id, m.stream, m.seq, m.epoch, m.payload);
    return out;
}

std::string encode(const batch& b) {
    std::string out(batch_prefix);
    for (std::size_t i = 0; i < b.messages.size(); ++i) {
        if (i) out += ',';
        const auto& m = b.messages[i];
        encode_to(out, m.id, m.stream, m.seq, m.epoch, m.payload);
    }
    out += batch_suffix;
    return out;
}

std::string encode_body(const std::vector<std::string_view>& lists, std::size_t count) {
    if (count == 1 && lists.size() == 1) return std::string(lists.front());
    std::size_t n = batch_prefix.size() + batch_suffix.size() + lists.size();
    for (auto l : lists) n += l.size();
    std::string out;
    out.reserve(n);
    out += batch_prefix;
    for (std::size_t i = 0; i < lists.size(); ++i) {
        if (i) out += ',';
        out += lists[i];
    }
    out += batch_suffix;
    return out;
}

std::variant<std::string_view, payload_error> check_payload(std::string_view body, std::size_t overhead,
                                                            const limits& l) {
    while (!body.empty() && is_ws(body.front())) body.remove_prefix(1);
    while (!body.empty() && is_ws(body.back())) body.remove_suffix(1);
    if (overhead + body.size() > l.max_body_bytes)
        return payload_error{413, "payload of " + std::to_string(body.size()) + " bytes is over the limit of " +
                                      std::to_string(l.max_body_bytes > overhead ? l.max_body_bytes - overhead : 0) +
                                      " (a secondary accepts envelopes of " + std::to_string(l.max_body_bytes) +
                                      " bytes)"};
    // nlohmann accepts a byte order mark at the start; inside an envelope it
    // would be invalid, so a payload must not have one.
    if (starts_with_bom(body)) return payload_error{400, "body is not JSON: a byte order mark is not allowed"};
    // The envelope is one level: the payload may be max_depth - 1 deep.
    if (auto e = validate(body, l.max_depth + 2)) {
        if (e->too_deep)
            return payload_error{400, "payload nested deeper than " + std::to_string(l.max_depth - 1) + " levels"};
        return payload_error{400, "body is not JSON: " + e->message};
    }
    scanner sc{body};
    std::size_t depth = 0;
    (void)sc.value(depth);
    if (1 + depth > l.max_depth)
        return payload_error{400, "payload nested deeper than " + std::to_string(l.max_depth - 1) + " levels"};
    // What is_tombstone() tells apart is the primary's alone to write: a
    // payload like it would be skipped by every handler as a dead letter's.
    if (is_tombstone(body))
        return payload_error{400,
                             "payload starts as a dead letter's tombstone does ({\"steadfast_dead_letter\":{\"id\":"
                             "\"...): that shape is reserved, and an apply handler would skip it"};
    return body;
}

std::string_view to_string(apply_status s) noexcept {
    return s == apply_status::applied ? "applied" : "duplicate";
}

std::string encode_applied(apply_status status, std::uint64_t seq) {
    std::string out = "{\"status\":\"";
    out += to_string(status);
    out += "\",\"seq\":";
    append_u64(out, seq);
    out += '}';
    return out;
}

std::string encode_results(const std::vector<result_item>& items) {
    std::string out = "{\"results\":[";
    out.reserve(16 + items.size() * 36);
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        out += "{\"seq\":";
        append_u64(out, items[i].seq);
        out += ",\"status\":\"";
        out += to_string(items[i].status);
        out += "\"}";
    }
    out += "]}";
    return out;
}

std::string encode(const rejection& r) {
    using k = rejection::kind;
    switch (r.what) {
        case k::stale_epoch:
            return "{\"error\":\"stale_epoch\",\"epoch\":" + std::to_string(r.epoch) + "}";
        case k::conflict:
            return "{\"error\":\"conflict\",\"stream\":\"" + http::json_escape(r.stream) +
                   "\",\"seq\":" + std::to_string(r.seq) + "}";
        case k::gap:
            return "{\"error\":\"gap\",\"stream\":\"" + http::json_escape(r.stream) +
                   "\",\"expected\":" + std::to_string(r.expected) + "}";
        case k::unknown:
            break;
    }
    return "{\"error\":\"unknown\"}";
}

namespace {
// The text of an error answer, {"error":"..."}; nullopt for any other body.
std::optional<std::string> error_text(std::string_view body) {
    auto parsed = parse_json(body, 4);
    auto* j = std::get_if<json>(&parsed);
    if (!j || !j->is_object()) return std::nullopt;
    auto it = j->find("error");
    if (it == j->end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}
}  // namespace

namespace {
constexpr std::string_view epoch_step_mark = " above this secondary's epoch fence ";
}

refusal classify_refusal(std::string_view body) {
    const auto e = error_text(body);
    if (!e) return refusal::not_an_error_answer;
    if (e->starts_with("malformed HTTP request")) return refusal::framing;
    if (e->starts_with("epoch ") && e->find(epoch_step_mark) != std::string::npos) return refusal::epoch_step;
    return refusal::of_a_message;
}

bool is_error_answer(std::string_view body) {
    return classify_refusal(body) != refusal::not_an_error_answer;
}

bool is_framing_refusal(std::string_view body) {
    return classify_refusal(body) == refusal::framing;
}

std::string encode_epoch_step_refusal(std::uint64_t epoch, std::uint64_t step, std::uint64_t fence) {
    return "{\"error\":\"epoch " + std::to_string(epoch) + " is more than " + std::to_string(step) +
           std::string(epoch_step_mark) + std::to_string(fence) +
           " (--max-epoch-step): a failover raises the epoch by one\"}";
}

bool is_epoch_step_refusal(std::string_view body) {
    return classify_refusal(body) == refusal::epoch_step;
}

std::string encode(const positions_page& p) {
    std::string out = "{\"streams\":[";
    out.reserve(32 + p.streams.size() * 40);
    for (std::size_t i = 0; i < p.streams.size(); ++i) {
        if (i) out += ',';
        out += "{\"stream\":\"";
        out += http::json_escape(p.streams[i].stream);
        out += "\",\"last_seq\":";
        append_u64(out, p.streams[i].last_seq);
        out += '}';
    }
    out += "],\"more\":";
    out += p.more ? "true}" : "false}";
    return out;
}

std::optional<positions_page> decode_positions(std::string_view body) {
    auto parsed = parse_json(body, 4);
    auto* j = std::get_if<json>(&parsed);
    if (!j || !j->is_object()) return std::nullopt;
    auto streams = j->find("streams");
    auto more = j->find("more");
    if (streams == j->end() || !streams->is_array() || more == j->end() || !more->is_boolean()) return std::nullopt;
    positions_page p;
    p.more = more->get<bool>();
    p.streams.reserve(streams->size());
    for (const auto& s : *streams) {
        if (!s.is_object()) return std::nullopt;
        auto name = s.find("stream");
        auto seq = s.find("last_seq");
        if (name == s.end() || !name->is_string() || seq == s.end() || !seq->is_number_unsigned()) return std::nullopt;
        p.streams.push_back({name->get<std::string>(), seq->get<std::uint64_t>()});
    }
    return p;
}

rejection decode_rejection(std::string_view body) {
    rejection r;
    auto parsed = parse_json(body, 4);
    auto* j = std::get_if<json>(&parsed);
    if (!j || !j->is_object()) return r;
    auto str = [&](const char* k) {
        auto it = j->find(k);
        return it != j->end() && it->is_string() ? it->get<std::string>() : std::string{};
    };
    auto num = [&](const char* k) -> std::optional<std::uint64_t> {
        auto it = j->find(k);
        if (it == j->end() || !it->is_number_unsigned()) return std::nullopt;
        return it->get<std::uint64_t>();
    };
    const std::string err = str("error");
    r.stream = str("stream");
    if (err == "stale_epoch") {
        // Whatever epoch it names, a stale_epoch answer means a newer term exists.
        r.what = rejection::kind::stale_epoch;
        r.epoch = num("epoch").value_or(0);
    } else if (err == "conflict" && num("seq")) {
        r.what = rejection::kind::conflict;
        r.seq = *num("seq");
    } else if (err == "gap" && num("expected")) {
        r.what = rejection::kind::gap;
        r.expected = *num("expected");
    }
    return r;
}

std::string repair_subject(std::string_view js_stream) {
    return "_steadfast.repair." + std::string(js_stream);
}

std::string encode(const repair_request& r) {
    std::string out = "{\"repair\":{\"stream\":\"";
    out += http::json_escape(r.stream);
    out += "\",\"from\":";
    append_u64(out, r.from);
    out += ",\"to\":";
    append_u64(out, r.to);
    out += ",\"consumer\":\"";
    out += http::json_escape(r.consumer);
    out += "\"}}";
    return out;
}

std::optional<repair_request> decode_repair_request(std::string_view body, std::string& why) {
    auto parsed = parse_json(body, 4);
    auto* j = std::get_if<json>(&parsed);
    if (!j) {
        why = "not JSON: " + std::get<json_error>(parsed).message;
        return std::nullopt;
    }
    auto it = j->is_object() ? j->find("repair") : j->end();
    if (!j->is_object() || it == j->end() || !it->is_object()) {
        why = "not a repair request (no \"repair\" object)";
        return std::nullopt;
    }
    const json& r = *it;
    repair_request out;
    auto str = [&](const char* k, std::string& v) {
        auto f = r.find(k);
        if (f == r.end() || !f->is_string()) return false;
        v = f->get<std::string>();
        return true;
    };
    auto num = [&](const char* k, std::uint64_t& v) {
        auto f = r.find(k);
        if (f == r.end() || !f->is_number_unsigned()) return false;
        v = f->get<std::uint64_t>();
        return true;
    };
    if (!str("stream", out.stream) || !valid_stream_name(out.stream)) {
        why = "a repair request needs a valid \"stream\"";
        return std::nullopt;
    }
    if (!num("from", out.from) || !num("to", out.to) || out.from == 0 || out.to < out.from) {
        why = "a repair request needs seqs 1 <= \"from\" <= \"to\"";
        return std::nullopt;
    }
    str("consumer", out.consumer);  // for the log; optional
    if (out.consumer.size() > 128) {
        why = "a repair request's \"consumer\" is over 128 bytes";
        return std::nullopt;
    }
    return out;
}

std::string encode_requeued(std::int64_t n, std::string_view id, std::string_view stream, std::uint64_t seq) {
    std::string out = "{\"requeued\":" + std::to_string(n) + ",";
    out += encode_published(id, stream, seq).substr(1);
    return out;
}

std::string encode_published(std::string_view id, std::string_view stream, std::uint64_t seq) {
    std::string out = "{\"id\":\"";
    out += http::json_escape(id);
    out += "\",\"stream\":\"";
    out += http::json_escape(stream);
    out += "\",\"seq\":";
    append_u64(out, seq);
    out += '}';
    return out;
}

std::string encode_tombstone(std::string_view id, std::string_view reason) {
    return "{\"steadfast_dead_letter\":{\"id\":\"" + http::json_escape(id) + "\",\"reason\":\"" +
           http::json_escape(reason) + "\"}}";
}

bool is_tombstone(std::string_view payload) noexcept {
    return payload.starts_with("{\"steadfast_dead_letter\":{\"id\":\"");
}

void encode_dump_line(std::string& out, std::string_view stream, std::uint64_t seq, std::string_view id,
                      std::string_view payload) {
    out += "{\"stream\":\"";
    out += http::json_escape(stream);
    out += "\",\"seq\":";
    append_u64(out, seq);
    out += ",\"id\":\"";
    out += http::json_escape(id);
    out += "\",\"payload\":";
    const std::size_t at = out.size();
    out += payload;
    if (payload.find_first_of("\r\n") != std::string_view::npos)
        std::replace_if(
            out.begin() + static_cast<std::ptrdiff_t>(at), out.end(), [](char c) { return c == '\r' || c == '\n'; },
            ' ');
    out += "}\n";
}

}  // namespace steadfast::envelope
