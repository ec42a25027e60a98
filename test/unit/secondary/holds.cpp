// What the JetStream source holds back (holds.hpp), on times passed in: a
// conflict holds its stream, a gap asks for a repair only once it lasts (in
// time and in fetches), at most every 15 s, and a gap of 5 minutes restarts
// the consumer at most once a minute.
#include <secondary/holds.hpp>

#include <boost/test/unit_test.hpp>

using steadfast::secondary::stream_holds;
using namespace std::chrono_literals;

namespace {
const stream_holds::time_point t0 = std::chrono::steady_clock::time_point{} + 1000h;
}

BOOST_AUTO_TEST_SUITE(secondary_holds)

BOOST_AUTO_TEST_CASE(a_conflict_holds_its_stream_a_gap_does_not) {
    stream_holds h;
    BOOST_TEST(h.blocked("a", "conflict at seq 4"));
    BOOST_TEST(!h.blocked("a", "conflict at seq 4"));  // not news: not logged again
    BOOST_TEST(h.blocked("b", "gap: expects seq 7"));
    BOOST_TEST(h.held("a"));
    BOOST_TEST(!h.held("b"));
    BOOST_TEST(!h.held("c"));
    BOOST_TEST(h.reasons().size() == 2u);
    BOOST_TEST((h.nak_delay("a", false) == 5s));
    BOOST_TEST((h.nak_delay("b", true) == 1s));
}

BOOST_AUTO_TEST_CASE(an_applied_message_ends_a_block_and_its_gap) {
    stream_holds h;
    BOOST_TEST(!h.applied("b"));  // was not blocked
    h.blocked("b", "gap: expects seq 7");
    for (int i = 0; i < 5; ++i) h.gap("b", 7, 9, true, t0 + std::chrono::seconds(i));
    BOOST_TEST(h.gap("b", 7, 9, true, t0 + 11s).ask_repair);
    BOOST_TEST(h.applied("b"));
    BOOST_TEST(h.reasons().empty());
    BOOST_TEST((h.nak_delay("b", true) == 1s));  // the repair is forgotten with the gap
    // A new gap starts afresh: not lasting at once.
    BOOST_TEST(!h.gap("b", 12, 14, true, t0 + 30s).ask_repair);
}

BOOST_AUTO_TEST_CASE(a_gap_asks_for_a_repair_after_10_s_and_5_fetches) {
    stream_holds h;
    auto s = h.gap("a", 7, 10, true, t0);
    BOOST_TEST(!s.ask_repair);
    // Seen in 4 fetches over 20 s (a paused process): not yet.
    for (int i = 1; i < 4; ++i) BOOST_TEST(!h.gap("a", 7, 10, true, t0 + 20s).ask_repair);
    // The same fetch meeting it again does not count.
    BOOST_TEST(!h.gap("a", 7, 9, false, t0 + 20s).ask_repair);
    s = h.gap("a", 7, 12, true, t0 + 20s);
    BOOST_TEST(s.ask_repair);
    BOOST_TEST(s.from == 7u);
    BOOST_TEST(s.to == 8u);  // before the lowest seq delivered after the hole (9)
    BOOST_TEST(!s.lasting);
    BOOST_TEST(h.repair_requests() == 1u);
    BOOST_TEST((h.nak_delay("a", true) == 5s));  // fewer redeliveries while the copy comes
    // Not again within 15 s; again after.
    BOOST_TEST(!h.gap("a", 7, 9, true, t0 + 34s).ask_repair);
    BOOST_TEST(h.gap("a", 7, 9, true, t0 + 35s).ask_repair);
    BOOST_TEST(h.repair_requests() == 2u);
}

BOOST_AUTO_TEST_CASE(a_gap_in_fewer_than_10_s_asks_nothing) {
    stream_holds h;
    for (int i = 0; i < 20; ++i)
        BOOST_TEST(!h.gap("a", 7, 0, true, t0 + std::chrono::milliseconds(500 * i)).ask_repair);
    const auto s = h.gap("a", 7, 0, true, t0 + 10s + 1ms);
    BOOST_TEST(s.ask_repair);
    BOOST_TEST(s.to == 7u);  // nothing delivered after the hole: the expected one alone
}

