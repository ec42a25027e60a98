// Plain HTTP message types shared by the client and the server. They keep
// Beast out of the public headers (Beast translation units are slow to build:
// only transport's own .cpp files include it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace steadfast::http {

struct header {
    std::string name;
    std::string value;
};

/// Case-insensitive header lookup.
std::optional<std::string_view> find_header(const std::vector<header>& headers, std::string_view name);
/// How many headers are named `name` (case-insensitive).
std::size_t header_count(const std::vector<header>& headers, std::string_view name);
/// Replaces the header's value (case-insensitive name), or adds it.
void set_header(std::vector<header>& headers, std::string name, std::string value);

struct request {
    std::string method = "GET";
    std::string target = "/";
    std::vector<header> headers;
    std::string body;

    std::optional<std::string_view> get(std::string_view name) const { return find_header(headers, name); }
    request& set(std::string name, std::string value);
};

struct response {
    unsigned status = 200;
    std::vector<header> headers;
    std::string body;

    // Server side only, for fault injection and tests: close the connection
    // without answering, or write these bytes verbatim and close.
    bool drop_connection = false;
    std::optional<std::string> raw;

    std::optional<std::string_view> get(std::string_view name) const { return find_header(headers, name); }
    response& set(std::string name, std::string value);

    static response json(unsigned status, std::string body);
    /// {"error": message} with the given status.
    static response error(unsigned status, std::string_view message);
};

/// GET, HEAD, PUT, DELETE, OPTIONS and TRACE are idempotent (RFC 9110 9.2.2).
bool is_idempotent_method(std::string_view method) noexcept;

/// Parses a Retry-After value: delta-seconds or an HTTP-date (IMF-fixdate,
/// RFC 850 or asctime), as a delay from `now`. nullopt when malformed; a date
/// in the past gives zero.
std::optional<std::chrono::nanoseconds> parse_retry_after(std::string_view value,
                                                          std::chrono::system_clock::time_point now);

/// Escapes a string for a JSON string literal (without the quotes). Bytes
/// that are not valid UTF-8 become \ufffd: the result is always valid JSON.
std::string json_escape(std::string_view s);

}  // namespace steadfast::http
