// Which messages on the leader-elected advisory subject count (the subject
// is the account's: anyone on it may publish there), and when a refused
// subscription is to be said (primary/leader_watch.hpp).
#include <primary/leader_watch.hpp>

#include <boost/test/unit_test.hpp>

using steadfast::primary::leader_watch;

BOOST_AUTO_TEST_SUITE(primary_leader_watch)

BOOST_AUTO_TEST_CASE(only_the_streams_own_advisory_counts) {
    // As nats-server 2.9.10 sends it (trimmed).
    const std::string real =
        R"({"type":"io.nats.jetstream.advisory.v1.stream_leader_elected","id":"x1","timestamp":"2026-12-05T10:00:00Z",)"
        R"("stream":"steadfast","leader":"n2","replicas":[{"name":"n1","current":true}]})";
    auto l = leader_watch::parse(real, "steadfast");
    BOOST_REQUIRE(l.has_value());
    BOOST_TEST(*l == "n2");
    BOOST_TEST(!leader_watch::parse(real, "other").has_value());  // another stream's
    // Another advisory, or anything else published to the subject: ignored.
    BOOST_TEST(!leader_watch::parse(R"({"type":"io.nats.jetstream.advisory.v1.stream_quorum_lost",)"
                                    R"("stream":"steadfast","leader":"n2"})",
                                    "steadfast")
                    .has_value());
    BOOST_TEST(!leader_watch::parse("hello", "steadfast").has_value());
    BOOST_TEST(!leader_watch::parse("", "steadfast").has_value());
    BOOST_TEST(!leader_watch::parse("[1,2]", "steadfast").has_value());
    BOOST_TEST(!leader_watch::parse(R"({"type":1,"stream":"steadfast"})", "steadfast").has_value());
    // Without a leader's name it still counts (the requests are sent again).
    auto unnamed = leader_watch::parse(
        R"({"type":"io.nats.jetstream.advisory.v1.stream_leader_elected","stream":"steadfast"})", "steadfast");
    BOOST_REQUIRE(unnamed.has_value());
    BOOST_TEST(unnamed->empty());
}

BOOST_AUTO_TEST_CASE(a_refused_subscription_to_the_advisories_is_recognised) {
    BOOST_TEST(leader_watch::refused(
        R"(Not Permitted: Permissions Violation for Subscription to "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.steadfast")"));
    BOOST_TEST(!leader_watch::refused(R"(Not Permitted: Permissions Violation for Subscription to "_INBOX.x")"));
    BOOST_TEST(!leader_watch::refused(R"(Not Permitted: Permissions Violation for Publish to "$JS.EVENT.ADVISORY.x")"));
    BOOST_TEST(!leader_watch::refused(""));
}

BOOST_AUTO_TEST_SUITE_END()
