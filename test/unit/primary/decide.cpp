// The primary's decision table: every row, without sockets or timers.
#include <primary/decide.hpp>

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string_view>
#include <vector>

using namespace steadfast;
using namespace steadfast::primary;

namespace {
delivery_outcome answer(unsigned status, std::string body = "{}") {
    delivery_outcome o;
    o.status = status;
    o.body = std::move(body);
    return o;
}
const sent_batch batch{11, 20};  // ten messages
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_decide)

BOOST_AUTO_TEST_CASE(success_acknowledges_the_batch) {
    auto d = decide(batch, answer(200));
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 20u);
}

BOOST_AUTO_TEST_CASE(a_gap_acknowledges_only_within_the_batch) {
    auto d = decide(batch, answer(409, R"({"error":"gap","stream":"s","expected":15})"));
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 14u);
    // An expected seq beyond the batch acknowledges the batch, never more.
    d = decide(batch, answer(409, R"({"error":"gap","stream":"s","expected":500})"));
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 20u);
}

BOOST_AUTO_TEST_CASE(a_gap_below_the_batch_is_a_rewind_within_retention) {
    auto d = decide(batch, answer(409, R"({"error":"gap","stream":"s","expected":4})"));
    BOOST_TEST((d.what == verdict::rewind));
    BOOST_TEST(d.upto == 3u);
    BOOST_TEST(d.detail == "the secondary expects seq 4, though it had acknowledged at least up to " +
                               std::to_string(batch.first - 1));
    auto r = decide_rewind(4, 1, 21);  // seqs 1.. still retained
    BOOST_TEST((r.what == verdict::rewind));
    BOOST_TEST(r.upto == 3u);
    r = decide_rewind(4, 9, 21);  // 4..8 were purged
    BOOST_TEST((r.what == verdict::block));
    BOOST_TEST(r.reason == "beyond_retention");
    r = decide_rewind(4, 0, 21);  // nothing retained at all
    BOOST_TEST((r.what == verdict::block));
    // Nothing retained, and the secondary expects exactly the next seq to be
    // assigned: nothing is missing, so it is a rewind (to where it is), not a block.
    r = decide_rewind(21, 0, 21);
    BOOST_TEST((r.what == verdict::rewind));
    BOOST_TEST(r.upto == 20u);
    BOOST_TEST((decide_rewind(20, 0, 21).what == verdict::block));  // seq 20 is missing
}

BOOST_AUTO_TEST_CASE(conflict_blocks_and_stale_epoch_demotes) {
    auto d = decide(batch, answer(409, R"({"error":"conflict","stream":"s","seq":12})"));
    BOOST_TEST((d.what == verdict::block));
    BOOST_TEST(d.reason == "conflict");
    BOOST_TEST(d.detail.find("seq 12") != std::string::npos);
    d = decide(batch, answer(409, R"({"error":"stale_epoch","epoch":7})"));
    BOOST_TEST((d.what == verdict::demote));
    BOOST_TEST(d.epoch == 7u);
    // A 409 that says nothing known: the secondary is wrong, not the message.
    d = decide(batch, answer(409, "<html>conflict</html>"));
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "http_409");
}

