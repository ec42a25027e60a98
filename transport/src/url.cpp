// URLs and request targets, parsed by Boost.URL (RFC 3986; percent-decoding
// included): the client's base URL and the query parameters the apps read.
// Apart from the Beast translation units, so that URL changes rebuild little.
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <vector>

namespace steadfast::http {

namespace urls = boost::urls;

std::string_view path_of(std::string_view target) noexcept {
    auto q = target.find('?');
    return q == std::string_view::npos ? target : target.substr(0, q);
}

namespace {
// The raw name=value pairs of a target that is not valid origin-form,
// undecoded, in order: `fn(name, value)` until it returns true.
template <class Fn>
void for_each_raw_param(std::string_view target, Fn fn) {
    auto q = target.find('?');
    if (q == std::string_view::npos) return;
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
        const auto amp = rest.find('&');
        const std::string_view pair = rest.substr(0, amp);
        const auto eq = pair.find('=');
        if (fn(pair.substr(0, eq), eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1))) return;
        if (amp == std::string_view::npos) return;
        rest.remove_prefix(amp + 1);
    }
}
}  // namespace

std::size_t query_param_count(std::string_view target, std::string_view name) {
    if (auto u = urls::parse_origin_form(target)) return u->params().count(name);
    std::size_t n = 0;
    for_each_raw_param(target, [&](std::string_view key, std::string_view) {
        n += key == name;
        return false;
    });
    return n;
}

std::string unknown_query_params(std::string_view target, std::initializer_list<std::string_view> known) {
    std::vector<std::string> names;
    auto note = [&](std::string_view key) {
        for (auto k : known)
            if (k == key) return;
        std::string shown = key.empty() ? std::string("\"\"") : std::string(key);
        if (std::find(names.begin(), names.end(), shown) == names.end()) names.push_back(std::move(shown));
    };
    if (auto u = urls::parse_origin_form(target)) {
        if (!u->encoded_query().empty())
            for (auto p : u->params())                           // percent-decoded
                if (!p.key.empty() || p.has_value) note(p.key);  // "?a=1&" has an empty last one: no parameter
    } else {
        for_each_raw_param(target, [&](std::string_view key, std::string_view value) {
            if (!key.empty() || !value.empty()) note(key);
            return false;
        });
    }
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

std::optional<std::string> query_param(std::string_view target, std::string_view name) {
    auto u = urls::parse_origin_form(target);
    if (u) {
        for (auto p : u->params())
            if (p.key == name) return std::string(p.value);  // percent-decoded ("%2E" is ".", "+" a space)
        return std::nullopt;
    }
    // Not a valid origin-form target: the raw value, undecoded, so that the
    // caller's own check refuses it rather than a default being used.
    std::optional<std::string> found;
    for_each_raw_param(target, [&](std::string_view key, std::string_view value) {
        if (key == name) found.emplace(value);
        return found.has_value();
    });
    return found;
}

client::options client::from_url(std::string_view url) {
    // (appended, not "\"" + std::string(url) + ...: g++ 12 at -O3 warns falsely
    // of an overlap, -Wrestrict, as in sqlite.cpp's schema guard)
    std::string quoted;
    quoted.reserve(url.size() + 2);
    quoted.append(1, '"').append(url).append(1, '"');
    auto r = urls::parse_absolute_uri(url);
    if (!r) {
        if (url.find("://") == std::string_view::npos)
            throw std::invalid_argument(quoted + " is not an http:// or https:// URL");
        throw std::invalid_argument(quoted + " is not a valid URL: " + r.error().message());
    }
    const urls::url_view& u = *r;
    options o;
    std::string_view default_port;
    if (u.scheme_id() == urls::scheme::http) {
        default_port = "80";
    } else if (u.scheme_id() == urls::scheme::https) {
        default_port = "443";
        o.tls.emplace();
    } else {
        throw std::invalid_argument(quoted + " is not an http:// or https:// URL");
    }
    if (u.has_userinfo())
        throw std::invalid_argument(quoted + ": credentials in the URL are not supported (use --token-file)");
    if (u.has_query() || u.has_fragment() || !(u.encoded_path().empty() || u.encoded_path() == "/"))
        throw std::invalid_argument(quoted + ": give only scheme, host and port");
    if (u.host_type() == urls::host_type::ipvfuture) throw std::invalid_argument(quoted + ": unsupported address");
    // host_address(): percent-decoded, IPv6 without its brackets.
    o.host = u.host_address();
    if (o.host.empty()) throw std::invalid_argument(quoted + " has no host");
    if (u.has_port()) {
        const std::string_view port = u.port();
        unsigned long p = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || p == 0 || p > 65535)
            throw std::invalid_argument(quoted + ": port must be 1 to 65535");
        o.port = std::string(port);
    } else {
        o.port = std::string(default_port);
    }
    return o;
}

}  // namespace steadfast::http
