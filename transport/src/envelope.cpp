// Strict decoding of the contract's envelope; errors name the field.
#include <steadfast/transport/envelope.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace steadfast::envelope {

namespace {
using nlohmann::json;

struct too_deep {};

std::string describe(const json& j) {
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        case json::value_t::number_float: return "a fraction";
        case json::value_t::number_integer: return j.get<std::int64_t>() < 0 ? "a negative number" : "a number";
        case json::value_t::number_unsigned: return "a number";
        default: return "an unsupported value";
    }
}

// Fills `out` from `j`, or returns an error text (empty on success).
std::string read_message(json& j, message& out, const limits& l) {
    if (!j.is_object()) return "an envelope must be a JSON object, got " + describe(j);
    for (auto& [key, value] : j.items()) {
        if (key != "id" && key != "stream" && key != "seq" && key != "epoch" && key != "payload")
            return "unknown field \"" + key + "\"";
    }
    auto id = j.find("id");
    if (id == j.end()) return "missing field \"id\"";
    if (!id->is_string()) return "\"id\" must be a string, got " + describe(*id);
    out.id = id->get<std::string>();
    if (out.id.empty()) return "\"id\" must not be empty";
    if (out.id.size() > l.max_id_bytes) return "\"id\" is longer than " + std::to_string(l.max_id_bytes) + " bytes";

    auto stream = j.find("stream");
    if (stream == j.end()) return "missing field \"stream\"";
    if (!stream->is_string()) return "\"stream\" must be a string, got " + describe(*stream);
    out.stream = stream->get<std::string>();
    if (!valid_stream_name(out.stream, l))
        return "\"stream\" must be 1 to " + std::to_string(l.max_stream_bytes) + " characters of A-Z a-z 0-9 . _ -";

    auto seq = j.find("seq");
    if (seq == j.end()) return "missing field \"seq\"";
    if (!seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0)
        return "\"seq\" must be an integer from 1 to 18446744073709551615, got " +
               (seq->is_number_unsigned() ? std::string("0") : describe(*seq));
    out.seq = seq->get<std::uint64_t>();

    out.epoch = 0;
    if (auto epoch = j.find("epoch"); epoch != j.end()) {
        if (!epoch->is_number_unsigned())
            return "\"epoch\" must be an integer from 0 to 18446744073709551615, got " + describe(*epoch);
        out.epoch = epoch->get<std::uint64_t>();
    }

    auto payload = j.find("payload");
    if (payload == j.end()) return "missing field \"payload\"";
    out.payload = std::move(*payload);
    return {};
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
    auto parsed = parse_json(body, l.max_depth);
    if (auto* e = std::get_if<json_error>(&parsed))
        return decode_error{e->too_deep ? e->message : "malformed JSON: " + e->message};
    json& j = std::get<json>(parsed);

    if (j.is_object() && j.contains("messages")) {
        if (j.size() != 1) return decode_error{"a batch has only the field \"messages\""};
        json& arr = j["messages"];
        if (!arr.is_array()) return decode_error{"\"messages\" must be an array, got " + describe(arr)};
        if (arr.empty()) return decode_error{"\"messages\" must not be empty"};
        if (arr.size() > l.max_batch)
            return decode_error{"a batch holds at most " + std::to_string(l.max_batch) + " messages"};
        batch b;
        b.messages.resize(arr.size());
        std::map<std::string_view, std::uint64_t> last_seq;
        std::set<std::string_view> ids;
        for (std::size_t i = 0; i < arr.size(); ++i) {
            if (auto err = read_message(arr[i], b.messages[i], l); !err.empty())
                return decode_error{"messages[" + std::to_string(i) + "]: " + err};
            const message& m = b.messages[i];
            if (!ids.insert(m.id).second)
                return decode_error{"messages[" + std::to_string(i) + "]: duplicate id \"" + m.id + "\" in the batch"};
            auto [it, fresh] = last_seq.emplace(m.stream, m.seq);
            if (!fresh) {
                if (it->second == UINT64_MAX || m.seq != it->second + 1)
                    return decode_error{"messages[" + std::to_string(i) + "]: seq " + std::to_string(m.seq) +
                                        " of stream \"" + m.stream + "\" does not follow " +
                                        std::to_string(it->second) + " (seqs must be contiguous within a stream)"};
                it->second = m.seq;
            }
        }
        return decoded{std::move(b)};
    }
    message m;
    if (auto err = read_message(j, m, l); !err.empty()) return decode_error{err};
    return decoded{std::move(m)};
}

std::string encode(const message& m) {
    json j = {{"id", m.id}, {"stream", m.stream}, {"seq", m.seq}, {"epoch", m.epoch}, {"payload", m.payload}};
    return j.dump();
}

std::string encode(const batch& b) {
    std::vector<std::string> parts;
    parts.reserve(b.messages.size());
    for (const auto& m : b.messages) parts.push_back(encode(m));
    std::vector<std::string_view> views(parts.begin(), parts.end());
    return encode_batch_raw(views);
}

std::string encode_batch_raw(const std::vector<std::string_view>& encoded) {
    std::size_t n = 16;
    for (auto s : encoded) n += s.size() + 1;
    std::string out;
    out.reserve(n);
    out += "{\"messages\":[";
    for (std::size_t i = 0; i < encoded.size(); ++i) {
        if (i) out += ',';
        out += encoded[i];
    }
    out += "]}";
    return out;
}

}  // namespace steadfast::envelope
