// One stream's delivery decisions (apps/primary/stream_fsm.hpp), driven the
// way node::deliver drives them but without sockets, timers or a database:
// each test feeds the events a driver would see and checks every action.
#include <primary/stream_fsm.hpp>

#include <steadfast/replication/envelope.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace steadfast::primary;
using namespace std::chrono_literals;
using type = stream_action::type;
using w = stream_action;

namespace {
pending_message msg(std::uint64_t seq, std::int64_t at_ms = 100) {
    return {seq, "i-" + std::to_string(seq), "{\"n\":" + std::to_string(seq) + "}", at_ms};
}
std::vector<pending_message> rows(std::uint64_t first, std::uint64_t last) {
    std::vector<pending_message> out;
    for (auto s = first; s <= last; ++s) out.push_back(msg(s, static_cast<std::int64_t>(s)));
    return out;
}
decision answer(verdict v, std::uint64_t upto = 0) {
    decision d;
    d.what = v;
    d.upto = upto;
    return d;
}
// The log could not be reached (the quick retries used up): the ladder.
decision log_unavailable() {
    decision d = answer(verdict::redeliver);
    d.link_error = {link_fault::kind::jetstream_unavailable};
    return d;
}
std::vector<std::uint64_t> seqs(const std::vector<pending_message>& b) {
    std::vector<std::uint64_t> out;
    for (const auto& m : b) out.push_back(m.seq);
    return out;
}
std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t last) {
    std::vector<std::uint64_t> out;
    for (auto s = first; s <= last; ++s) out.push_back(s);
    return out;
}

// The driver's side: the flags and the clock it reads before each resume,
// and the result of the action it carried out (`ev`).
struct harness {
    delivery_config c;
    stream_fsm fsm;
    stream_event ev;
    bool stop = false, online = true, retry_now = false, commit = true;
    std::int64_t now = 1'000'000;
    std::uint64_t drained = 0;

    explicit harness(std::uint64_t acked = UINT64_MAX, std::uint64_t pending = 0, delivery_config cfg = small())
        : c(cfg), fsm(c, "s", acked, acked, pending) {}
    static delivery_config small() {
        delivery_config d;
        d.batch_max = 3;
        return d;
    }
    // The same over a link that is a log (JetStream): read before sending.
    static delivery_config small_log() {
        delivery_config d = small();
        d.reads_log = true;
        return d;
    }
    // What the outbox holds: a read-ahead finds the rows after its `after`,
    // at once (as a fast database would), unless held.
    std::vector<pending_message> db;
    bool hold_read_ahead = false;
    unsigned read_aheads = 0;

    // The next action but start_read_ahead, which the driver carries out
    // without waiting (counted here).
    stream_action next() {
        for (;;) {
            ev.stop = stop;
            ev.online = online;
            ev.retry_now = retry_now;
            ev.commit = commit;
            ev.now_ms = now;
            auto a = fsm.resume(ev);
            ev = {};
            if (a.clear_commit) commit = false;
            if (a.clear_retry_now) retry_now = false;
            if (a.check_drained) ++drained;
            if (a.what != type::start_read_ahead) return a;
            ++read_aheads;
            BOOST_TEST(fsm.reading_ahead());
            if (!hold_read_ahead) finish_read_ahead();
        }
    }
    void finish_read_ahead() {
        auto ra = fsm.read_ahead_slot();
        ra->rows.clear();
        for (const auto& m : db)
            if (m.seq > ra->after) ra->rows.push_back(m);
        ra->running = false;
    }
    // Reads `r` for a read action (checked), and returns the next action.
    stream_action after_read(std::vector<pending_message> r, schedule s = {}, std::uint64_t position = 0) {
        ev.rows = std::move(r);
        ev.sched = s;
        ev.position = position;
        return next();
    }
    stream_action answered(decision d) {
        ev.d = std::move(d);
        return next();
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_stream_fsm)

BOOST_AUTO_TEST_CASE(a_new_stream_reads_its_position_sends_in_batches_and_acknowledges) {
    harness h(UINT64_MAX, 5);
    auto a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from_position);
    BOOST_TEST(a.clear_commit);  // the wake is consumed by the read
    a = h.after_read(rows(11, 15), {}, 10);
    BOOST_TEST(h.fsm.acked() == 10u);
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(11, 13), boost::test_tools::per_element());
    BOOST_TEST(h.fsm.head_at_ms() == 11);
    // A batch of 3 left 2 in the window: the next rows were read meanwhile.
    BOOST_TEST(h.read_aheads == 1u);
    BOOST_TEST(h.fsm.read_ahead_slot()->after == 15u);
    a = h.answered(answer(verdict::ack, 13));
    BOOST_TEST((a.what == type::acknowledged));
    BOOST_TEST(a.upto == 13u);
    BOOST_TEST(a.delivered == 3u);
    BOOST_TEST(a.first_fresh == 11u);
    BOOST_TEST(h.fsm.pending() == 2u);
    BOOST_TEST(h.fsm.acked() == 13u);
    // The read-ahead found nothing more; the rest goes without waiting for it
    // (the window is not empty).
    a = h.next();
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(14, 15), boost::test_tools::per_element());
    a = h.answered(answer(verdict::ack, 15));
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(h.fsm.pending() == 0u);
    BOOST_TEST(h.fsm.head_at_ms() == 0);
}