BOOST_AUTO_TEST_CASE(only_400_413_422_reject_messages) {
    const std::string refusal = R"({"error":"payload is not JSON"})";
    for (unsigned s : {400u, 413u, 422u}) {
        BOOST_TEST((decide(batch, answer(s, refusal)).what == verdict::isolate));
        BOOST_TEST((decide(sent_batch{5, 5}, answer(s, refusal)).what == verdict::dead_letter));
        // Without the secondary's {"error":..} (a proxy's page, another
        // service at a wrong address): the link is wrong, not the message.
        for (const char* foreign : {"<html>Bad Request</html>", "{}", "", R"({"error":7})"}) {
            auto d = decide(sent_batch{5, 5}, answer(s, foreign));
            BOOST_TEST((d.what == verdict::redeliver), s << " " << foreign);
            BOOST_TEST(d.link_error.label() == "foreign_" + std::to_string(s));
            BOOST_TEST(d.not_a_secondary);
        }
        BOOST_TEST(!decide(sent_batch{5, 5}, answer(s, refusal)).not_a_secondary);
    }
    // The secondary's own 400 for a request it could not frame (a proxy
    // mangled it: two Content-Length, a bad chunk): the link's fault, as
    // the transport server words it.
    http::server::options limits;
    const auto framing =
        http::parse_request("POST /api/messages HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", limits);
    BOOST_REQUIRE(framing.error.has_value());
    BOOST_TEST(framing.error->status == 400u);
    for (const sent_batch& b : {batch, sent_batch{5, 5}}) {
        auto d = decide(b, answer(400, framing.error->body));
        BOOST_TEST((d.what == verdict::redeliver), framing.error->body);
        BOOST_TEST(d.link_error.label() == "http_400");
        BOOST_TEST(!d.not_a_secondary);
    }
    BOOST_TEST((split_answer({"a", "b"}, true, 400, framing.error->body) ==
                std::vector<part_fate>{part_fate::answer, part_fate::answer}));
    BOOST_TEST((decide(sent_batch{5, 5}, answer(413, framing.error->body)).what == verdict::dead_letter));  // 400 only
    for (unsigned s : {401u, 403u, 404u, 405u, 415u, 418u, 429u, 500u, 501u, 502u, 503u, 504u, 599u}) {
        auto d = decide(sent_batch{5, 5}, answer(s));
        BOOST_TEST((d.what == verdict::redeliver), "status " << s);
        BOOST_TEST(d.link_error.label() == (s == 401 || s == 403 ? std::string("auth") : "http_" + std::to_string(s)));
        // Routes, methods and a type every secondary has: the address is wrong.
        BOOST_TEST(d.not_a_secondary == (s == 404 || s == 405 || s == 415 || s == 501), "status " << s);
    }
    BOOST_TEST(!decide(batch, answer(409, "<html>conflict</html>")).not_a_secondary);
}

// The secondary refusing this primary's epoch as more than its
// --max-epoch-step above its fence: every message carries that epoch, so no
// message is at fault. Kept and sent again (dead-lettered, a requeue would
// deliver it after the ones behind it), with a hint naming --epoch.
BOOST_AUTO_TEST_CASE(an_epoch_refused_as_too_far_above_the_fence_keeps_the_messages) {
    const std::string body = envelope::encode_epoch_step_refusal(1765000000, 1000, 0);
    BOOST_TEST(envelope::is_epoch_step_refusal(body));
    for (const sent_batch& b : {batch, sent_batch{5, 5}}) {
        auto d = decide(b, answer(400, body));
        BOOST_TEST((d.what == verdict::redeliver), body);
        BOOST_TEST(d.epoch_refused);
        BOOST_TEST(d.link_error.label() == "http_400");
        BOOST_TEST(std::string(hint_for(d)).find("--epoch") != std::string::npos, hint_for(d));
    }
    // A shared request's refusal is everyone's: no part is sent alone to find whose.
    BOOST_TEST(
        (split_answer({"a", "b"}, true, 400, body) == std::vector<part_fate>{part_fate::answer, part_fate::answer}));
    // Only that refusal: other 400s still name a message, and a 413 with the
    // same words is not it.
    BOOST_TEST(!envelope::is_epoch_step_refusal(R"({"error":"epoch must be a number"})"));
    BOOST_TEST(!decide(sent_batch{5, 5}, answer(400, R"({"error":"payload is not JSON"})")).epoch_refused);
    BOOST_TEST((decide(sent_batch{5, 5}, answer(413, body)).what == verdict::dead_letter));
}

BOOST_AUTO_TEST_CASE(transport_failures_and_stops) {
    delivery_outcome t;
    t.what = delivery_outcome::kind::transport;
    t.detail = "connection refused";
    auto d = decide(sent_batch{5, 5}, t);
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "transport");
    BOOST_TEST(!d.no_answer_in_time);
    BOOST_TEST(hint_for(d).find("is the secondary running and reachable") != std::string_view::npos, hint_for(d));
    delivery_outcome s;
    s.what = delivery_outcome::kind::stopped;
    BOOST_TEST((decide(batch, s).what == verdict::stop));
}

