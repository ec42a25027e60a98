// A stream's positions (positions.hpp), apart from its machine: what counts
// as delivered after resends, the recheck's step back, isolation, and a
// rewind that repeats without progress.
#include <primary/positions.hpp>

#include <boost/test/unit_test.hpp>

using steadfast::primary::stream_positions;

BOOST_AUTO_TEST_SUITE(primary_positions)

BOOST_AUTO_TEST_CASE(only_messages_never_acknowledged_count_as_delivered) {
    stream_positions p(10, 10, 0);
    p.committed(5);  // 11..15
    p.head(1234);
    auto a = p.acknowledge(12);
    BOOST_TEST(a.first_fresh == 11u);
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(p.pending() == 3u);
    BOOST_TEST(p.head_at_ms() == 1234);  // still pending: the head stays
    p.rewind(10);                        // 11 and 12 are resent
    a = p.acknowledge(13);
    BOOST_TEST(a.first_fresh == 13u);
    BOOST_TEST(a.delivered == 1u);  // 11 and 12 were counted already
    BOOST_TEST(p.acked() == 13u);
    BOOST_TEST(p.acked_max() == 13u);
    a = p.acknowledge(15);
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(p.pending() == 0u);
    BOOST_TEST(p.head_at_ms() == 0);  // nothing pending: no head
    // An acknowledgement below the most ever acknowledged lowers the
    // position, not the most, and delivers nothing.
    a = p.acknowledge(14);
    BOOST_TEST(a.delivered == 0u);
    BOOST_TEST(p.acked() == 14u);
    BOOST_TEST(p.acked_max() == 15u);
}

BOOST_AUTO_TEST_CASE(with_nothing_known_nothing_counts_as_fresh) {
    stream_positions p(stream_positions::unknown, stream_positions::unknown, 2);
    const auto a = p.acknowledge(5);
    BOOST_TEST(a.first_fresh == stream_positions::unknown);  // no latency observed for any of them
    BOOST_TEST(a.delivered == 0u);
}

BOOST_AUTO_TEST_CASE(delivered_is_bounded_by_what_is_pending) {
    stream_positions p(0, 0, 2);
    const auto a = p.acknowledge(5);  // the secondary had more (a resend of an older primary's)
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(p.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_unknown_position_is_learnt_once) {
    stream_positions idle(stream_positions::unknown, stream_positions::unknown, 0);
    BOOST_TEST(!idle.resend_last());  // nothing pending, but nothing known to resend either
    BOOST_TEST(idle.acked() == stream_positions::unknown);
    stream_positions p(stream_positions::unknown, stream_positions::unknown, 3);
    BOOST_TEST(!p.known());
    BOOST_TEST(!p.resend_last());
    p.learn(7);
    BOOST_TEST(p.known());
    BOOST_TEST(p.acked() == 7u);
    BOOST_TEST(p.acked_max() == 7u);
}

BOOST_AUTO_TEST_CASE(the_recheck_steps_back_once_and_only_when_idle) {
    stream_positions busy(5, 5, 1);
    BOOST_TEST(!busy.resend_last());  // pending: the next send finds out
    stream_positions empty(0, 0, 0);
    BOOST_TEST(!empty.resend_last());  // nothing was ever acknowledged
    stream_positions p(5, 5, 0);
    BOOST_TEST(p.resend_last());
    BOOST_TEST(p.acked() == 4u);
    BOOST_TEST(!p.resend_last());  // its resend is on its way (acked < acked_max)
    const auto a = p.acknowledge(5);
    BOOST_TEST(a.delivered == 0u);  // the resend is not delivered again
    BOOST_TEST(p.resend_last());    // settled again: another recheck may step back
}

BOOST_AUTO_TEST_CASE(isolation_sends_one_a_batch_until_past_it_or_rewound) {
    stream_positions p(10, 10, 20);
    BOOST_TEST(p.batch_limit(4000) == 4000u);
    p.isolate(20);
    BOOST_TEST(p.batch_limit(4000) == 1u);
    p.acknowledge(19);
    BOOST_TEST(p.batch_limit(4000) == 1u);
    p.acknowledge(20);
    BOOST_TEST(p.batch_limit(4000) == 4000u);
    p.isolate(30);
    p.rewind(15);  // a rewind ends the isolation
    BOOST_TEST(p.batch_limit(4000) == 4000u);
}

BOOST_AUTO_TEST_CASE(a_rewind_repeated_without_progress_is_refused) {
    stream_positions p(10, 10, 5);
    BOOST_TEST(p.start_rewind(8));
    p.rewind(8);
    BOOST_TEST(p.acked() == 8u);
    BOOST_TEST(!p.start_rewind(8));  // the same rewind, nothing acknowledged past it
    p.acknowledge(8);
    p.sent_and_acknowledged(8);  // acknowledged up to the rewind's point, not past it
    BOOST_TEST(!p.start_rewind(8));
    p.acknowledge(9);  // an acknowledgement read from the log (no send) is not progress
    BOOST_TEST(!p.start_rewind(8));
    p.sent_and_acknowledged(9);  // a send acknowledged past it is
    BOOST_TEST(p.start_rewind(8));
}

BOOST_AUTO_TEST_CASE(another_rewind_point_is_a_new_rewind) {
    stream_positions p(10, 10, 5);
    BOOST_TEST(p.start_rewind(8));
    p.rewind(8);
    BOOST_TEST(p.start_rewind(6));  // restored again, further back: resent
    p.rewind(6);
    BOOST_TEST(p.acked() == 6u);
    BOOST_TEST(!p.start_rewind(6));
}

BOOST_AUTO_TEST_SUITE_END()