BOOST_AUTO_TEST_CASE(an_empty_window_waits_for_a_read_ahead_rather_than_read_twice) {
    harness h(10, 10);
    h.hold_read_ahead = true;
    h.next();
    auto a = h.after_read(rows(11, 14));
    BOOST_TEST((a.what == type::send));  // 11..13, reading after 14 meanwhile
    BOOST_TEST(h.read_aheads == 1u);
    h.answered(answer(verdict::ack, 13));
    a = h.next();
    BOOST_TEST((a.what == type::send));  // 14: no second read-ahead while one runs
    BOOST_TEST(h.read_aheads == 1u);
    h.answered(answer(verdict::ack, 14));
    // The window is empty and the read-ahead still runs: wait for it.
    a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST(!a.delay.has_value());
    BOOST_TEST(a.wake_on == (w::on_read_ahead | w::on_stop));
    h.db = rows(11, 20);
    h.finish_read_ahead();
    a = h.next();
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(15, 17), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(rows_that_joined_in_memory_while_a_read_ahead_ran_are_not_sent_twice) {
    harness h(10, 5);
    h.hold_read_ahead = true;
    h.next();
    auto a = h.after_read(rows(11, 14));  // 11..13 sent, 14 left, reading after 14
    h.answered(answer(verdict::ack, 13));
    auto m = msg(15);
    h.fsm.committed(1, &m, true);  // joins the window in memory meanwhile
    h.db = rows(11, 16);           // the read-ahead sees 15 and 16
    h.finish_read_ahead();
    a = h.next();
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(14, 16), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_read_ahead_for_a_forgotten_window_is_dropped) {
    harness h(10, 4);
    h.hold_read_ahead = true;
    h.next();
    BOOST_TEST((h.after_read(rows(11, 14)).what == type::send));  // 11..13, and a read-ahead after 14
    auto ra = h.fsm.read_ahead_slot();
    auto a = h.answered(answer(verdict::redeliver));  // forgets the window
    BOOST_TEST((a.what == type::next_step));
    ra->rows = rows(15, 16);
    ra->running = false;
    a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 10u);
    a = h.after_read(rows(11, 11));
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(11, 11), boost::test_tools::per_element());  // not 15, 16
}

BOOST_AUTO_TEST_CASE(a_commit_joins_the_window_in_memory_and_is_sent_without_a_read) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::ack, 11));  // after the send
    auto a = h.next();
    // Everything sent and acknowledged, nothing more known: wait for more.
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 5000ms));
    BOOST_TEST(a.wake_on == (w::on_commit | w::on_stop));
    BOOST_TEST(a.check_drained);
    BOOST_TEST(a.clear_commit);  // else a wake left set would end the wait at once, again and again
    auto m = msg(12);
    h.fsm.committed(1, &m, true);
    h.commit = true;
    BOOST_TEST(h.fsm.pending() == 1u);
    a = h.next();
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(12, 12), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_commit_while_offline_or_out_of_order_is_read_back) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::ack, 11));
    h.next();  // the grace wait
    auto m = msg(12);
    h.fsm.committed(1, &m, false);  // offline: not in memory
    h.commit = true;
    auto a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 11u);
    a = h.after_read(rows(12, 12));
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(12, 12), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_idle_stream_reads_once_more_then_retires) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::ack, 11));
    auto a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST(h.drained == 1u);
    // The grace passes without a commit: one read, then retire.
    a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 11u);
    a = h.after_read({});
    BOOST_TEST((a.what == type::done));
    BOOST_TEST(a.check_drained);
    BOOST_TEST((h.next().what == type::done));  // and stays done
    BOOST_TEST(h.fsm.batch().empty());          // nothing held after the end
}

