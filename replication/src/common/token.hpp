// Bearer tokens: read from --token-file, compared in constant time.
#pragma once

#include <steadfast/transport/http.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::app {

/// The tokens in `path`, one a line, trimmed (blank lines and lines starting
/// with '#' are skipped; a comment is a whole line; a UTF-8 BOM is dropped).
/// Each token is printable ASCII: anything else is refused, naming the line. Any of them is accepted; the first is the
/// one a client sends. Several tokens let a token be rotated without downtime: add the new one, reload (SIGHUP), move
/// clients over, drop the old one, reload. Throws std::invalid_argument (a bad configuration file: the apps exit 2 at
/// start) naming the file when it cannot be opened, holds no token or a byte
/// that cannot be part of one; std::runtime_error when reading it fails
/// midway (an I/O error, perhaps passing).
std::vector<std::string> read_token_file(const std::string& path);

/// Refuses (std::invalid_argument naming `setting`[i]) a token that is empty
/// or holds a byte a bearer token cannot (anything but printable ASCII, a
/// space included): it travels in an HTTP header, where a CR or LF would end
/// the header or a request.
void check_tokens(const std::vector<std::string>& tokens, std::string_view setting);

/// Compares without an early exit, so the time does not tell how much matched.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

/// Whether an Authorization header value carries `token` as a Bearer token.
bool bearer_matches(std::string_view header_value, std::string_view token) noexcept;
/// Whether it carries any of `tokens` (each compared in full).
bool bearer_matches(std::string_view header_value, const std::vector<std::string>& tokens) noexcept;

/// The 401 answer (with WWW-Authenticate) for a request without one of
/// `tokens` as its Bearer token; nullopt when it has one or no token is set.
std::optional<http::response> refuse_unauthorized(const http::request& req, const std::vector<std::string>& tokens);

}  // namespace steadfast::app
