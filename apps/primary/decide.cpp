#include "decide.hpp"

namespace steadfast::primary {

namespace {
// An answer's body goes into logs, dead letters and tombstones: its start is enough.
std::string head(std::string_view body) { return std::string(body.substr(0, 300)); }

decision make(verdict v, std::uint64_t upto = 0, std::uint64_t epoch = 0, std::string reason = {},
              std::string link_error = {}, std::string detail = {}) {
    return decision{v, upto, epoch, std::move(reason), std::move(link_error), std::move(detail)};
}
}  // namespace

decision decide(const sent_batch& b, const delivery_outcome& o) {
    using k = delivery_outcome::kind;
    if (o.what == k::stopped) return make(verdict::stop, 0, 0, "stopping");
    if (o.what == k::transport) return make(verdict::redeliver, 0, 0, "transport: " + o.detail, "transport");
    if (o.what == k::tls) return make(verdict::redeliver, 0, 0, "tls: " + o.detail, "tls");

    const unsigned s = o.status;
    if (s >= 200 && s < 300) return make(verdict::ack, b.last, 0, {}, {});
    if (s == 409) {
        const auto r = envelope::decode_rejection(o.body);
        using rk = envelope::rejection::kind;
        switch (r.what) {
            case rk::stale_epoch: return make(verdict::demote, 0, r.epoch, "stale_epoch", {});
            case rk::conflict:
                return make(verdict::block, 0, 0, "conflict", {},
                        "the secondary applied another message at seq " + std::to_string(r.seq));
            case rk::gap:
                if (r.expected > b.first) {
                    // The secondary has the start of the batch; never more than the batch.
                    const std::uint64_t upto = r.expected - 1 < b.last ? r.expected - 1 : b.last;
                    return make(verdict::ack, upto, 0, {}, {});
                }
                return make(verdict::rewind, r.expected - 1, 0, "rewind", {},
                        "the secondary expects seq " + std::to_string(r.expected) + ", below " +
                            std::to_string(b.first) + " that it had acknowledged");
            case rk::unknown: break;
        }
        return make(verdict::redeliver, 0, 0, "409 " + head(o.body), "http_409");
    }
    if (s == 400 || s == 413 || s == 422) {
        if (b.count() > 1) return make(verdict::isolate, 0, 0, std::to_string(s) + " " + head(o.body), {});
        return make(verdict::dead_letter, 0, 0, std::to_string(s) + " " + head(o.body), {});
    }
    std::string label = (s == 401 || s == 403) ? "auth" : "http_" + std::to_string(s);
    return make(verdict::redeliver, 0, 0, std::to_string(s) + " " + head(o.body), std::move(label));
}

decision decide_rewind(std::uint64_t expected, std::uint64_t oldest, std::uint64_t next_seq) {
    // Everything from `expected` on is still here (or nothing was ever
    // trimmed below it): resend from there.
    if (oldest != 0 && oldest <= expected) return make(verdict::rewind, expected - 1, 0, {}, {});
    if (oldest == 0 && expected >= next_seq) return make(verdict::rewind, expected - 1, 0, {}, {});
    return make(verdict::block, 0, 0, "beyond_retention", {},
            "the secondary expects seq " + std::to_string(expected) +
                (oldest ? ", the oldest retained is " + std::to_string(oldest) : std::string(", nothing is retained")));
}

}  // namespace steadfast::primary
