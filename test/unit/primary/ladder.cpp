// The durable ladder's arithmetic (ladder.hpp), with the clock passed in:
// the climb, the last step repeating, another head starting afresh, a
// Retry-After lengthening a step, and one bounded by the last step.
#include <primary/ladder.hpp>

#include <boost/test/unit_test.hpp>

using namespace steadfast;
using namespace steadfast::primary;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(primary_ladder)

BOOST_AUTO_TEST_CASE(the_ladder_climbs_and_its_last_step_repeats) {
    const auto ladder = backoff::schedule("10s 30s 1m");
    const std::int64_t now = 1'000'000;
    auto p = plan_next_step({}, 7, ladder, 0ns, now);
    BOOST_TEST(p.next.head_seq == 7u);
    BOOST_TEST(p.next.attempts == 1u);
    BOOST_TEST(p.delay.count() == 10'000);
    BOOST_TEST(p.next.next_at_ms == now + 10'000);
    BOOST_TEST(!p.retry_after_bounded);
    p = plan_next_step(p.next, 7, ladder, 0ns, now);
    BOOST_TEST(p.next.attempts == 2u);
    BOOST_TEST(p.delay.count() == 30'000);
    p = plan_next_step(p.next, 7, ladder, 0ns, now);
    BOOST_TEST(p.delay.count() == 60'000);
    p = plan_next_step(p.next, 7, ladder, 0ns, now);  // past the end: the last step again
    BOOST_TEST(p.next.attempts == 4u);
    BOOST_TEST(p.delay.count() == 60'000);
}

BOOST_AUTO_TEST_CASE(another_heads_schedule_starts_afresh) {
    const auto ladder = backoff::schedule("10s 30s");
    schedule old{5, 123, 3};  // seq 3's fifth step
    auto p = plan_next_step(old, 4, ladder, 0ns, 0);
    BOOST_TEST(p.next.attempts == 1u);
    BOOST_TEST(p.next.head_seq == 4u);
    BOOST_TEST(p.delay.count() == 10'000);
    // A schedule written by an older version (no head recorded) is the head's.
    schedule legacy{1, 123, 0};
    p = plan_next_step(legacy, 4, ladder, 0ns, 0);
    BOOST_TEST(p.next.attempts == 2u);
    BOOST_TEST(p.delay.count() == 30'000);
}

BOOST_AUTO_TEST_CASE(retry_after_lengthens_a_step_within_the_last_one) {
    const auto ladder = backoff::schedule("10s 30s 1m");
    auto p = plan_next_step({}, 1, ladder, 45s, 100);
    BOOST_TEST(p.delay.count() == 45'000);  // never earlier than the secondary asked
    BOOST_TEST(p.next.next_at_ms == 45'100);
    BOOST_TEST(!p.retry_after_bounded);
    p = plan_next_step({}, 1, ladder, 5s, 100);  // a shorter one does not shorten the step
    BOOST_TEST(p.delay.count() == 10'000);
    p = plan_next_step({}, 1, ladder, std::chrono::hours(24 * 365), 100);  // a year: cut to the last step
    BOOST_TEST(p.retry_after_bounded);
    BOOST_TEST(p.delay.count() == 60'000);
}

BOOST_AUTO_TEST_SUITE_END()
