#include "decide.hpp"

namespace steadfast::primary {

namespace {
// An answer's body goes into logs, dead letters and tombstones: its start is enough.
std::string head(std::string_view body) {
    return std::string(body.substr(0, 300));
}

decision make(verdict v, std::uint64_t upto = 0, std::uint64_t epoch = 0, std::string reason = {},
              link_fault link_error = {}, std::string detail = {}) {
    return decision{v, upto, epoch, std::move(reason), std::move(link_error), std::move(detail)};
}
}  // namespace

std::string link_fault::label() const {
    switch (what) {
        case kind::none:
            return {};
        case kind::transport:
            return "transport";
        case kind::tls:
            return "tls";
        case kind::auth:
            return "auth";
        case kind::http_status:
            return "http_" + std::to_string(status);
        case kind::foreign_status:
            return "foreign_" + std::to_string(status);
        case kind::jetstream_unavailable:
            return "jetstream_unavailable";
        case kind::jetstream_refused:
            return "jetstream_refused";
    }
    return {};
}

std::string_view hint_for(const decision& d) {
    using k = link_fault::kind;
    if (d.link_error.what == k::auth) return "check --token-file against the secondary's";
    if (d.epoch_refused)
        return "this primary's --epoch is more than the secondary's --max-epoch-step above its epoch fence: a "
               "failover raises the epoch by one; restart this primary with the right --epoch (the messages are "
               "kept and sent in order then)";
    if (d.not_a_secondary)
        return "is --secondary the address of a steadfast-secondary? (its answer is not one a secondary gives)";
    switch (d.link_error.what) {
        case k::transport:
            if (d.no_answer_in_time)
                return "the request was sent but no answer came within --attempt-timeout: the secondary is slow "
                       "or hung, or the network dropped the connection; if its /health answers, raise "
                       "--attempt-timeout above its answer time (a resend is deduplicated: what it applied "
                       "meanwhile is not applied twice)";
            return "is the secondary running and reachable? (if it serves HTTPS, --secondary must be https://)";
        case k::jetstream_unavailable:
            return "are the NATS servers of --secondary running, with JetStream on, and does the stream have a "
                   "leader?";
        case k::jetstream_refused:
            return "JetStream refused the publish: check the account's permissions and limits and the stream's "
                   "configuration";
        case k::tls:
            return "check --tls-ca (the CA that signed the secondary's certificate), --tls-server-name, "
                   "--tls-cert/--tls-key if the secondary asks for a certificate, and that the secondary serves HTTPS";
        default:
            return "the secondary is failing; messages are kept and sent again";
    }
}

decision decide(const sent_batch& b, const delivery_outcome& o) {
    using k = delivery_outcome::kind;
    if (o.what == k::stopped) return make(verdict::stop, 0, 0, "stopping");
    if (o.what == k::transport) {
        decision d = make(verdict::redeliver, 0, 0, "transport: " + o.detail, {link_fault::kind::transport});
        d.no_answer_in_time = o.no_answer_in_time;
        return d;
    }
    if (o.what == k::tls) return make(verdict::redeliver, 0, 0, "tls: " + o.detail, {link_fault::kind::tls});

    const unsigned s = o.status;
    if (s >= 200 && s < 300) return make(verdict::ack, b.last, 0, {}, {});
    if (s == 409) {
        const auto r = envelope::decode_rejection(o.body);
        using rk = envelope::rejection::kind;
        switch (r.what) {
            case rk::stale_epoch:
                return make(verdict::demote, 0, r.epoch, "stale_epoch", {});
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
                            "the secondary expects seq " + std::to_string(r.expected) +
                                ", though it had acknowledged at least up to " + std::to_string(b.first - 1));
            case rk::unknown:
                break;
        }
        return make(verdict::redeliver, 0, 0, "409 " + head(o.body), {link_fault::kind::http_status, 409});
    }
    if (s == 400 || s == 413 || s == 422) {
        const auto refusal = envelope::classify_refusal(o.body);
        // The secondary could not read the request's HTTP framing: something
        // on the way mangled it (a proxy), the messages are not at fault.
        if (s == 400 && refusal == envelope::refusal::framing)
            return make(verdict::redeliver, 0, 0, "400 " + head(o.body), {link_fault::kind::http_status, 400});
        // This primary's epoch is refused (every message it sends carries it):
        // kept and sent again, on the ladder, until --epoch is fixed. Dead-
        // lettered, a requeue would deliver it after the messages behind it.
        if (s == 400 && refusal == envelope::refusal::epoch_step) {
            auto d = make(verdict::redeliver, 0, 0, "400 " + head(o.body), {link_fault::kind::http_status, 400});
            d.epoch_refused = true;
            return d;
        }
        // Not the secondary's refusal (a proxy's page, another service at a
        // wrong address): the link is wrong, not the message.
        if (refusal == envelope::refusal::not_an_error_answer) {
            auto d = make(verdict::redeliver, 0, 0, std::to_string(s) + " " + head(o.body),
                          {link_fault::kind::foreign_status, s});
            d.not_a_secondary = true;
            return d;
        }
        if (b.count() > 1) return make(verdict::isolate, 0, 0, std::to_string(s) + " " + head(o.body), {});
        return make(verdict::dead_letter, 0, 0, std::to_string(s) + " " + head(o.body), {});
    }
    const link_fault f =
        (s == 401 || s == 403) ? link_fault{link_fault::kind::auth, s} : link_fault{link_fault::kind::http_status, s};
    auto d = make(verdict::redeliver, 0, 0, std::to_string(s) + " " + head(o.body), f);
    // A secondary serves POST /api/messages with JSON: an answer that says the
    // route, the method or the type is unknown (or a method it never heard
    // of) comes from something else.
    d.not_a_secondary = s == 404 || s == 405 || s == 415 || s == 501;
    return d;
}

