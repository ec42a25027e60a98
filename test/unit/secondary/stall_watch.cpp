// When the JetStream source's consumer is stalled (stall_watch.hpp): three
// pulls in a row that the server never answered; an answered pull (messages
// or a status) clears the count, and so does a new consumer.
#include <secondary/stall_watch.hpp>

#include <boost/test/unit_test.hpp>

using steadfast::secondary::stall_watch;

BOOST_AUTO_TEST_SUITE(secondary_stall_watch)

BOOST_AUTO_TEST_CASE(three_unanswered_pulls_in_a_row_are_a_stall) {
    stall_watch w;
    BOOST_TEST(stall_watch::unanswered_in_a_row == 3u);
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(w.in_a_row() == 0u);
    BOOST_TEST(w.unanswered());  // the third
    BOOST_TEST(w.stalls() == 1u);
    BOOST_TEST(w.in_a_row() == 1u);
    // The count starts over: still unanswered after subscribing again is a
    // second stall in a row, three pulls later.
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(w.unanswered());
    BOOST_TEST(w.stalls() == 2u);
    BOOST_TEST(w.in_a_row() == 2u);
    // An answered pull: no longer stalled.
    w.answered();
    BOOST_TEST(w.in_a_row() == 0u);
    BOOST_TEST(w.stalls() == 2u);
}

BOOST_AUTO_TEST_CASE(an_answered_pull_or_a_new_consumer_between_them_is_not_a_stall) {
    stall_watch w;
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(!w.unanswered());
    w.answered();  // a 408, a 404, or messages
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(!w.unanswered());
    w.new_consumer();  // created again (it was missing): its pulls count afresh
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(!w.unanswered());
    BOOST_TEST(w.stalls() == 0u);
    BOOST_TEST(w.unanswered());
    BOOST_TEST(w.stalls() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