BOOST_AUTO_TEST_CASE(a_wake_during_the_last_read_keeps_the_stream) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::ack, 11));
    h.next();  // the grace wait, no commit
    auto a = h.next();
    BOOST_TEST((a.what == type::read));
    h.commit = true;  // woken meanwhile
    a = h.after_read({});
    BOOST_TEST((a.what == type::wait));  // waits again instead of retiring
    BOOST_TEST(a.check_drained);
}

BOOST_AUTO_TEST_CASE(an_empty_read_waits_for_a_commit_then_reads_again) {
    harness h(10, 0);
    auto a = h.next();
    a = h.after_read({});
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 5000ms));
    BOOST_TEST(a.check_drained);
    h.fsm.committed(1, nullptr, true);
    h.commit = true;
    a = h.next();
    BOOST_TEST((a.what == type::read));
    a = h.after_read({});
    BOOST_TEST((a.what == type::wait));
    a = h.next();  // no commit within the grace
    BOOST_TEST((a.what == type::done));
}

BOOST_AUTO_TEST_CASE(a_failed_read_is_reported_and_tried_again_after_a_pause) {
    harness h(10, 1);
    h.next();
    h.ev.error = "disk I/O error";
    auto a = h.next();
    BOOST_TEST((a.what == type::storage_failed));
    BOOST_TEST(a.detail == "disk I/O error");
    BOOST_TEST((a.delay == 1000ms));
    BOOST_TEST(a.wake_on == w::on_stop);
    a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 10u);
}

BOOST_AUTO_TEST_CASE(a_read_for_a_window_forgotten_meanwhile_is_read_again) {
    harness h(10, 0);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::ack, 11));
    auto a = h.next();  // grace wait
    a = h.next();       // no commit: the read before retiring
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(h.fsm.resend_last());  // a recheck meanwhile lowers the position
    BOOST_TEST(h.fsm.acked() == 10u);
    a = h.after_read({});  // the read after 11 is stale
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 10u);
    a = h.after_read(rows(11, 11));
    BOOST_TEST((a.what == type::send));
    a = h.answered(answer(verdict::ack, 11));
    BOOST_TEST(a.delivered == 0u);  // acknowledged before: not counted again
    BOOST_TEST(a.first_fresh == 12u);
}

BOOST_AUTO_TEST_CASE(the_recheck_resends_only_from_an_idle_stream_and_once) {
    harness h(10, 2);
    BOOST_TEST(!h.fsm.resend_last());  // messages pending: the next send finds out
    harness idle(10, 0);
    BOOST_TEST(idle.fsm.resend_last());
    BOOST_TEST(!idle.fsm.resend_last());  // its resend is on its way
    harness none(0, 0);
    BOOST_TEST(!none.fsm.resend_last());  // nothing acknowledged
    harness unknown(UINT64_MAX, 0);
    BOOST_TEST(!unknown.fsm.resend_last());
}