BOOST_AUTO_TEST_CASE(a_paused_process_does_not_act_on_its_first_looks) {
    // Seen in 4 fetches over 10 minutes (SIGSTOP through a passing gap):
    // neither a repair nor a restart until a fifth fetch meets it.
    stream_holds h;
    h.gap("a", 7, 9, true, t0);
    for (int i = 0; i < 3; ++i) {
        const auto s = h.gap("a", 7, 9, true, t0 + 600s);
        BOOST_TEST(!s.lasting);
        BOOST_TEST(!s.ask_repair);
    }
    const auto s = h.gap("a", 7, 9, true, t0 + 600s);
    BOOST_TEST(s.lasting);
    BOOST_TEST(s.ask_repair);
}

BOOST_AUTO_TEST_CASE(the_repair_range_ends_before_the_lowest_later_message) {
    stream_holds h;
    h.gap("a", 7, 5, true, t0);  // a duplicate from before the hole: not a bound
    h.gap("a", 7, 12, true, t0);
    h.gap("a", 7, 10, true, t0);
    h.gap("a", 7, 11, true, t0);
    const auto s = h.gap("a", 7, 0, true, t0 + 11s);
    BOOST_TEST(s.ask_repair);
    BOOST_TEST(s.from == 7u);
    BOOST_TEST(s.to == 9u);
}

BOOST_AUTO_TEST_CASE(repairs_are_throttled_per_stream) {
    stream_holds h;
    for (int i = 0; i < 5; ++i) {
        h.gap("a", 7, 0, true, t0);
        h.gap("b", 3, 0, true, t0);
    }
    BOOST_TEST(h.gap("a", 7, 0, true, t0 + 11s).ask_repair);
    BOOST_TEST(h.gap("b", 3, 0, true, t0 + 12s).ask_repair);  // another stream: its own 15 s
    BOOST_TEST(!h.gap("a", 7, 0, true, t0 + 13s).ask_repair);
    BOOST_TEST(h.repair_requests() == 2u);
}

BOOST_AUTO_TEST_CASE(the_first_restart_after_boot_is_allowed) {
    // The steady clock may have started less than a minute ago.
    stream_holds h;
    BOOST_TEST(h.restart(std::chrono::steady_clock::time_point{} + 5s));
    BOOST_TEST(!h.restart(std::chrono::steady_clock::time_point{} + 30s));
}

BOOST_AUTO_TEST_CASE(a_gap_of_5_minutes_restarts_the_consumer_once_a_minute) {
    stream_holds h;
    for (int i = 0; i < 5; ++i) h.gap("a", 7, 9, true, t0);
    BOOST_TEST(!h.gap("a", 7, 9, true, t0 + 300s).lasting);
    BOOST_TEST(h.gap("a", 7, 9, true, t0 + 301s).lasting);
    BOOST_TEST(h.restart(t0 + 301s));
    BOOST_TEST((h.nak_delay("a", true) == 1s));  // the repair asked before is forgotten with the gap
    // Gaps are forgotten: met anew, they last again only after 5 minutes.
    for (int i = 0; i < 5; ++i) BOOST_TEST(!h.gap("a", 7, 9, true, t0 + 302s).lasting);
    BOOST_TEST(!h.restart(t0 + 360s));  // within a minute of the last
    // A refused restart forgets the gaps too: the next restart comes only
    // after another 5 minutes of gap, not a minute later.
    for (int i = 0; i < 5; ++i) BOOST_TEST(!h.gap("a", 7, 9, true, t0 + 420s).lasting);
    BOOST_TEST(!h.gap("a", 7, 9, true, t0 + 720s).lasting);
    BOOST_TEST(h.gap("a", 7, 9, true, t0 + 721s).lasting);
    BOOST_TEST(h.restart(t0 + 721s));
}

BOOST_AUTO_TEST_SUITE_END()