// A secondary that takes the request and answers too late is slow, not
// missing: the hint names --attempt-timeout, not the address (a cold trial
// met "is the secondary running?" while the secondary applied every batch).
BOOST_AUTO_TEST_CASE(an_answer_that_did_not_come_in_time_points_at_the_attempt_timeout) {
    delivery_outcome t;
    t.what = delivery_outcome::kind::transport;
    t.detail = "attempts_exhausted: read: The socket was closed due to a timeout";
    t.no_answer_in_time = true;
    auto d = decide(sent_batch{5, 5}, t);
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "transport");  // the metric's label is unchanged
    BOOST_TEST(d.no_answer_in_time);
    BOOST_TEST(hint_for(d).find("--attempt-timeout") != std::string_view::npos, hint_for(d));
    BOOST_TEST(hint_for(d).find("is the secondary running") == std::string_view::npos, hint_for(d));
    // The other hints stay theirs.
    BOOST_TEST(hint_for(decide(batch, answer(401, "{\"error\":\"unauthorized\"}"))).find("--token-file") !=
               std::string_view::npos);
    BOOST_TEST(hint_for(decide(batch, answer(404, "not found"))).find("is --secondary the address") !=
               std::string_view::npos);
    BOOST_TEST(hint_for(decide(batch, answer(503, "{\"error\":\"busy\"}"))).find("the secondary is failing") !=
               std::string_view::npos);
}

BOOST_AUTO_TEST_CASE(a_failed_tls_handshake_is_the_links_fault_and_keeps_the_messages) {
    delivery_outcome t;
    t.what = delivery_outcome::kind::tls;
    t.detail = "certificate verify failed";
    auto d = decide(sent_batch{5, 9}, t);
    BOOST_TEST((d.what == verdict::redeliver));  // never a dead letter: the configuration is wrong, not the message
    BOOST_TEST(d.link_error.label() == "tls");
    BOOST_TEST(d.reason.find("certificate verify failed") != std::string::npos);
}

// ---- JetStream ----

BOOST_AUTO_TEST_CASE(a_publish_outcome_decides_like_an_answer) {
    using k = publish_outcome::kind;
    auto d = decide_publish(batch, {k::published, {}});
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 20u);
    BOOST_TEST((decide_publish(batch, {k::wrong_sequence, {}}).what == verdict::resync));
    d = decide_publish(batch, {k::unavailable, "no responders"});
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "jetstream_unavailable");
    d = decide_publish(batch, {k::refused, "permissions violation"});
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "jetstream_refused");
    // Too large for the server: found by isolating, then the stream stops;
    // the server's limit never turns a message into a dead letter.
    BOOST_TEST((decide_publish(batch, {k::too_large, "max_payload"}).what == verdict::isolate));
    d = decide_publish({7, 7}, {k::too_large, "max_payload"});
    BOOST_TEST((d.what == verdict::block));
    BOOST_TEST(d.reason == "too_large_for_server");
    BOOST_TEST((decide_publish(batch, {k::stopped, {}}).what == verdict::stop));
}

