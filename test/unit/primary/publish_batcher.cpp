// publish_batcher on a real outbox and database thread: publishes made while
// the database thread has not taken the open group join it (one job), each
// is answered in order with its own seq after the commit, delivery is told
// of every stored message before any publisher, a failed group fails each of
// its publishes and takes no seq, and a group the thread never ran (a failed
// flush before it) takes no more publishes once it is answered.
#include <primary/publish_batcher.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <stdexcept>
#include <steadfast_test/scratch_dir.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace steadfast;
namespace asio = boost::asio;

namespace {
struct fixture {
    test::scratch_dir scratch{"batcher"};  // removed after the members below
    asio::io_context ioc;
    std::optional<app::database> db;
    std::optional<primary::outbox> out;
    std::optional<app::db_worker> worker;
    std::optional<primary::publish_batcher> batch;
    std::vector<std::string> events;  // "stored s 1", "answer 0 s 1", "failed 1: ..." in the loop's order
    std::vector<bool> answered;
    const std::thread::id loop_thread = std::this_thread::get_id();  // the test runs `ioc` here
    bool off_loop = false;                                           // a hook or an answer ran on another thread
    std::string throw_on_stored;                                     // the hook throws for this payload

    explicit fixture(app::sync_mode sync = app::sync_mode::off, app::db_worker::flush_fn flush = {}) {
        db.emplace(scratch.path.string(), "primary.db", "steadfast-primary", sync);
        out.emplace(*db);
        worker.emplace(*db, std::move(flush));
        batch.emplace(*worker, *out, ioc.get_executor(),
                      [this](const primary::published& p, std::string payload, std::int64_t at_ms) {
                          off_loop = off_loop || std::this_thread::get_id() != loop_thread;
                          events.push_back("stored " + p.stream + " " + std::to_string(p.seq) + " " + payload +
                                           (at_ms == 1'000 ? "" : " at " + std::to_string(at_ms)));
                          if (!throw_on_stored.empty() && payload == throw_on_stored)
                              throw std::runtime_error("the hook's own");
                      });
    }
    ~fixture() { worker->stop(); }

    // Publish number `i` (its answer is recorded under it).
    void publish(std::size_t i, const std::string& stream, const std::string& payload = "{}") {
        if (answered.size() <= i) answered.resize(i + 1, false);
        batch->async_publish(stream, payload, 1'000, [this, i](primary::publish_batcher::result r) {
            off_loop = off_loop || std::this_thread::get_id() != loop_thread;
            answered[i] = true;
            if (r)
                events.push_back("answer " + std::to_string(i) + " " + r->stream + " " + std::to_string(r->seq));
            else
                events.push_back("failed " + std::to_string(i) + ": " + r.error().what);
        });
    }
    // Runs the loop until `ready` (false after 10 s).
    bool run_until(const std::function<bool()>& ready) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!ready()) {
            if (std::chrono::steady_clock::now() > end) return false;
            ioc.restart();
            ioc.run_for(std::chrono::milliseconds(5));
        }
        return true;
    }
    bool all_answered() {
        return std::all_of(answered.begin(), answered.end(), [](bool a) { return a; });
    }
    std::int64_t count(const std::string& sql) {
        std::int64_t n = 0;
        std::promise<void> done;
        worker->post(
            [&](app::database& d) {
                auto s = d.prepare(sql);
                s.step();
                n = s.column_int(0);
                return true;
            },
            [&](const app::db_failure*) { done.set_value(); });
        done.get_future().wait();
        return n;
    }
};