BOOST_AUTO_TEST_CASE(a_scheduled_head_waits_for_its_ladder_step) {
    harness h(10, 1);
    h.next();
    schedule s{2, h.now + 30'000, 11};
    auto a = h.after_read(rows(11, 11), s);
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 30'000ms));
    BOOST_TEST(a.wake_on == (w::on_offline | w::on_retry_now | w::on_stop));
    h.now += 10'000;  // woken early (a spurious wake): waits the rest
    a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 20'000ms));
    h.now += 20'000;
    a = h.next();
    BOOST_TEST((a.what == type::send));
    // A success after ladder steps says so once, and drops the schedule.
    a = h.answered(answer(verdict::ack, 11));
    BOOST_TEST((a.what == type::acknowledged));
    a = h.next();
    BOOST_TEST((a.what == type::link_recovered));
    BOOST_TEST(a.ladder_steps == 2u);
    BOOST_TEST(a.seq == 11u);
    h.next();
    BOOST_TEST(h.fsm.sched().attempts == 0u);
}

BOOST_AUTO_TEST_CASE(another_heads_schedule_is_not_waited) {
    harness h(10, 1);
    h.next();
    auto a = h.after_read(rows(11, 11), schedule{3, h.now + 30'000, 9});
    BOOST_TEST((a.what == type::send));
    a = h.answered(answer(verdict::ack, 11));
    BOOST_TEST((h.next().what != type::link_recovered));
}

BOOST_AUTO_TEST_CASE(the_secondary_coming_back_ends_a_ladder_wait) {
    harness h(10, 1);
    h.next();
    auto a = h.after_read(rows(11, 11), schedule{1, h.now + 60'000, 11});
    BOOST_TEST((a.what == type::wait));
    h.online = false;  // lost during the wait: wait for it to come back, without a deadline
    a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST(!a.delay.has_value());
    BOOST_TEST(a.wake_on == (w::on_online | w::on_retry_now | w::on_stop));
    h.online = true;
    a = h.next();
    BOOST_TEST((a.what == type::send));  // at once, before the step's time
}

BOOST_AUTO_TEST_CASE(an_offline_ladder_wait_ends_when_the_secondary_is_back) {
    harness h(10, 1);
    h.online = false;
    h.next();
    auto a = h.after_read(rows(11, 11), schedule{1, h.now + 60'000, 11});
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 60'000ms));
    BOOST_TEST(a.wake_on == (w::on_online | w::on_retry_now | w::on_stop));
    h.online = true;
    h.now += 5;
    BOOST_TEST((h.next().what == type::send));
    // Still offline when the step's time comes: sent anyway (the engine's gate waits).
    harness g(10, 1);
    g.online = false;
    g.next();
    g.after_read(rows(11, 11), schedule{1, g.now + 60'000, 11});
    g.now += 60'000;
    BOOST_TEST((g.next().what == type::send));
}

BOOST_AUTO_TEST_CASE(the_operator_asking_ends_a_ladder_wait_and_is_consumed) {
    harness h(10, 1);
    h.next();
    auto a = h.after_read(rows(11, 11), schedule{1, h.now + 60'000, 11});
    BOOST_TEST((a.what == type::wait));
    h.retry_now = true;
    a = h.next();
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(!h.retry_now);  // cleared before the send
    // At start the flag is set before anything: the first send clears it.
    harness s(10, 1);
    s.retry_now = true;
    s.next();
    a = s.after_read(rows(11, 11), schedule{1, s.now + 60'000, 11});
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(!s.retry_now);
    // Without a schedule too: the flag only skips the next ladder wait.
    harness n(10, 1);
    n.retry_now = true;
    n.next();
    a = n.after_read(rows(11, 11));
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(!n.retry_now);
}

BOOST_AUTO_TEST_CASE(a_link_failure_writes_the_next_ladder_step_and_reads_again) {
    harness h(10, 3);
    h.next();
    h.after_read(rows(11, 13));
    decision d = answer(verdict::redeliver);
    d.link_error = {link_fault::kind::http_status, 503};
    h.ev.server_wait = 7s;
    auto a = h.answered(d);
    BOOST_TEST((a.what == type::next_step));
    BOOST_TEST(a.seq == 11u);
    BOOST_TEST((a.server_wait == 7s));
    BOOST_TEST(h.fsm.current().link_error.label() == "http_503");
    a = h.next();                        // written
    BOOST_TEST((a.what == type::read));  // the schedule is read with the window
    BOOST_TEST(a.from == 10u);
    // A step that could not be written: pause, then read again.
    a = h.after_read(rows(11, 13));
    a = h.answered(d);
    BOOST_TEST((a.what == type::next_step));
    h.ev.ok = false;
    a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 1000ms));
    BOOST_TEST((h.next().what == type::read));
}

BOOST_AUTO_TEST_CASE(a_rejected_batch_is_isolated_then_the_message_dead_lettered) {
    harness h(10, 3);
    h.next();
    h.after_read(rows(11, 13));
    auto a = h.answered(answer(verdict::isolate));
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(11, 13));
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(11, 11), boost::test_tools::per_element());
    h.answered(answer(verdict::ack, 11));
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(12, 12), boost::test_tools::per_element());
    decision bad = answer(verdict::dead_letter);
    bad.reason = "invalid_payload";
    a = h.answered(bad);
    BOOST_TEST((a.what == type::dead_letter));
    BOOST_TEST(h.fsm.batch().front().seq == 12u);
    BOOST_TEST(h.fsm.current().reason == "invalid_payload");
    a = h.next();  // written: the window (with its tombstone) is read again
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 11u);
    a = h.after_read(rows(12, 13));
    BOOST_TEST(seqs(h.fsm.batch()) == range(12, 12), boost::test_tools::per_element());  // still one at a time
    h.answered(answer(verdict::ack, 12));
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(13, 13), boost::test_tools::per_element());
    h.answered(answer(verdict::ack, 13));
    a = h.next();  // past the isolated batch: whole batches again
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(14, 15));
    BOOST_TEST(seqs(h.fsm.batch()) == range(14, 15), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_dead_letter_that_cannot_be_written_pauses) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    h.answered(answer(verdict::dead_letter));
    h.ev.ok = false;
    auto a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == 1000ms));
}

BOOST_AUTO_TEST_CASE(a_refused_tombstone_blocks_the_stream) {
    harness h(10, 1);
    h.next();
    auto t = msg(11);
    t.payload = steadfast::envelope::encode_tombstone(t.id, "invalid_payload");
    BOOST_REQUIRE(steadfast::envelope::is_tombstone(t.payload));
    h.after_read({t});
    decision bad = answer(verdict::dead_letter);
    bad.reason = "invalid";
    auto a = h.answered(bad);
    BOOST_TEST((a.what == type::block));
    BOOST_TEST(a.reason == "tombstone_refused");
    BOOST_TEST(a.detail.find("seq 11") != std::string::npos);
    BOOST_TEST((h.next().what == type::done));
}

BOOST_AUTO_TEST_CASE(a_lost_secondary_rewinds_within_retention) {
    harness h(20, 2);
    h.next();
    h.after_read(rows(21, 22));
    decision gap = answer(verdict::rewind, 14);  // it expects 15
    gap.detail = "gap: expects seq 15";
    auto a = h.answered(gap);
    BOOST_TEST((a.what == type::rewind_facts));
    h.ev.oldest = 10;
    h.ev.next_seq = 23;
    a = h.next();
    BOOST_TEST((a.what == type::rewound));
    BOOST_TEST(a.seq == 15u);
    BOOST_TEST(a.detail.find("gap: expects seq 15") == 0);
    a = h.next();
    BOOST_TEST(h.fsm.acked() == 14u);
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 14u);
    h.db = rows(15, 22);  // what the read-ahead finds after 17
    a = h.after_read(rows(15, 17));
    a = h.answered(answer(verdict::ack, 17));
    // Acknowledged again, not delivered again; the latency counts only new ones.
    BOOST_TEST((a.what == type::acknowledged));
    BOOST_TEST(a.delivered == 0u);
    BOOST_TEST(a.first_fresh == 21u);
    BOOST_TEST(h.fsm.pending() == 2u);
    BOOST_TEST(h.fsm.acked_max() == 20u);
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(18, 20), boost::test_tools::per_element());
    a = h.answered(answer(verdict::ack, 20));
    BOOST_TEST(a.delivered == 0u);
    BOOST_TEST(h.fsm.pending() == 2u);
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(21, 22), boost::test_tools::per_element());
    a = h.answered(answer(verdict::ack, 22));
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(a.first_fresh == 21u);
    BOOST_TEST(h.fsm.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_rewind_beyond_retention_blocks) {
    harness h(20, 1);
    h.next();
    h.after_read(rows(21, 21));
    h.answered(answer(verdict::rewind, 4));
    h.ev.oldest = 10;  // 5 is gone
    h.ev.next_seq = 22;
    auto a = h.next();
    BOOST_TEST((a.what == type::block));
    BOOST_TEST(a.reason == "beyond_retention");
    BOOST_TEST((h.next().what == type::done));
}

BOOST_AUTO_TEST_CASE(the_same_rewind_again_without_progress_blocks) {
    harness h(20, 1);
    h.next();
    h.after_read(rows(21, 21));
    h.answered(answer(verdict::rewind, 14));
    h.ev.oldest = 10;
    h.ev.next_seq = 22;
    BOOST_TEST((h.next().what == type::rewound));
    h.next();
    h.after_read(rows(16, 18));  // 15 is missing from retention
    auto a = h.answered(answer(verdict::rewind, 14));
    h.ev.oldest = 10;
    h.ev.next_seq = 22;
    a = h.next();
    BOOST_TEST((a.what == type::block));
    BOOST_TEST(a.reason == "beyond_retention");
    BOOST_TEST(a.detail.find("not contiguous") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(progress_past_a_rewind_allows_the_same_rewind_later) {
    harness h(20, 1);
    h.next();
    h.after_read(rows(21, 21));
    h.answered(answer(verdict::rewind, 14));
    h.ev.oldest = 10;
    h.ev.next_seq = 22;
    h.db = rows(15, 18);
    h.next();  // rewound
    h.next();  // read
    h.after_read(rows(15, 17));
    h.answered(answer(verdict::ack, 17));  // past 14
    auto a = h.next();
    BOOST_TEST((a.what == type::send));           // 18, read ahead
    a = h.answered(answer(verdict::rewind, 14));  // restored again
    BOOST_TEST((a.what == type::rewind_facts));
    h.ev.oldest = 10;
    h.ev.next_seq = 22;
    BOOST_TEST((h.next().what == type::rewound));
}

BOOST_AUTO_TEST_CASE(facts_that_cannot_be_read_pause_and_read_again) {
    harness h(20, 1);
    h.next();
    h.after_read(rows(21, 21));
    h.answered(answer(verdict::rewind, 14));
    h.ev.error = "database is locked";
    auto a = h.next();
    BOOST_TEST((a.what == type::storage_failed));
    BOOST_TEST((h.next().what == type::read));
}

BOOST_AUTO_TEST_CASE(a_conflict_blocks_and_a_newer_epoch_demotes) {
    harness h(10, 1, [] {
        auto c = harness::small();
        c.epoch = 7;
        return c;
    }());
    h.next();
    h.after_read(rows(11, 11));
    decision c = answer(verdict::block);
    c.reason = "conflict";
    c.detail = "another id at seq 11";
    auto a = h.answered(c);
    BOOST_TEST((a.what == type::block));
    BOOST_TEST(a.reason == "conflict");
    BOOST_TEST(a.detail == "another id at seq 11");
    BOOST_TEST((h.next().what == type::done));

    harness d(10, 1, [] {
        auto c = harness::small();
        c.epoch = 7;
        return c;
    }());
    d.next();
    d.after_read(rows(11, 11));
    decision stale = answer(verdict::demote);
    stale.epoch = 9;
    a = d.answered(stale);
    BOOST_TEST((a.what == type::demote));
    BOOST_TEST(a.epoch == 9u);
    BOOST_TEST((d.next().what == type::done));
    // An epoch the secondary did not say: above our own.
    harness e(10, 1, [] {
        auto c = harness::small();
        c.epoch = 7;
        return c;
    }());
    e.next();
    e.after_read(rows(11, 11));
    a = e.answered(answer(verdict::demote));
    BOOST_TEST(a.epoch == 8u);
}

BOOST_AUTO_TEST_CASE(stopping_ends_the_processor) {
    harness h(10, 1);
    h.next();
    h.after_read(rows(11, 11));
    auto a = h.answered(answer(verdict::stop));
    BOOST_TEST((a.what == type::done));
    // Stop seen between batches.
    harness s(10, 5);
    s.next();
    s.after_read(rows(11, 15));
    s.stop = true;
    a = s.answered(answer(verdict::ack, 13));
    BOOST_TEST((a.what == type::acknowledged));
    BOOST_TEST((s.next().what == type::done));
    // Stop during a wait for a read-ahead.
    harness r(10, 3);
    r.hold_read_ahead = true;
    r.next();
    r.after_read(rows(11, 14));
    r.answered(answer(verdict::ack, 13));
    r.next();  // 14
    r.answered(answer(verdict::ack, 14));
    a = r.next();
    BOOST_TEST((a.what == type::wait));
    r.stop = true;
    BOOST_TEST((r.next().what == type::done));
}

BOOST_AUTO_TEST_CASE(stop_ends_a_ladder_wait_and_an_idle_wait) {
    harness h(10, 1);
    h.next();
    auto a = h.after_read(rows(11, 11), schedule{1, h.now + 60'000, 11});
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.wake_on & w::on_stop));
    h.stop = true;
    BOOST_TEST((h.next().what == type::done));
    harness i(10, 0);
    i.next();
    a = i.after_read({});
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.wake_on & w::on_stop));
    i.stop = true;
    BOOST_TEST((i.next().what == type::done));
}

BOOST_AUTO_TEST_CASE(a_log_is_read_before_the_first_send_and_after_a_wrong_sequence) {
    const delivery_config js = harness::small_log();
    harness h(10, 3, js);
    h.next();
    auto a = h.after_read(rows(11, 13));
    BOOST_TEST((a.what == type::sync_log));
    // The log holds 11 and 12 already (their acknowledgement was lost).
    a = h.answered(answer(verdict::ack, 12));
    BOOST_TEST((a.what == type::acknowledged));
    BOOST_TEST(a.delivered == 2u);
    BOOST_TEST(a.first_fresh == 11u);
    a = h.next();
    BOOST_TEST((a.what == type::read));  // the window was forgotten
    BOOST_TEST(a.from == 12u);
    a = h.after_read(rows(13, 13));
    BOOST_TEST((a.what == type::send));
    a = h.answered(answer(verdict::resync));
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(13, 13));
    BOOST_TEST((a.what == type::sync_log));
    BOOST_TEST(h.fsm.batch().empty());  // the failed batch's latency is not observed by the log's ack
    // The log unreachable: the ladder, with the head after what is acknowledged.
    const decision down = log_unavailable();
    a = h.answered(down);
    BOOST_TEST((a.what == type::next_step));
    BOOST_TEST(a.seq == 13u);
    h.next();
    a = h.after_read(rows(13, 13));
    BOOST_TEST((a.what == type::sync_log));    // still to be read
    a = h.answered(answer(verdict::ack, 12));  // level: nothing to acknowledge
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(13, 13));
    BOOST_TEST((a.what == type::send));
}

