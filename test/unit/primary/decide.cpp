// The primary's decision table: every row, without sockets or timers.
#include <primary/decide.hpp>

#include <boost/test/unit_test.hpp>

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
    auto r = decide_rewind(4, 1, 21);  // seqs 1.. still retained
    BOOST_TEST((r.what == verdict::rewind));
    BOOST_TEST(r.upto == 3u);
    r = decide_rewind(4, 9, 21);  // 4..8 were purged
    BOOST_TEST((r.what == verdict::block));
    BOOST_TEST(r.reason == "beyond_retention");
    r = decide_rewind(4, 0, 21);  // nothing retained at all
    BOOST_TEST((r.what == verdict::block));
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
    BOOST_TEST(d.link_error == "http_409");
}

BOOST_AUTO_TEST_CASE(only_400_413_422_reject_messages) {
    for (unsigned s : {400u, 413u, 422u}) {
        BOOST_TEST((decide(batch, answer(s)).what == verdict::isolate));
        BOOST_TEST((decide(sent_batch{5, 5}, answer(s)).what == verdict::dead_letter));
    }
    for (unsigned s : {401u, 403u, 404u, 405u, 415u, 418u, 429u, 500u, 502u, 503u, 504u, 599u}) {
        auto d = decide(sent_batch{5, 5}, answer(s));
        BOOST_TEST((d.what == verdict::redeliver), "status " << s);
        BOOST_TEST(d.link_error == (s == 401 || s == 403 ? std::string("auth") : "http_" + std::to_string(s)));
    }
}

BOOST_AUTO_TEST_CASE(transport_failures_and_stops) {
    delivery_outcome t;
    t.what = delivery_outcome::kind::transport;
    t.detail = "connection refused";
    auto d = decide(sent_batch{5, 5}, t);
    BOOST_TEST((d.what == verdict::redeliver));
    BOOST_TEST(d.link_error == "transport");
    delivery_outcome s;
    s.what = delivery_outcome::kind::stopped;
    BOOST_TEST((decide(batch, s).what == verdict::stop));
}

BOOST_AUTO_TEST_CASE(a_failed_tls_handshake_is_the_links_fault_and_keeps_the_messages) {
    delivery_outcome t;
    t.what = delivery_outcome::kind::tls;
    t.detail = "certificate verify failed";
    auto d = decide(sent_batch{5, 9}, t);
    BOOST_TEST((d.what == verdict::redeliver));  // never a dead letter: the configuration is wrong, not the message
    BOOST_TEST(d.link_error == "tls");
    BOOST_TEST(d.reason.find("certificate verify failed") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
