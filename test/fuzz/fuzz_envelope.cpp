// libFuzzer target: envelope decoding. Whatever decodes must encode and decode
// again to the same messages, payload text included; the fast validator
// (simdjson) accepts nothing the reference (nlohmann) refuses; and a payload
// the primary accepts decodes in an envelope, unchanged. Run: bash test/fuzz/run.sh [seconds]
#include <steadfast/replication/envelope.hpp>

#include <nlohmann/json.hpp>

#include <simdjson.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace steadfast;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    // decode() takes simdjson's "valid" as final: it must never accept what
    // nlohmann (the reference, with positions in its errors) refuses.
    static simdjson::dom::parser parser;
    if (!parser.parse(body.data(), body.size(), true).error() && !nlohmann::json::accept(body)) std::abort();
    // What the primary accepts as a payload, a secondary accepts in an
    // envelope, with the payload byte for byte (a NUL once slipped through).
    if (auto p = envelope::check_payload(body, envelope::encoded_size("id", "s", 1, 0, 0)); p.index() == 0) {
        const auto payload = std::get<std::string_view>(p);
        std::string env;
        envelope::encode_to(env, "id", "s", 1, 0, payload);
        auto e = envelope::decode(env);
        auto* ed = std::get_if<envelope::decoded>(&e);
        if (!ed || std::get<envelope::message>(*ed).payload != payload) std::abort();
    }
    auto r = envelope::decode(body);
    auto* d = std::get_if<envelope::decoded>(&r);
    if (!d) {
        if (std::get<envelope::decode_error>(r).what.empty()) std::abort();  // every error names its problem
        return 0;
    }
    const std::string again = std::visit([](const auto& v) { return envelope::encode(v); }, *d);
    auto r2 = envelope::decode(again);
    auto* d2 = std::get_if<envelope::decoded>(&r2);
    if (!d2 || d2->index() != d->index()) std::abort();
    if (auto* m = std::get_if<envelope::message>(d)) {
        const auto& m2 = std::get<envelope::message>(*d2);
        if (m->id != m2.id || m->stream != m2.stream || m->seq != m2.seq || m->epoch != m2.epoch ||
            m->payload != m2.payload)
            std::abort();
    }
    return 0;
}
