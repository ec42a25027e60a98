// Bearer tokens: read from --token-file, compared in constant time.
#pragma once

#include <string>
#include <string_view>

namespace steadfast::app {

/// The first line of `path`, trimmed. Throws std::runtime_error naming the
/// file when it cannot be read or the token is empty.
std::string read_token_file(const std::string& path);

/// Compares without an early exit, so the time does not tell how much matched.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

/// Whether an Authorization header value carries `token` as a Bearer token.
bool bearer_matches(std::string_view header_value, std::string_view token) noexcept;

}  // namespace steadfast::app
