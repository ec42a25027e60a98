// When the JetStream source asks for its consumer's info, and when what the
// info says means a stalled consumer (stall_watch.hpp): messages pending on
// two infos in a row with no delivery between them.
#include <secondary/stall_watch.hpp>

#include <boost/test/unit_test.hpp>

#include <vector>

using steadfast::secondary::stall_watch;

BOOST_AUTO_TEST_SUITE(secondary_stall_watch)

BOOST_AUTO_TEST_CASE(asks_at_the_third_empty_pull_then_every_tenth_and_after_a_quick_one) {
    stall_watch w;
    std::vector<int> asked;
    for (int i = 1; i <= 30; ++i)
        if (w.empty_pull(false)) asked.push_back(i);
    BOOST_TEST(asked == (std::vector<int>{3, 10, 20, 30}), boost::test_tools::per_element());
    BOOST_TEST(w.empty_pulls() == 30u);
    BOOST_TEST(w.empty_pull(true));  // ended at once (404, 409, 503): always asked
    w.delivered();
    BOOST_TEST(w.empty_pulls() == 0u);
    BOOST_TEST(!w.empty_pull(false));
    BOOST_TEST(!w.empty_pull(false));
    BOOST_TEST(w.empty_pull(false));  // the count starts over after a delivery
}

BOOST_AUTO_TEST_CASE(pending_on_two_infos_in_a_row_without_a_delivery_is_a_stall) {
    stall_watch w;
    for (int i = 0; i < 3; ++i) w.empty_pull(false);
    BOOST_TEST(!w.info(5));           // messages came in after the pull ended: not yet a stall
    BOOST_TEST(w.empty_pull(false));  // pending was seen: asked again at the next empty pull
    BOOST_TEST(w.info(5));            // still pending, still nothing delivered: stalled
    BOOST_TEST(w.stalls() == 1u);
    // Starts over, as for the new consumer the source subscribes.
    BOOST_TEST(w.empty_pulls() == 0u);
    BOOST_TEST(!w.empty_pull(false));
    BOOST_TEST(!w.info(5));
    BOOST_TEST(w.info(5));
    BOOST_TEST(w.stalls() == 2u);
}

BOOST_AUTO_TEST_CASE(a_delivery_or_nothing_pending_between_two_infos_is_not_a_stall) {
    stall_watch w;
    BOOST_TEST(!w.info(5));
    w.delivered();                     // the next pull brought them
    BOOST_TEST(!w.empty_pull(false));  // the suspicion went with the delivery
    BOOST_TEST(!w.info(5));            // a first suspicion again, not a stall
    BOOST_TEST(!w.info(0));
    BOOST_TEST(!w.info(7));  // nothing pending on the info between: a first suspicion again
    BOOST_TEST(!w.info(0));
    BOOST_TEST(!w.info(0));
    BOOST_TEST(w.stalls() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