// Issue 30: a batch stored just before its leader died loses its
// acknowledgement; the quick retries end (no responders), the ladder's step
// is written; when the link is back the resend is refused "wrong last
// sequence". The log is then read at once (not after the stored step), and
// its answer ends the ladder: the head is not held to its step either.
BOOST_AUTO_TEST_CASE(a_wrong_sequence_reads_the_log_at_once_and_its_answer_ends_the_ladder) {
    const delivery_config js = harness::small_log();
    harness h(10, 2, js);
    h.next();
    auto a = h.after_read(rows(11, 12));
    BOOST_TEST((a.what == type::sync_log));
    a = h.answered(answer(verdict::ack, 10));
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(11, 12));
    BOOST_TEST((a.what == type::send));
    const decision down = log_unavailable();
    a = h.answered(down);
    BOOST_TEST((a.what == type::next_step));
    BOOST_TEST(a.seq == 11u);
    const schedule step{1, h.now + 10'000, 11};
    a = h.next();
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(11, 12), step);
    BOOST_TEST((a.what == type::wait));  // the ladder's step, while the probe still passes
    BOOST_TEST((a.delay == std::chrono::milliseconds(10'000)));
    h.online = false;  // the probe sees the dead leader
    a = h.next();
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST(!a.delay);
    BOOST_TEST((a.wake_on & w::on_online));
    h.online = true;  // a new leader
    a = h.next();
    BOOST_TEST((a.what == type::send));  // at once: the secondary came back
    a = h.answered(answer(verdict::resync));
    BOOST_TEST((a.what == type::read));
    a = h.after_read(rows(11, 12), step);      // the stored step is still there
    BOOST_TEST((a.what == type::sync_log));    // the log answered: read it now, not in 10 s
    a = h.answered(answer(verdict::ack, 12));  // the batch was stored: its ack was lost
    BOOST_TEST((a.what == type::link_recovered));
    BOOST_TEST(a.seq == 12u);
    BOOST_TEST(a.ladder_steps == 1u);
    a = h.next();
    BOOST_TEST((a.what == type::acknowledged));
    BOOST_TEST(a.upto == 12u);
    BOOST_TEST(a.delivered == 2u);

    // The same, but the log lost the batch: its head is level, and the head
    // goes out at once all the same (the ladder is over: the log answers).
    // Seqs 11 and 12 pending, the log level at 10: sent, refused "wrong
    // sequence", and read again with the step stored.
    auto refused_with_step = [&](harness& x) {
        x.next();
        BOOST_REQUIRE((x.after_read(rows(11, 12)).what == type::sync_log));
        BOOST_REQUIRE((x.answered(answer(verdict::ack, 10)).what == type::read));
        BOOST_REQUIRE((x.after_read(rows(11, 12)).what == type::send));
        BOOST_REQUIRE((x.answered(answer(verdict::resync)).what == type::read));
        return x.after_read(rows(11, 12), step);
    };
    harness g(10, 2, js);
    a = refused_with_step(g);
    BOOST_TEST((a.what == type::sync_log));
    a = g.answered(answer(verdict::ack, 10));
    BOOST_TEST((a.what == type::link_recovered));
    BOOST_TEST(a.seq == 10u);
    a = g.next();
    BOOST_TEST((a.what == type::read));
    a = g.after_read(rows(11, 12));  // the driver cleared the stored step (link_recovered)
    BOOST_TEST((a.what == type::send));

    // A read of the log that fails (the link is down after all) waits for
    // the ladder's next step as before: no loop of reads.
    harness f(10, 2, js);
    a = refused_with_step(f);
    BOOST_TEST((a.what == type::sync_log));
    a = f.answered(down);
    BOOST_TEST((a.what == type::next_step));
    a = f.next();
    BOOST_TEST((a.what == type::read));
    a = f.after_read(rows(11, 12), schedule{2, f.now + 30'000, 11});
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == std::chrono::milliseconds(30'000)));
}

// The log read at a processor's start (a restart, with its retry-now)
// proves nothing about publishing (a publish permission may still be
// missing): the ladder's step is kept, and no link_recovered is said.
BOOST_AUTO_TEST_CASE(the_log_read_at_start_keeps_the_ladder) {
    const delivery_config js = harness::small_log();
    harness h(10, 1, js);
    h.retry_now = true;  // a restart tries at once
    const schedule step{3, h.now + 60'000, 11};
    h.next();
    auto a = h.after_read(rows(11, 11), step);
    BOOST_TEST((a.what == type::sync_log));
    a = h.answered(answer(verdict::ack, 10));
    BOOST_TEST((a.what == type::read));  // no link_recovered: the step stays stored
    a = h.after_read(rows(11, 11), step);
    BOOST_TEST((a.what == type::wait));
    BOOST_TEST((a.delay == std::chrono::milliseconds(60'000)));
}

BOOST_AUTO_TEST_CASE(a_log_that_lost_messages_rewinds_without_asking_the_outbox_again) {
    const delivery_config js = harness::small_log();
    harness h(20, 1, js);
    h.next();
    h.after_read(rows(21, 21));
    decision r = answer(verdict::rewind, 14);  // decide_log has checked retention
    r.detail = "the log is behind";
    auto a = h.answered(r);
    BOOST_TEST((a.what == type::rewound));
    BOOST_TEST(a.seq == 15u);
    a = h.next();
    BOOST_TEST((a.what == type::read));
    BOOST_TEST(a.from == 14u);
    a = h.after_read(rows(15, 16));
    BOOST_TEST((a.what == type::send));  // no second sync
}

BOOST_AUTO_TEST_CASE(a_partial_acknowledgement_reads_the_rest_again) {
    harness h(10, 5);
    h.next();
    h.after_read(rows(11, 15));                     // 11..13 sent, 14 and 15 wait in the window
    auto a = h.answered(answer(verdict::ack, 11));  // a gap inside the batch
    BOOST_TEST(a.delivered == 1u);
    a = h.next();
    BOOST_TEST((a.what == type::read));  // not 14 next: 12 and 13 are read again
    BOOST_TEST(a.from == 11u);
}

BOOST_AUTO_TEST_CASE(a_failed_read_ahead_is_read_again_by_a_read) {
    harness h(10, 4);
    h.hold_read_ahead = true;
    h.next();
    h.after_read(rows(11, 14));  // 11..13 sent, reading after 14
    h.answered(answer(verdict::ack, 13));
    auto ra = h.fsm.read_ahead_slot();
    ra->failed = true;
    ra->running = false;
    auto a = h.next();
    BOOST_TEST((a.what == type::send));  // 14, and the read-ahead is tried again
    BOOST_TEST(h.read_aheads == 2u);
    BOOST_TEST(h.fsm.read_ahead_slot()->after == 14u);
    h.answered(answer(verdict::ack, 14));
    a = h.next();
    BOOST_TEST((a.what == type::wait));  // for it, not an idle wait: the outbox may hold more
    BOOST_TEST(a.wake_on == (w::on_read_ahead | w::on_stop));
}

BOOST_AUTO_TEST_CASE(a_batch_respects_the_body_limit) {
    delivery_config c = harness::small();
    c.batch_max = 100;
    harness h(10, 5, c);
    h.next();
    auto r = rows(11, 15);
    const auto one = steadfast::envelope::encoded_size(r[0].id, "s", r[0].seq, 0, r[0].payload.size());
    // Exactly two envelopes, their commas and the batch's framing.
    h.c.body_limit =
        steadfast::envelope::batch_prefix.size() + steadfast::envelope::batch_suffix.size() + 2 * (one + 1);
    auto a = h.after_read(std::move(r));
    BOOST_TEST((a.what == type::send));
    BOOST_TEST(seqs(h.fsm.batch()) == range(11, 12), boost::test_tools::per_element());
    h.answered(answer(verdict::ack, 12));
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(13, 14), boost::test_tools::per_element());
    // One envelope less: one at a time.
    h.c.body_limit -= one;
    h.answered(answer(verdict::ack, 14));
    a = h.next();
    BOOST_TEST(seqs(h.fsm.batch()) == range(15, 15), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
