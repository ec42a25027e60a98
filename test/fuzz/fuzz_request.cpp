// libFuzzer target: the server's request handling apart from sockets: the
// same parser and limits (parse_request), routing, and the envelope decoding a
// message endpoint does. Run: bash test/fuzz/run.sh [seconds]
#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/server.hpp>

#include <cstdint>
#include <cstdlib>

using namespace steadfast;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const http::server::options opts = [] {
        http::server::options o;
        o.max_body_bytes = 64 * 1024;
        o.max_header_bytes = 8 * 1024;
        return o;
    }();
    static const http::router routes = [] {
        http::router r;
        r.add("POST", "/api/messages", {}).add("GET", "/health", {}).add("GET", "/metrics", {});
        return r;
    }();
    auto parsed = http::parse_request(std::string_view(reinterpret_cast<const char*>(data), size), opts);
    if (parsed.error) {
        const unsigned s = parsed.error->status;
        if (s != 400 && s != 413 && s != 431) std::abort();  // only the documented answers
        return 0;
    }
    if (!parsed.req) return 0;  // incomplete: the server would read on
    if (parsed.req->body.size() > opts.max_body_bytes) std::abort();
    http::response err;
    if (!routes.find(parsed.req->method, parsed.req->target, err)) {
        if (err.status != 404 && err.status != 405) std::abort();
        return 0;
    }
    if (http::path_of(parsed.req->target) == "/api/messages" && http::is_json(*parsed.req))
        (void)envelope::decode(parsed.req->body);
    return 0;
}