decision decide_rewind(std::uint64_t expected, std::uint64_t oldest, std::uint64_t next_seq) {
    // Everything from `expected` on is still here (or nothing was ever
    // trimmed below it): resend from there.
    if (oldest != 0 && oldest <= expected) return make(verdict::rewind, expected - 1, 0, {}, {});
    if (oldest == 0 && expected >= next_seq) return make(verdict::rewind, expected - 1, 0, {}, {});
    return make(
        verdict::block, 0, 0, "beyond_retention", {},
        "the secondary expects seq " + std::to_string(expected) +
            (oldest ? ", the oldest retained is " + std::to_string(oldest) : std::string(", nothing is retained")));
}

decision decide_repair(std::uint64_t from, std::uint64_t acked, std::uint64_t oldest, std::uint64_t next_seq) {
    if (from == 0 || from > acked)
        return make(verdict::ack, acked, 0, {}, {}, "seq " + std::to_string(from) + " was not acknowledged yet");
    return decide_rewind(from, oldest, next_seq);
}

decision decide_publish(const sent_batch& b, const publish_outcome& o) {
    using k = publish_outcome::kind;
    switch (o.what) {
        case k::published:
            return make(verdict::ack, b.last, 0, {}, {});
        case k::wrong_sequence:
            return make(verdict::resync, 0, 0, "wrong_last_sequence", {},
                        "the subject's last message is not this primary's last");
        case k::unavailable:
            return make(verdict::redeliver, 0, 0, "jetstream unavailable: " + o.detail,
                        {link_fault::kind::jetstream_unavailable});
        case k::refused:
            return make(verdict::redeliver, 0, 0, "jetstream refused: " + o.detail,
                        {link_fault::kind::jetstream_refused});
        case k::too_large:
            if (b.count() > 1) return make(verdict::isolate, 0, 0, "too large: " + o.detail, {});
            return make(
                verdict::block, 0, 0, "too_large_for_server", {},
                "seq " + std::to_string(b.first) + " is larger than the NATS server's max_payload: " + o.detail);
        case k::stopped:
            return make(verdict::stop, 0, 0, "stopping");
    }
    return make(verdict::stop, 0, 0, "stopping");
}

decision decide_log(const log_head& h, std::uint64_t own_epoch, const outbox_facts& f) {
    if (!h.empty && !h.envelope)
        return make(verdict::block, 0, 0, "conflict", {},
                    "the subject's last message in the log is not an envelope of this stream");
    if (!h.empty && h.epoch > own_epoch) return make(verdict::demote, 0, h.epoch, "stale_epoch", {});
    if (h.empty) {
        if (f.acked == 0) return make(verdict::ack, 0, 0, {}, {});
        auto d = decide_rewind(1, f.oldest, f.next_seq);
        d.detail = "the log has no message of the stream, " + std::to_string(f.acked) + " were acknowledged" +
                   (d.detail.empty() ? std::string{} : "; " + d.detail);
        return d;
    }
    if (h.seq >= f.next_seq)
        return make(verdict::block, 0, 0, "conflict", {},
                    "the log has seq " + std::to_string(h.seq) + " of the stream, beyond the " +
                        std::to_string(f.next_seq - 1) + " this primary assigned: another primary writes it");
    if (f.id_at_head && *f.id_at_head != h.id)
        return make(verdict::block, 0, 0, "conflict", {},
                    "the log has another message at seq " + std::to_string(h.seq) + " (id " + h.id + ")");
    if (h.seq < f.acked) {
        auto d = decide_rewind(h.seq + 1, f.oldest, f.next_seq);
        d.detail = "the log ends at seq " + std::to_string(h.seq) + ", below the " + std::to_string(f.acked) +
                   " acknowledged" + (d.detail.empty() ? std::string{} : "; " + d.detail);
        return d;
    }
    return make(verdict::ack, h.seq, 0, {}, {});
}

std::vector<part_fate> split_answer(const std::vector<std::string_view>& streams, bool answered, unsigned status,
                                    std::string_view body) {
    std::vector<part_fate> fates(streams.size(), part_fate::answer);
    if (streams.size() < 2 || !answered) return fates;
    if (status == 400 || status == 413 || status == 422) {
        // The secondary's own refusal is of some message: each part alone
        // finds out whose. Anyone else's is everyone's (decide()).
        const auto r = envelope::classify_refusal(body);
        const bool of_no_message =
            status == 400 && (r == envelope::refusal::framing || r == envelope::refusal::epoch_step);
        if (r != envelope::refusal::not_an_error_answer && !of_no_message)
            fates.assign(streams.size(), part_fate::resend_alone);
        return fates;
    }
    if (status != 409) return fates;
    const auto r = envelope::decode_rejection(body);
    using rk = envelope::rejection::kind;
    if (r.what == rk::stale_epoch) return fates;
    bool named = false;
    for (std::size_t i = 0; i < streams.size(); ++i) {
        // Each stream has one batch in flight: at most one part is named.
        if ((r.what == rk::conflict || r.what == rk::gap) && streams[i] == r.stream && !named) {
            named = true;
        } else {
            fates[i] = part_fate::resend;
        }
    }
    // A 409 naming none of them (not the secondary's: a proxy's?) would make
    // each stream read another's expected seq: each finds out alone.
    if (!named) fates.assign(streams.size(), part_fate::resend_alone);
    return fates;
}

}  // namespace steadfast::primary
