// Plain helpers: headers, Retry-After, JSON escaping. No Beast here.
#include "utf8.hpp"

#include <steadfast/transport/http.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>

namespace steadfast::http {

namespace {
bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}
}  // namespace

std::optional<std::string_view> find_header(const std::vector<header>& headers, std::string_view name) {
    for (const auto& h : headers)
        if (iequals(h.name, name)) return std::string_view(h.value);
    return std::nullopt;
}

std::size_t header_count(const std::vector<header>& headers, std::string_view name) {
    std::size_t n = 0;
    for (const auto& h : headers) n += iequals(h.name, name) ? 1 : 0;
    return n;
}

void set_header(std::vector<header>& headers, std::string name, std::string value) {
    for (auto& h : headers)
        if (iequals(h.name, name)) {
            h.value = std::move(value);
            return;
        }
    headers.push_back({std::move(name), std::move(value)});
}

request& request::set(std::string name, std::string value) {
    set_header(headers, std::move(name), std::move(value));
    return *this;
}

response& response::set(std::string name, std::string value) {
    set_header(headers, std::move(name), std::move(value));
    return *this;
}

response response::json(unsigned status, std::string body) {
    response r;
    r.status = status;
    r.body = std::move(body);
    r.headers.push_back({"Content-Type", "application/json"});
    return r;
}

response response::error(unsigned status, std::string_view message) {
    return json(status, "{\"error\":\"" + json_escape(message) + "\"}");
}

bool is_idempotent_method(std::string_view m) noexcept {
    return m == "GET" || m == "HEAD" || m == "PUT" || m == "DELETE" || m == "OPTIONS" || m == "TRACE";
}

std::string json_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const char c = s[i];
        switch (c) {
            case '"':
                out += "\\\"";
                ++i;
                continue;
            case '\\':
                out += "\\\\";
                ++i;
                continue;
            case '\n':
                out += "\\n";
                ++i;
                continue;
            case '\r':
                out += "\\r";
                ++i;
                continue;
            case '\t':
                out += "\\t";
                ++i;
                continue;
            default:
                break;
        }
        if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += buf;
            ++i;
            continue;
        }
        // Bytes that are not UTF-8 (an echo of binary input, a cut sequence)
        // become U+FFFD, so that the result is always valid JSON text.
        const std::size_t n = detail::utf8_sequence(s, i);
        if (n == 0) {
            out += "\\ufffd";
            ++i;
            continue;
        }
        out.append(s.substr(i, n));
        i += n;
    }
    return out;
}

namespace {
int month_index(std::string_view m) {
    static constexpr std::string_view names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (int i = 0; i < 12; ++i)
        if (names[i] == m) return i;
    return -1;
}

// Parses the three HTTP-date forms of RFC 9110 5.6.7 into a UTC time_t.
std::optional<std::time_t> parse_http_date(std::string_view v) {
    std::tm tm{};
    char wk[16] = {}, mon[4] = {};
    int day = 0, year = 0, hh = 0, mm = 0, ss = 0, used = 0;
    const std::string s(v);
    if (std::sscanf(s.c_str(), "%15[A-Za-z], %d %3s %d %d:%d:%d GMT%n", wk, &day, mon, &year, &hh, &mm, &ss, &used) ==
            7 &&
        used == static_cast<int>(s.size())) {
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
    } else if (std::sscanf(s.c_str(), "%15[A-Za-z], %d-%3s-%d %d:%d:%d GMT%n", wk, &day, mon, &year, &hh, &mm, &ss,
                           &used) == 7 &&
               used == static_cast<int>(s.size())) {
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        year += year < 70 ? 2000 : (year < 100 ? 1900 : 0);
    } else if (std::sscanf(s.c_str(), "%15[A-Za-z] %3s %d %d:%d:%d %d%n", wk, mon, &day, &hh, &mm, &ss, &year, &used) ==
                   7 &&
               used == static_cast<int>(s.size())) {
        // asctime: Sun Nov  6 08:49:37 1994
    } else {
        return std::nullopt;
    }
    const int m = month_index(mon);
    if (m < 0 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 || year < 1970 || hh < 0 || mm < 0 || ss < 0)
        return std::nullopt;
    tm.tm_year = year - 1900;
    tm.tm_mon = m;
    tm.tm_mday = day;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    return timegm(&tm);
}
}  // namespace

std::optional<std::chrono::nanoseconds> parse_retry_after(std::string_view v,
                                                          std::chrono::system_clock::time_point now) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    if (v.empty()) return std::nullopt;
    if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        std::uint64_t secs = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
        if (ec == std::errc::result_out_of_range || secs > 100ull * 365 * 24 * 3600)
            return std::chrono::nanoseconds(std::chrono::hours(24 * 365 * 100));  // absurd: the caller bounds it
        if (ec != std::errc()) return std::nullopt;
        return std::chrono::seconds(secs);
    }
    auto t = parse_http_date(v);
    if (!t) return std::nullopt;
    const auto at = std::chrono::system_clock::from_time_t(*t);
    if (at <= now) return std::chrono::nanoseconds(0);
    return std::chrono::duration_cast<std::chrono::nanoseconds>(at - now);
}

}  // namespace steadfast::http