BOOST_AUTO_TEST_CASE(the_log_continues_this_primarys_stream) {
    const outbox_facts f{.acked = 10, .next_seq = 31, .oldest = 1, .id_at_head = "id-25"};
    log_head h{.empty = false, .envelope = true, .seq = 25, .epoch = 2, .id = "id-25"};
    // Our own message, ahead of what we knew acknowledged (an ack lost): go on after it.
    auto d = decide_log(h, 2, f);
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 25u);
    // The log ends exactly at what was acknowledged (the usual state after a
    // restart): go on after it, no rewind (a rewind is logged as a warning).
    auto at_acked = h;
    at_acked.seq = 10;
    auto f10 = f;
    f10.id_at_head = h.id;
    d = decide_log(at_acked, 2, f10);
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 10u);
    at_acked.seq = 9;  // one below: the log lost a message, resend it
    d = decide_log(at_acked, 2, f10);
    BOOST_TEST((d.what == verdict::rewind));
    BOOST_TEST(d.upto == 9u);
    // Another id at that seq: a second writer; nothing is written.
    auto other = f;
    other.id_at_head = "id-of-someone-else";
    d = decide_log(h, 2, other);
    BOOST_TEST((d.what == verdict::block));
    BOOST_TEST(d.reason == "conflict");
    // A seq this primary never assigned: another primary.
    auto beyond = h;
    beyond.seq = 31;
    BOOST_TEST((decide_log(beyond, 2, f).what == verdict::block));
    // Not an envelope of the stream at all.
    auto foreign = h;
    foreign.envelope = false;
    BOOST_TEST((decide_log(foreign, 2, f).what == verdict::block));
    // A newer epoch wrote last: demote, whatever else.
    d = decide_log(h, 1, f);
    BOOST_TEST((d.what == verdict::demote));
    BOOST_TEST(d.epoch == 2u);
}

BOOST_AUTO_TEST_CASE(a_log_behind_what_was_acknowledged_is_a_rewind_within_retention) {
    log_head h{.empty = false, .envelope = true, .seq = 4, .epoch = 0, .id = "id-4"};
    auto d = decide_log(h, 0, {.acked = 10, .next_seq = 11, .oldest = 1, .id_at_head = "id-4"});
    BOOST_TEST((d.what == verdict::rewind));
    BOOST_TEST(d.upto == 4u);  // resend from 5
    d = decide_log(h, 0, {.acked = 10, .next_seq = 11, .oldest = 8, .id_at_head = std::nullopt});
    BOOST_TEST((d.what == verdict::block));
    BOOST_TEST(d.reason == "beyond_retention");
    // An empty log: from the start, if retained; a new stream simply starts.
    d = decide_log(log_head{}, 0, {.acked = 10, .next_seq = 11, .oldest = 1, .id_at_head = std::nullopt});
    BOOST_TEST((d.what == verdict::rewind));
    BOOST_TEST(d.upto == 0u);
    d = decide_log(log_head{}, 0, {.acked = 0, .next_seq = 5, .oldest = 1, .id_at_head = std::nullopt});
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 0u);
}

BOOST_AUTO_TEST_CASE(a_hole_in_the_log_is_resent_from_retention) {
    // Seqs 5..7 missing, 10 acknowledged, all retained: resend after 4.
    // A hole that ends at the last acknowledged seq (only 10 missing) is a
    // hole too: resend from 10.
    auto edge = decide_repair(10, 10, 1, 11);
    BOOST_TEST((edge.what == verdict::rewind));
    BOOST_TEST(edge.upto == 9u);
    auto d = decide_repair(5, 10, 1, 11);
    BOOST_TEST((d.what == verdict::rewind));
    BOOST_TEST(d.upto == 4u);
    // The hole starts at the oldest retained seq: still resendable.
    d = decide_repair(5, 10, 5, 11);
    BOOST_TEST((d.what == verdict::rewind));
    // Purged below the oldest retained: blocked, saying what is missing.
    d = decide_repair(5, 10, 6, 11);
    BOOST_TEST((d.what == verdict::block));
    BOOST_TEST(d.reason == "beyond_retention");
    BOOST_TEST(d.detail.find("oldest retained is 6") != std::string::npos);
    // Not acknowledged yet: it is still to be sent, nothing to repair.
    d = decide_repair(11, 10, 1, 12);
    BOOST_TEST((d.what == verdict::ack));
    BOOST_TEST(d.upto == 10u);
    BOOST_TEST((decide_repair(0, 10, 1, 11).what == verdict::ack));
}

