// The acknowledger: what the secondary acknowledged reaches the outbox within
// about 10 ms, every stream acknowledged meanwhile in one database job; a
// retired stream's mark is written at once, and flush() writes every mark; a
// write that fails is tried again until it is stored.
#include <primary/acknowledger.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <steadfast_test/scratch_dir.hpp>
#include <thread>

using namespace steadfast;
using namespace std::chrono_literals;

namespace {
struct fixture {
    test::scratch_dir scratch{"acknowledger"};  // removed after the members below
    std::optional<app::database> db;
    std::optional<primary::outbox> out;
    boost::asio::io_context ioc;
    std::optional<app::db_worker> worker;
    std::optional<primary::acknowledger> acks;
    fixture() {
        db.emplace(scratch.path.string(), "primary.db", "steadfast-primary", app::sync_mode::off);
        out.emplace(*db);
        for (const char* s : {"a", "b", "c"}) {
            std::vector<std::pair<std::string, std::string>> items(5, {s, "{}"});
            out->publish(items, 0);
        }
        worker.emplace(*db);
        acks.emplace(ioc.get_executor(), *out, *worker, 50ms);  // a failed write again after 50 ms
    }
    std::uint64_t jobs() const { return worker->get_stats().jobs; }
    // Runs the event loop until `n` jobs ran (or 2 s passed), then 30 ms more.
    void run_until_jobs(std::uint64_t n) {
        const auto give_up = std::chrono::steady_clock::now() + 2s;
        while (jobs() < n && std::chrono::steady_clock::now() < give_up) {
            ioc.restart();  // (run_for returns at once once the loop ran out of work)
            ioc.run_for(2ms);
        }
        run(30ms);
    }
    // From now on, writing a mark fails (as a full disk would fail it), or
    // works again.
    void fail_writes(bool on) {
        std::promise<bool> answered;
        auto done = answered.get_future();
        worker->post(
            [on](app::database& d) {
                d.exec(on ? "CREATE TRIGGER fail_acks BEFORE UPDATE ON streams BEGIN "
                            "SELECT RAISE(ABORT, 'no room (the test)'); END"
                          : "DROP TRIGGER fail_acks");
                return true;
            },
            [&answered](const app::db_failure* failure) { answered.set_value(failure == nullptr); });
        BOOST_REQUIRE(done.get());
    }
    // Runs the event loop for `d`, however often it runs out of work (a
    // database job's answer is posted to it from another thread).
    void run(std::chrono::milliseconds d) {
        const auto end = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < end) {
            ioc.restart();
            ioc.run_for(2ms);
        }
    }
    // Each stream's acknowledged seq in the outbox, once the worker is done
    // (the connection is the worker's while it runs).
    std::map<std::string, std::uint64_t> acked() {
        worker->stop();
        std::map<std::string, std::uint64_t> r;
        for (const auto& [name, s] : out->status()) r[name] = s.acked_seq;
        return r;
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_acknowledger)

BOOST_FIXTURE_TEST_CASE(a_burst_on_several_streams_is_one_job_with_each_streams_highest, fixture) {
    acks->acknowledged("a", 1);
    acks->acknowledged("b", 2);
    acks->acknowledged("a", 3);
    acks->acknowledged("c", 4);
    acks->acknowledged("b", 5);
    BOOST_TEST(jobs() == 0u);  // nothing before the timer
    run_until_jobs(1);
    BOOST_TEST(jobs() == 1u);  // one job for the three streams, and no other after it
    const auto got = acked();
    BOOST_TEST(got.at("a") == 3u);
    BOOST_TEST(got.at("b") == 5u);
    BOOST_TEST(got.at("c") == 4u);
}

BOOST_FIXTURE_TEST_CASE(acknowledgements_after_a_write_are_written_by_the_next_one, fixture) {
    acks->acknowledged("a", 1);
    run_until_jobs(1);
    acks->acknowledged("b", 2);  // only b changed since: a is not written again
    run_until_jobs(2);
    BOOST_TEST(jobs() == 2u);
    const auto got = acked();
    BOOST_TEST(got.at("a") == 1u);
    BOOST_TEST(got.at("b") == 2u);
    BOOST_TEST(got.at("c") == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_lower_acknowledgement_keeps_the_highest, fixture) {
    acks->acknowledged("a", 4);
    acks->acknowledged("a", 2);  // a rewind resending: the outbox keeps 4
    run_until_jobs(1);
    BOOST_TEST(acked().at("a") == 4u);
}

BOOST_FIXTURE_TEST_CASE(a_forgotten_stream_is_written_at_once_and_not_again, fixture) {
    acks->acknowledged("a", 2);
    acks->acknowledged("b", 3);
    acks->forget("a");  // retired: its mark goes now, by itself
    run_until_jobs(2);  // then the timer's job, for b alone
    BOOST_TEST(jobs() == 2u);
    acks->forget("b");  // written already: nothing more to write
    run(30ms);
    BOOST_TEST(jobs() == 2u);
    const auto got = acked();
    BOOST_TEST(got.at("a") == 2u);
    BOOST_TEST(got.at("b") == 3u);
}

BOOST_FIXTURE_TEST_CASE(flush_writes_every_mark_without_the_event_loop, fixture) {
    acks->acknowledged("a", 5);
    acks->acknowledged("c", 1);
    acks->flush();             // at stop: queued now, in one job
    const auto got = acked();  // the worker finishes what was queued before it stops
    BOOST_TEST(worker->get_stats().jobs == 1u);
    BOOST_TEST(got.at("a") == 5u);
    BOOST_TEST(got.at("c") == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_failed_write_is_tried_again_until_it_is_stored, fixture) {
    fail_writes(true);
    acks->acknowledged("a", 3);
    acks->acknowledged("b", 2);
    run_until_jobs(2);  // the write, failed
    run(200ms);         // tried again, failing, every 50 ms (not every 10: no flood)
    BOOST_TEST(jobs() >= 4u);
    BOOST_TEST(jobs() <= 9u);
    fail_writes(false);
    run(400ms);
    const auto n = jobs();
    run(200ms);  // stored: nothing more to write
    BOOST_TEST(jobs() == n);
    const auto got = acked();
    BOOST_TEST(got.at("a") == 3u);
    BOOST_TEST(got.at("b") == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_failed_write_goes_again_with_what_came_since, fixture) {
    fail_writes(true);
    acks->acknowledged("a", 2);
    run_until_jobs(2);  // failed
    acks->acknowledged("a", 5);
    acks->acknowledged("a", 4);  // a rewind resending: 5 stays the highest
    run_until_jobs(3);           // their write, failed too
    fail_writes(false);
    run(300ms);
    BOOST_TEST(acked().at("a") == 5u);
}

BOOST_FIXTURE_TEST_CASE(a_retired_streams_failed_write_is_kept_until_stored_then_dropped, fixture) {
    fail_writes(true);
    acks->acknowledged("a", 2);
    acks->acknowledged("b", 1);
    run_until_jobs(2);  // a and b written, failed
    acks->forget("a");  // retired while its mark waits to be tried again
    run(120ms);
    BOOST_TEST(acks->size() == 2u);     // a's mark is kept: it is not stored yet
    BOOST_TEST(acks->held("a") == 2u);  // what a stream starting again starts after
    fail_writes(false);
    run(300ms);
    BOOST_TEST(acks->size() == 1u);  // b is still active; a, stored, is gone
    BOOST_TEST(acks->held("a") == 0u);
    BOOST_TEST(acks->held("b") == 1u);
    const auto got = acked();
    BOOST_TEST(got.at("a") == 2u);
    BOOST_TEST(got.at("b") == 1u);
}

BOOST_FIXTURE_TEST_CASE(destroyed_with_its_timer_armed_the_handler_touches_nothing, fixture) {
    acks->acknowledged("a", 1);
    acks.reset();       // the timer's wait is cancelled
    ioc.run_for(30ms);  // its handler runs (ASan would see a use after free)
    BOOST_TEST(jobs() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
