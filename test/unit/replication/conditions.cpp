// The pair's conditions (steadfast/replication/conditions.hpp): the epoch
// fence and the secondary's online probe.
#include <steadfast/replication/conditions.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using namespace steadfast;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(replication_conditions)

BOOST_AUTO_TEST_CASE(epoch_fence_turns_demoted) {
    asio::io_context ioc;
    auto demoted = make_demoted(ioc.get_executor(), 7);
    demoted->observe(3);
    demoted->observe(7);
    ioc.run();
    BOOST_TEST(!demoted->value());
    BOOST_TEST(demoted->newest_seen() == 7u);
    demoted->observe(9);
    demoted->observe(8);  // older than 9: the newest stays
    ioc.restart();
    ioc.run();
    BOOST_TEST(demoted->value());
    BOOST_TEST(demoted->newest_seen() == 9u);
    BOOST_TEST(demoted->name() == "demoted");
}

BOOST_AUTO_TEST_CASE(secondary_online_is_a_named_probe) {
    asio::io_context ioc;
    int checks = 0;
    steadfast::probe_options o;
    o.interval = 1ms;
    o.initially_online = false;
    auto online = make_secondary_online(
        ioc.get_executor(),
        [&]() -> asio::awaitable<bool> {
            ++checks;
            co_return true;
        },
        o);
    BOOST_TEST(online->name() == "secondary-online");
    BOOST_TEST(!online->value());
    ioc.run_for(200ms);
    BOOST_TEST(online->value());  // the first passing check turns it true
    BOOST_TEST(checks >= 1);
    online->stop();
    ioc.run_for(50ms);
}

BOOST_AUTO_TEST_SUITE_END()
