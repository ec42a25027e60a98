// The transport's own reading of UTF-8 (json_escape, a health check's
// excerpt of an answer).
#pragma once

#include <cstddef>
#include <string_view>

namespace steadfast::http::detail {

/// The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlongs, no
/// surrogates, at most U+10FFFF), or 0 when the bytes there are not one.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (!cont(1) || !cont(2)) return 0;
        if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
        if (c == 0xED && b(1) > 0x9F) return 0;  // surrogate
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!cont(1) || !cont(2) || !cont(3)) return 0;
        if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
        if (c == 0xF4 && b(1) > 0x8F) return 0;  // over U+10FFFF
        return 4;
    }
    return 0;
}

}  // namespace steadfast::http::detail