// Holds the database thread in a job of its own until release().
struct hold {
    std::promise<void> started, gate;
    std::promise<void> finished;
    explicit hold(app::db_worker& w) {
        w.post(
            [this](app::database&) {
                started.set_value();
                gate.get_future().wait();
                return true;
            },
            [this](const app::db_failure*) { finished.set_value(); });
        started.get_future().wait();
    }
    void release() {
        gate.set_value();
        finished.get_future().wait();
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_publish_batcher)

BOOST_FIXTURE_TEST_CASE(publishes_made_while_the_thread_is_busy_share_one_job_and_are_answered_in_order, fixture) {
    {
        hold busy(*worker);
        publish(0, "a", "{\"n\":0}");
        publish(1, "b", "{\"n\":1}");
        publish(2, "a", "{\"n\":2}");
        publish(3, "a", "{\"n\":3}");
        publish(4, "b", "{\"n\":4}");
        BOOST_TEST(batch->groups() == 1u);
        BOOST_TEST(batch->publishes() == 5u);
        // Never answered inline, nor before the database thread has run them.
        ioc.poll();
        BOOST_TEST(events.empty());
        busy.release();
    }
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    // Delivery is told of every message, in the order published, before any
    // publisher hears back.
    const std::vector<std::string> expected{"stored a 1 {\"n\":0}", "stored b 1 {\"n\":1}", "stored a 2 {\"n\":2}",
                                            "stored a 3 {\"n\":3}", "stored b 2 {\"n\":4}", "answer 0 a 1",
                                            "answer 1 b 1",         "answer 2 a 2",         "answer 3 a 3",
                                            "answer 4 b 2"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
    BOOST_TEST(!off_loop);                       // hooks and answers on the loop, never the database's threads
    BOOST_TEST(worker->get_stats().jobs == 2u);  // the hold, and the group's one job
    // Small messages published alone go to the outbox's tail, grouped or not.
    BOOST_TEST(count("SELECT count(*) FROM outbox_tail") == 5);
    BOOST_TEST(count("SELECT next_seq FROM streams WHERE stream='a'") == 4);
}

// A publish its publisher withdrew before the database thread took its group
// (primary_node's cancellation) stores nothing and takes no seq; the others
// in its group are stored as usual.
BOOST_FIXTURE_TEST_CASE(a_publish_whose_claim_fails_stores_nothing_and_completes_aborted, fixture) {
    std::vector<int> claims_asked;
    std::vector<std::thread::id> claim_threads;
    std::optional<primary::publish_batcher::result> withdrawn;
    {
        hold busy(*worker);
        publish(0, "a");
        batch->async_publish(
            "a", "{\"withdrawn\":1}", 1'000,
            [&] {
                claims_asked.push_back(1);
                claim_threads.push_back(std::this_thread::get_id());
                return false;
            },
            [&](primary::publish_batcher::result r) { withdrawn = std::move(r); });
        answered.push_back(true);  // (its answer is `withdrawn`)
        batch->async_publish(
            "a", "{}", 1'000,
            [&] {
                claims_asked.push_back(2);
                claim_threads.push_back(std::this_thread::get_id());
                return true;
            },
            [this](primary::publish_batcher::result r) {
                answered[2] = true;
                events.push_back("answer 2 a " + std::to_string(r ? r->seq : 0));
            });
        answered.push_back(false);
        publish(3, "a");  // no claim: the group still asks the others'
        BOOST_TEST(batch->groups() == 1u);
        busy.release();
    }
    BOOST_REQUIRE(run_until([&] { return all_answered() && withdrawn; }));
    BOOST_TEST((claims_asked == std::vector<int>{1, 2}));         // on the database thread, in order, once each
    for (auto t : claim_threads) BOOST_TEST((t != loop_thread));  // (as the group is taken, not when made)
    BOOST_REQUIRE(!withdrawn->has_value());
    BOOST_TEST((withdrawn->error().code == asio::error::operation_aborted));
    const std::vector<std::string> expected{"stored a 1 {}", "stored a 2 {}", "stored a 3 {}",
                                            "answer 0 a 1",  "answer 2 a 2",  "answer 3 a 3"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
    BOOST_TEST(count("SELECT count(*) FROM outbox_tail WHERE payload LIKE '%withdrawn%'") == 0);
}

// seal(): a publish made after it does not join the group before, so that a
// job queued between them (a batch, a transactional publish) is stored
// between them too.
BOOST_FIXTURE_TEST_CASE(a_publish_after_seal_starts_a_group_of_its_own, fixture) {
    {
        hold busy(*worker);
        publish(0, "a");
        batch->seal();
        worker->post(
            [&](app::database&) {
                out->publish({{"a", "{\"between\":1}"}, {"a", "{\"between\":2}"}}, 1'000);
                return true;
            },
            [](const app::db_failure*) {});
        publish(1, "a");
        BOOST_TEST(batch->groups() == 2u);
        busy.release();
    }
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    const std::vector<std::string> expected{"stored a 1 {}", "answer 0 a 1", "stored a 4 {}", "answer 1 a 4"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_publish_after_the_thread_took_the_group_starts_the_next_one, fixture) {
    std::promise<void> second_started, second_gate;
    {
        hold busy(*worker);
        publish(0, "a");
        // Queued behind the group: the database thread runs the group, then
        // waits here while the group's commit is pending.
        worker->post(
            [&](app::database&) {
                second_started.set_value();
                second_gate.get_future().wait();
                return true;
            },
            [](const app::db_failure*) {});
        busy.release();
    }
    second_started.get_future().wait();  // the group was taken
    publish(1, "a");
    BOOST_TEST(batch->groups() == 2u);
    second_gate.set_value();
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    const std::vector<std::string> expected{"stored a 1 {}", "answer 0 a 1", "stored a 2 {}", "answer 1 a 2"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_group_that_fails_fails_each_of_its_publishes_and_takes_no_seq, fixture) {
    // The storage refusing one row fails the group's transaction slot: what
    // fails a group commit is shared by every publish in it.
    db->exec(
        "CREATE TRIGGER refuse BEFORE INSERT ON outbox_tail WHEN NEW.payload LIKE '%refuse%' "
        "BEGIN SELECT RAISE(ABORT, 'the test refuses this row'); END");
    {
        hold busy(*worker);
        publish(0, "a");
        publish(1, "a", "{\"refuse\":1}");
        publish(2, "b");
        busy.release();
    }
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    BOOST_TEST(events.size() == 3u);
    for (std::size_t i = 0; i < events.size(); ++i) {
        BOOST_TEST(events[i].rfind("failed " + std::to_string(i) + ": ", 0) == 0u, events[i]);
        BOOST_TEST(events[i].find("the test refuses this row") != std::string::npos, events[i]);
    }
    BOOST_TEST(count("SELECT count(*) FROM outbox_tail") == 0);
    BOOST_TEST(count("SELECT count(*) FROM streams") == 0);
    // The next group stores from seq 1.
    events.clear();
    publish(3, "a");
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    const std::vector<std::string> expected{"stored a 1 {}", "answer 3 a 1"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
}

namespace {
struct failing_flush : fixture {
    failing_flush() : fixture(app::sync_mode::full, [](int) { return EIO; }) {}
};
}  // namespace

// After a failed flush the database thread runs nothing: a group is
// answered with the failure without being taken, and a publish made after
// that answer must start a group of its own (else it would wait for ever).
BOOST_FIXTURE_TEST_CASE(a_group_answered_without_running_takes_no_more_publishes, failing_flush) {
    publish(0, "a");
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    BOOST_TEST(events.at(0).find("cannot flush") != std::string::npos, events.at(0));
    for (std::size_t i = 1; i <= 3; ++i) {
        publish(i, "a");
        BOOST_REQUIRE(run_until([&] { return all_answered(); }));
        BOOST_TEST(events.at(i).rfind("failed " + std::to_string(i) + ": ", 0) == 0u, events.at(i));
    }
    BOOST_TEST(batch->groups() == 4u);
}

BOOST_FIXTURE_TEST_CASE(a_publisher_that_throws_keeps_no_other_from_its_answer, fixture) {
    bool second = false;
    {
        hold busy(*worker);
        batch->async_publish("a", "{}", 1'000,
                             [](primary::publish_batcher::result) { throw std::runtime_error("publisher's own"); });
        batch->async_publish("a", "{}", 1'000, [&](primary::publish_batcher::result r) { second = r.has_value(); });
        busy.release();
    }
    bool thrown = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!second && std::chrono::steady_clock::now() < end) {
        try {
            ioc.restart();
            ioc.run_for(std::chrono::milliseconds(5));
        } catch (const std::runtime_error& e) {
            thrown = std::string(e.what()) == "publisher's own";
        }
    }
    BOOST_TEST(second);
    BOOST_TEST(thrown);  // not swallowed: it leaves the loop's run() after the others' answers
}

BOOST_FIXTURE_TEST_CASE(a_group_whose_publishes_were_all_withdrawn_stores_nothing, fixture) {
    std::vector<primary::publish_batcher::result> results;
    {
        hold busy(*worker);
        for (int i = 0; i < 2; ++i)
            batch->async_publish(
                "a", "{}", 1'000, [] { return false; },
                [&](primary::publish_batcher::result r) { results.push_back(std::move(r)); });
        busy.release();
    }
    BOOST_REQUIRE(run_until([&] { return results.size() == 2; }));
    for (auto& r : results) {
        BOOST_REQUIRE(!r.has_value());
        BOOST_TEST((r.error().code == asio::error::operation_aborted));
    }
    BOOST_TEST(events.empty());  // delivery was told of nothing
    BOOST_TEST(count("SELECT count(*) FROM outbox_tail") == 0);
    BOOST_TEST(count("SELECT count(*) FROM streams") == 0);
}

// The worker stopped (the node is ending): answered with shut_down through
// the loop, never inline.
BOOST_FIXTURE_TEST_CASE(a_publish_after_the_worker_stopped_is_answered_through_the_loop, fixture) {
    worker->stop();
    publish(0, "a");
    BOOST_TEST(events.empty());  // not inline
    BOOST_REQUIRE(run_until([&] { return all_answered(); }));
    BOOST_TEST(events.at(0).find("failed 0: the database thread has stopped") == 0u, events.at(0));
    BOOST_TEST(!off_loop);
}

// A hook that throws (delivery failing to take a message) keeps neither the
// other messages' hooks nor any publisher from their answers; its exception
// leaves the loop's run() afterwards.
BOOST_FIXTURE_TEST_CASE(a_hook_that_throws_keeps_no_publisher_from_its_answer, fixture) {
    throw_on_stored = "{\"throws\":1}";
    {
        hold busy(*worker);
        publish(0, "a");
        publish(1, "a", "{\"throws\":1}");
        publish(2, "a");
        busy.release();
    }
    bool thrown = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!all_answered() && std::chrono::steady_clock::now() < end) {
        try {
            ioc.restart();
            ioc.run_for(std::chrono::milliseconds(5));
        } catch (const std::runtime_error& e) {
            thrown = std::string(e.what()) == "the hook's own";
        }
    }
    BOOST_TEST(thrown);
    const std::vector<std::string> expected{
        "stored a 1 {}", "stored a 2 {\"throws\":1}", "stored a 3 {}", "answer 0 a 1", "answer 1 a 2", "answer 2 a 3"};
    BOOST_TEST(events == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
