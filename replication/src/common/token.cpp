#include "token.hpp"

#include <boost/beast/core/string.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>

namespace steadfast::app {

namespace {
// The first byte of `t` outside printable ASCII (a space is printable here),
// as "0xNN"; nullopt when there is none.
std::optional<std::string> unprintable_byte(std::string_view t) {
    for (unsigned char c : t)
        if (c < 0x20 || c > 0x7e) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", c);
            return std::string(hex);
        }
    return std::nullopt;
}
}  // namespace

std::vector<std::string> read_token_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::invalid_argument("cannot read --token-file \"" + path + "\": " + std::strerror(errno));
    std::vector<std::string> tokens;
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
        if (n == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 BOM
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        std::size_t i = 0;
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        line.erase(0, i);
        if (line.empty() || line.front() == '#') continue;
        // A token travels in an HTTP header: printable ASCII only. (A file
        // saved as UTF-16, or with stray control characters, is refused here
        // rather than sent as a header the other side cannot parse.)
        if (auto bad = unprintable_byte(line))
            throw std::invalid_argument("--token-file \"" + path + "\" line " + std::to_string(n) + ": byte " + *bad +
                                        " cannot be part of a bearer token (printable ASCII only; is the file "
                                        "UTF-16 or does it hold control characters?)");
        // Nor inside one (RFC 6750's token has none): "a b" on a line is
        // most likely two tokens meant for two lines.
        if (line.find_first_of(" \t") != std::string::npos)
            throw std::invalid_argument("--token-file \"" + path + "\" line " + std::to_string(n) +
                                        ": a token cannot hold spaces (one token a line)");
        tokens.push_back(line);
    }
    if (f.bad()) throw std::runtime_error("cannot read --token-file \"" + path + "\": " + std::strerror(errno));
    if (tokens.empty()) throw std::invalid_argument("--token-file \"" + path + "\" holds no token (one a line)");
    return tokens;
}

void check_tokens(const std::vector<std::string>& tokens, std::string_view setting) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const std::string where = std::string(setting) + "[" + std::to_string(i) + "]";
        if (tokens[i].empty()) throw std::invalid_argument(where + " is empty: a bearer token has at least one byte");
        auto bad = unprintable_byte(tokens[i]);
        if (!bad && tokens[i].find(' ') != std::string::npos) bad = "0x20";
        if (bad)
            throw std::invalid_argument(where + ": byte " + *bad +
                                        " cannot be part of a bearer token (printable ASCII without spaces: it "
                                        "travels in an HTTP header; a line read with its newline?)");
    }
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
    // Length differences are not secret enough to hide here, but the loop
    // still runs over the expected token's length.
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < b.size(); ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ static_cast<unsigned char>(b[i]));
    }
    return diff == 0;
}

bool bearer_matches(std::string_view v, std::string_view token) noexcept {
    // RFC 6750: "Bearer" 1*SP b64token, the scheme in any case.
    constexpr std::string_view prefix = "Bearer ";
    if (!boost::beast::iequals(v.substr(0, prefix.size()), prefix)) return false;
    v.remove_prefix(prefix.size());
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return constant_time_equal(v, token);
}

bool bearer_matches(std::string_view v, const std::vector<std::string>& tokens) noexcept {
    bool any = false;
    for (const auto& t : tokens) any |= bearer_matches(v, t);  // no early exit
    return any;
}

std::optional<http::response> refuse_unauthorized(const http::request& req, const std::vector<std::string>& tokens) {
    if (tokens.empty()) return std::nullopt;
    // Two of them: a proxy reading the last and this server the first would
    // disagree about who was let in. (401, not 400: a primary reads a 400
    // from its secondary as its message's fault.)
    if (http::header_count(req.headers, "Authorization") > 1) {
        auto r = http::response::error(401, "Authorization is given more than once; give it once");
        r.set("WWW-Authenticate", "Bearer");
        return r;
    }
    auto auth = req.get("Authorization");
    if (auth && bearer_matches(*auth, tokens)) return std::nullopt;
    auto r = http::response::error(401, auth ? "wrong bearer token" : "missing bearer token");
    r.set("WWW-Authenticate", "Bearer");
    return r;
}

}  // namespace steadfast::app