// Several streams' batches in one request (the combiner): each part's share
// of the answer.
BOOST_AUTO_TEST_CASE(a_shared_request_gives_each_stream_its_own_answer) {
    const std::vector<std::string_view> parts{"a", "b", "c"};
    using f = part_fate;
    auto all = [](const std::vector<part_fate>& v, part_fate x) {
        return std::all_of(v.begin(), v.end(), [x](part_fate y) { return y == x; });
    };
    // Success, 5xx, auth, and no answer at all: everyone's.
    BOOST_TEST(all(split_answer(parts, true, 200, "{}"), f::answer));
    BOOST_TEST(all(split_answer(parts, true, 503, "busy"), f::answer));
    BOOST_TEST(all(split_answer(parts, true, 401, ""), f::answer));
    BOOST_TEST(all(split_answer(parts, false, 0, ""), f::answer));
    // A conflict or a gap is the named stream's; nothing of the others was
    // applied (the request is atomic): they go again.
    auto c = split_answer(parts, true, 409, R"({"error":"conflict","stream":"b","seq":7})");
    BOOST_TEST((c == std::vector<part_fate>{f::resend, f::answer, f::resend}));
    auto g = split_answer(parts, true, 409, R"({"error":"gap","stream":"c","expected":3})");
    BOOST_TEST((g == std::vector<part_fate>{f::resend, f::resend, f::answer}));
    // A stale epoch concerns the whole primary; a 409 naming none of the
    // parts (or none at all) is no one's in particular: each part alone (a
    // gap's expected seq must never acknowledge another stream's batch).
    BOOST_TEST(all(split_answer(parts, true, 409, R"({"error":"stale_epoch","epoch":9})"), f::answer));
    BOOST_TEST(all(split_answer(parts, true, 409, R"({"error":"gap","stream":"z","expected":3})"), f::resend_alone));
    BOOST_TEST(all(split_answer(parts, true, 409, "not json"), f::resend_alone));
    // The secondary's 400, 413, 422 name no stream: each part alone finds
    // out whose it is. Anyone else's is everyone's (decide(): a link error).
    for (unsigned s : {400u, 413u, 422u}) {
        BOOST_TEST(all(split_answer(parts, true, s, R"({"error":"bad"})"), f::resend_alone));
        BOOST_TEST(all(split_answer(parts, true, s, "<html>Bad Request</html>"), f::answer));
    }
    // A request of one part is that part's, whatever the answer.
    const std::vector<std::string_view> one{"a"};
    BOOST_TEST(all(split_answer(one, true, 400, R"({"error":"bad"})"), f::answer));
    BOOST_TEST(all(split_answer(one, true, 409, R"({"error":"gap","stream":"z","expected":3})"), f::answer));
}

// The link's faults are values, their labels the metric's: each kind has its
// own, and the status is part of the value.
BOOST_AUTO_TEST_CASE(link_faults_are_typed_with_their_metric_labels) {
    using k = link_fault::kind;
    BOOST_TEST(link_fault{}.label() == "");
    BOOST_TEST(link_fault{k::transport}.label() == "transport");
    BOOST_TEST(link_fault{k::tls}.label() == "tls");
    BOOST_TEST((link_fault{k::auth, 401}.label() == "auth"));
    BOOST_TEST((link_fault{k::http_status, 503}.label() == "http_503"));
    BOOST_TEST((link_fault{k::foreign_status, 400}.label() == "foreign_400"));
    BOOST_TEST(link_fault{k::jetstream_unavailable}.label() == "jetstream_unavailable");
    BOOST_TEST(link_fault{k::jetstream_refused}.label() == "jetstream_refused");
    const auto d = decide({1, 1}, delivery_outcome{delivery_outcome::kind::answered, 503, "busy", {}});
    BOOST_TEST((d.link_error == link_fault{k::http_status, 503}));
    BOOST_TEST(!(d.link_error == link_fault{k::http_status, 502}));
    const auto a = decide({1, 1}, delivery_outcome{delivery_outcome::kind::answered, 403, "no", {}});
    BOOST_TEST((a.link_error == link_fault{k::auth, 403}));
}

BOOST_AUTO_TEST_SUITE_END()
