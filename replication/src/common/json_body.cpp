#include "json_body.hpp"

#include <steadfast/transport/server.hpp>

#include <boost/beast/core/string.hpp>

#include <string>

namespace steadfast::app {

namespace {
http::response given_twice(unsigned status, std::string_view name) {
    return http::response::error(status, std::string(name) + " is given more than once; give it once");
}

bool is_identity(std::string_view coding) {
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) coding.remove_prefix(1);
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) coding.remove_suffix(1);
    return coding.empty() || boost::beast::iequals(coding, "identity");
}
}  // namespace

std::optional<http::response> refuse_json_body(const http::request& req, std::initializer_list<std::string_view> once) {
    // 415, not 400: a primary reads a 400 from its secondary as its
    // message's fault (a dead letter), and a header doubled on the way (a
    // proxy) is not.
    if (http::header_count(req.headers, "Content-Type") > 1) return given_twice(415, "Content-Type");
    for (const auto name : once)
        if (http::header_count(req.headers, name) > 1) return given_twice(400, name);
    if (!http::is_json(req)) return http::response::error(415, "Content-Type must be application/json");
    // Without a length or chunks a request has no body (RFC 9112 6.3): what
    // a client sent after its header would be read as the next request.
    if (req.body.empty() && http::header_count(req.headers, "Content-Length") == 0 &&
        http::header_count(req.headers, "Transfer-Encoding") == 0) {
        // What the client sent after its header cannot be read as a request: closed.
        auto r = http::response::error(411,
                                       "Content-Length is required (or a chunked body): without it the "
                                       "request has no body");
        r.set("Connection", "close");
        return r;
    }
    for (const auto& h : req.headers) {
        if (!boost::beast::iequals(h.name, "Content-Encoding") || is_identity(h.value)) continue;
        std::string coding = h.value.substr(0, 40);
        for (char& c : coding)
            if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
        return http::response::error(
            415, "Content-Encoding \"" + coding + "\" is not supported: send the JSON body uncompressed");
    }
    return std::nullopt;
}

}  // namespace steadfast::app
