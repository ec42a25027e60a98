// The message envelope of the primary/secondary contract (shared/CONTRACT.md):
//   {"id": string, "stream": string, "seq": uint64 >= 1, "epoch": uint64 (optional, 0),
//    "payload": any JSON}
// and the batch {"messages": [envelope, ...]}, whose seqs are contiguous within
// each stream. Decoding is strict and returns errors as values with a message
// that names the field and the problem.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace steadfast::envelope {

struct limits {
    std::size_t max_body_bytes = 1 << 20;
    std::size_t max_id_bytes = 256;
    std::size_t max_stream_bytes = 128;
    std::size_t max_batch = 10'000;
    std::size_t max_depth = 64;  // JSON nesting, payload included
};

struct message {
    std::string id;
    std::string stream;
    std::uint64_t seq = 0;
    std::uint64_t epoch = 0;
    nlohmann::json payload;
};

struct batch {
    std::vector<message> messages;
};

struct decode_error {
    std::string what;  // for the 400 answer: {"error": what}
};

using decoded = std::variant<message, batch>;

/// Why a JSON text could not be parsed.
struct json_error {
    std::string message;    // "JSON nested deeper than N levels", or the parser's (position, token)
    bool too_deep = false;
};

/// Parses one JSON value with a nesting limit (guarding memory and the
/// recursive destruction of deep documents). Never throws for bad input.
std::variant<nlohmann::json, json_error> parse_json(std::string_view text, std::size_t max_depth);

/// Decodes one envelope or a batch. Never throws for bad input.
std::variant<decoded, decode_error> decode(std::string_view body, const limits& l = {});

/// Encodes (compact JSON). Payloads are embedded as they are.
std::string encode(const message& m);
std::string encode(const batch& b);
/// Encodes a batch of already-encoded single envelopes (no re-parsing).
std::string encode_batch_raw(const std::vector<std::string_view>& encoded_messages);

/// Streams are names: 1 to max_stream_bytes of [A-Za-z0-9._-].
bool valid_stream_name(std::string_view s, const limits& l = {});

}  // namespace steadfast::envelope
