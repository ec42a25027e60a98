// The primary's outbox on a real SQLite file: acknowledgement marks and
// retention (--retain), the upgrade of an outbox that kept a time on every
// acknowledged row, and the tail (small messages in arrival order until a
// fold moves them into the table keyed by stream and seq).
#include <primary/outbox.hpp>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <random>
#include <steadfast_test/scratch_dir.hpp>

using namespace steadfast;

namespace {
struct fixture {
    test::scratch_dir scratch{"outbox"};  // removed after the members below
    const std::filesystem::path dir = scratch.path;
    std::optional<app::database> db;
    std::optional<primary::outbox> out;
    fixture() { open(); }
    void open() {
        out.reset();
        db.reset();
        db.emplace(dir.string(), "primary.db", "steadfast-primary", app::sync_mode::off);
        out.emplace(*db);
    }
    // Each alone, as HTTP publishes them (the tail's way in).
    void each(const std::vector<std::pair<std::string, std::string>>& items, std::int64_t at = 0) {
        for (const auto& item : items) out->publish({item}, at);
    }
    void singles(const std::string& stream, int n, std::int64_t at = 0) {
        for (int i = 0; i < n; ++i) out->publish({{stream, "{\"n\":" + std::to_string(i) + "}"}}, at);
    }
    void publish(const std::string& stream, int n, std::int64_t at = 0) {
        std::vector<std::pair<std::string, std::string>> items;
        for (int i = 0; i < n; ++i) items.emplace_back(stream, "{\"n\":" + std::to_string(i) + "}");
        out->publish(items, at);
    }
    // The seqs still in the outbox, acknowledged or not.
    std::vector<std::uint64_t> kept(const std::string& stream) {
        std::vector<std::uint64_t> seqs;
        for (auto& m : out->pending(stream, 0, 1'000'000, 1u << 30)) seqs.push_back(m.seq);
        return seqs;
    }
    std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
        std::vector<std::uint64_t> r;
        for (auto s = from; s <= to; ++s) r.push_back(s);
        return r;
    }
    std::int64_t marks() { return count("SELECT count(*) FROM acks"); }
    std::int64_t count(const std::string& sql) {
        auto s = db->prepare(sql);
        s.step();
        return s.column_int(0);  // the statement is finalized on return
    }
    std::int64_t in_tail() { return count("SELECT count(*) FROM outbox_tail"); }
    std::int64_t in_outbox() { return count("SELECT count(*) FROM outbox"); }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_outbox)

BOOST_FIXTURE_TEST_CASE(acknowledged_messages_are_kept_until_the_cutoff_passes_their_mark, fixture) {
    publish("s", 10);
    out->acknowledge("s", 4, 4, 1'000);
    out->acknowledge("s", 7, 7, 3'000);  // more than a second later: a mark of its own
    BOOST_TEST(marks() == 2);
    BOOST_TEST(out->purge(999) == 0u);
    BOOST_TEST(kept("s") == range(1, 10));
    BOOST_TEST(out->purge(1'000) == 4u);  // acknowledged at 1,000: gone at cutoff 1,000
    BOOST_TEST(kept("s") == range(5, 10));
    BOOST_TEST(out->purge(2'999) == 0u);
    BOOST_TEST(out->purge(3'000) == 3u);
    BOOST_TEST(kept("s") == range(8, 10));  // never acknowledged: never purged
    BOOST_TEST(out->purge(1'000'000) == 0u);
    BOOST_TEST(marks() == 0);
    BOOST_TEST(out->status().at("s").pending == 3u);
}

BOOST_FIXTURE_TEST_CASE(a_publish_key_finds_its_first_message_until_purged, fixture) {
    using k = primary::keyed_publish::status;
    auto a = out->publish_once("key-1", "s", "{\"a\":1}", 1'000);
    BOOST_TEST((a.what == k::stored));
    BOOST_TEST(a.p.seq == 1u);
    auto again = out->publish_once("key-1", "s", "{\"a\":1}", 1'500);
    BOOST_TEST((again.what == k::replayed));
    BOOST_TEST(again.p.seq == 1u);
    BOOST_TEST(again.p.id == a.p.id);
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\":2}", 1'500).what == k::conflict));   // another payload
    BOOST_TEST((out->publish_once("key-1", "t", "{\"a\":1}", 1'500).what == k::conflict));   // another stream
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\": 1}", 1'500).what == k::conflict));  // bytes, not meaning
    BOOST_TEST(kept("s") == range(1, 1));
    open();  // kept across a restart
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\":1}", 2'000).what == k::replayed));
    BOOST_TEST(out->purge(999) == 0u);
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\":1}", 2'000).what == k::replayed));
    // Used at 1,000, but its message is not acknowledged: kept past the
    // cutoff (a publisher may still be retrying through the outage).
    out->purge(5'000);
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\":1}", 6'000).what == k::replayed));
    // Acknowledged at 6,000: the key goes with its message, when the
    // cutoff passes the acknowledgement, not the publish.
    out->acknowledge("s", 1, 1, 6'000);
    out->purge(5'999);
    BOOST_TEST((out->publish_once("key-1", "s", "{\"a\":1}", 6'000).what == k::replayed));
    BOOST_TEST(kept("s") == range(1, 1));
    out->purge(6'000);
    BOOST_TEST(kept("s").empty());
    auto later = out->publish_once("key-1", "s", "{\"a\":1}", 7'000);
    BOOST_TEST((later.what == k::stored));
    BOOST_TEST(later.p.seq == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_key_goes_with_its_own_stream_s_message, fixture) {
    using k = primary::keyed_publish::status;
    BOOST_TEST(out->publish_once("key-a", "a", "1", 1'000).p.seq == 1u);
    BOOST_TEST(out->publish_once("key-b", "b", "1", 1'000).p.seq == 1u);
    publish("b", 3);                     // b: 2..4
    out->acknowledge("b", 4, 1, 2'000);  // b acknowledged, a not
    out->purge(10'000);
    BOOST_TEST((out->publish_once("key-a", "a", "1", 11'000).what == k::replayed));  // a's message is still here
    BOOST_TEST((out->publish_once("key-b", "b", "1", 11'000).what == k::stored));    // b's went with its message
    // A key's seq above what was acknowledged stays too.
    BOOST_TEST(out->publish_once("key-b2", "b", "2", 11'000).p.seq == 6u);
    out->acknowledge("b", 5, 5, 12'000);
    out->purge(20'000);
    BOOST_TEST((out->publish_once("key-b2", "b", "2", 21'000).what == k::replayed));
    // Two marks, one before the cutoff and one after: a key between them
    // stays with its message (what the stream acknowledged since does not
    // take it early).
    out->acknowledge("b", 6, 6, 30'000);  // key-b2's message
    BOOST_TEST(out->publish_once("key-b3", "b", "3", 31'000).p.seq == 7u);
    out->acknowledge("b", 7, 7, 40'000);  // key-b3's, a mark of its own
    out->purge(35'000);
    BOOST_TEST((out->publish_once("key-b2", "b", "2", 41'000).what == k::stored));    // went with seq 6
    BOOST_TEST((out->publish_once("key-b3", "b", "3", 41'000).what == k::replayed));  // seq 7 is still here
    BOOST_TEST(kept("b") == range(7, 8), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(marks_within_a_second_merge_and_keep_the_latest_time, fixture) {
    publish("s", 10);
    out->acknowledge("s", 2, 2, 10'000);
    out->acknowledge("s", 5, 5, 10'400);
    out->acknowledge("s", 8, 8, 10'900);
    BOOST_TEST(marks() == 1);
    // Seq 8 was acknowledged at 10,900: nothing of the merged mark goes before that.
    BOOST_TEST(out->purge(10'899) == 0u);
    BOOST_TEST(out->purge(10'900) == 8u);
}

BOOST_FIXTURE_TEST_CASE(a_stream_acknowledged_without_pause_still_ages_out, fixture) {
    // Acknowledgements every 10 ms for 5 s: marks are started at most a
    // second apart, so the oldest age out while newer ones come.
    publish("s", 500);
    for (int i = 1; i <= 500; ++i)
        out->acknowledge("s", static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i), 10 * i);
    BOOST_TEST(marks() <= 6);
    BOOST_TEST(marks() >= 5);
    out->purge(2'500);
    const auto left = kept("s");
    BOOST_REQUIRE(!left.empty());
    // Everything acknowledged after the cutoff is still there; at most one
    // second's worth acknowledged before it is kept too (never less).
    BOOST_TEST(left.front() <= 251u);
    BOOST_TEST(left.front() >= 151u);
    BOOST_TEST(left.back() == 500u);
}

BOOST_FIXTURE_TEST_CASE(a_repeated_or_lower_acknowledgement_moves_nothing, fixture) {
    publish("s", 10);
    out->acknowledge("s", 6, 6, 1'000);
    out->acknowledge("s", 3, 3, 5'000);  // a resend after a rewind is acknowledged again
    out->acknowledge("s", 6, 6, 5'000);
    BOOST_TEST(marks() == 1);
    BOOST_TEST(out->position("s").acked_seq == 6u);
    BOOST_TEST(out->purge(1'000) == 6u);
}

BOOST_FIXTURE_TEST_CASE(streams_age_out_on_their_own_marks, fixture) {
    publish("a", 5);
    publish("b", 5);
    out->acknowledge("a", 5, 5, 1'000);
    out->acknowledge("b", 2, 2, 1'000);
    out->acknowledge("b", 5, 5, 9'000);
    BOOST_TEST(out->purge(5'000) == 7u);
    BOOST_TEST(kept("a").empty());
    BOOST_TEST(kept("b") == range(3, 5));
}

BOOST_FIXTURE_TEST_CASE(an_outbox_with_a_time_on_every_row_is_upgraded, fixture) {
    // The layout before the marks: outbox.acked_ms and its index.
    out.reset();
    db->exec("DROP TABLE outbox");
    db->exec("DROP TABLE acks");
    db->exec(
        "CREATE TABLE outbox(stream TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, "
        "at_ms INTEGER NOT NULL, acked_ms INTEGER, PRIMARY KEY(stream, seq)) WITHOUT ROWID");
    db->exec("CREATE INDEX outbox_acked ON outbox(acked_ms) WHERE acked_ms IS NOT NULL");
    for (int i = 1; i <= 6; ++i)
        db->exec("INSERT INTO outbox VALUES('s'," + std::to_string(i) + ",'id" + std::to_string(i) + "','1',0," +
                 (i <= 4 ? std::to_string(1'000 * i) : std::string("NULL")) + ")");
    db->exec("INSERT INTO streams(stream, next_seq, acked_seq) VALUES('s', 7, 4)");
    out.emplace(*db);
    {
        auto idx = db->prepare("SELECT count(*) FROM sqlite_master WHERE name='outbox_acked'");
        idx.step();
        BOOST_TEST(idx.column_int(0) == 0);
    }
    // Kept until the latest acknowledgement's time (never earlier than before).
    BOOST_TEST(out->purge(3'999) == 0u);
    BOOST_TEST(out->purge(4'000) == 4u);
    BOOST_TEST(kept("s") == range(5, 6));
    // And the outbox goes on with marks.
    publish("s", 2);
    out->acknowledge("s", 8, 8, 9'000);
    BOOST_TEST(out->purge(9'000) == 4u);
    // Opened again: nothing to upgrade twice.
    open();
    BOOST_TEST(out->position("s").next_seq == 9u);
}

BOOST_FIXTURE_TEST_CASE(a_dead_letter_is_requeued_once_at_the_end_of_its_stream, fixture) {
    publish("s", 3);
    auto rows = out->pending("s", 0, 10, 1 << 20);
    out->dead_letter("s", rows[1], "422 no", 5'000);
    publish("s", 1);  // seq 4
    auto r = out->requeue(1, 6'000);
    BOOST_TEST((r.what == primary::requeue_result::status::requeued));
    BOOST_TEST(r.p.stream == "s");
    BOOST_TEST(r.p.seq == 5u);
    const auto all = out->pending("s", 0, 10, 1 << 20);
    BOOST_REQUIRE(all.size() == 5u);
    BOOST_TEST(all[4].payload == rows[1].payload);  // the original payload, byte for byte
    BOOST_TEST(all[4].id != rows[1].id);            // a new message
    auto again = out->requeue(1, 7'000);
    BOOST_TEST((again.what == primary::requeue_result::status::already));
    BOOST_TEST(again.p.seq == 5u);
    BOOST_TEST((out->requeue(2, 7'000).what == primary::requeue_result::status::not_found));
    const auto dl = out->dead_letters();
    BOOST_REQUIRE(dl.size() == 1u);
    BOOST_TEST(dl[0].requeued_seq.value_or(0) == 5u);
    BOOST_TEST(primary::to_json(dl[0]).find("\"requeued_seq\":5") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(dead_letters_come_in_pages_bounded_by_count_and_bytes, fixture) {
    std::vector<std::pair<std::string, std::string>> items;
    for (int i = 0; i < 5; ++i) items.emplace_back("s", "\"" + std::string(1000, 'a' + i) + "\"");
    out->publish(items, 0);
    for (const auto& m : out->pending("s", 0, 10, 1 << 20)) out->dead_letter("s", m, "422 no", 1'000);
    auto ns = [](const primary::dead_letter_page& p) {
        std::vector<std::int64_t> v;
        for (const auto& d : p.rows) v.push_back(d.n);
        return v;
    };
    auto p = out->dead_letters(0, 2, SIZE_MAX);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{1, 2}), boost::test_tools::per_element());
    BOOST_TEST(p.more);
    p = out->dead_letters(2, 2, SIZE_MAX);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{3, 4}), boost::test_tools::per_element());
    BOOST_TEST(p.more);
    p = out->dead_letters(4, 2, SIZE_MAX);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{5}), boost::test_tools::per_element());
    BOOST_TEST(!p.more);
    p = out->dead_letters(0, 5, SIZE_MAX);  // exactly all: nothing more
    BOOST_TEST(p.rows.size() == 5u);
    BOOST_TEST(!p.more);
    BOOST_TEST(out->dead_letters(5, 10, SIZE_MAX).rows.empty());
    // Bytes: a page stops once its payloads and reasons reach the budget
    // (each here 1,002 + 6 bytes), one row at least.
    p = out->dead_letters(0, 100, 2'016);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{1, 2}), boost::test_tools::per_element());
    BOOST_TEST(p.more);
    p = out->dead_letters(0, 100, 2'017);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{1, 2, 3}), boost::test_tools::per_element());
    p = out->dead_letters(1, 100, 1);
    BOOST_TEST(ns(p) == (std::vector<std::int64_t>{2}), boost::test_tools::per_element());
    BOOST_TEST(p.more);
    BOOST_TEST(p.rows[0].payload == "\"" + std::string(1000, 'b') + "\"");
}

BOOST_FIXTURE_TEST_CASE(a_dead_letter_is_one_json_line_whatever_its_payload_s_line_breaks, fixture) {
    out->publish({{"s", "{\"a\":\r\n [1,\n2],\n\"b\":\"x\\ny\"}"}}, 0);
    out->dead_letter("s", out->pending("s", 0, 10, 1 << 20).at(0), "400 no", 1'000);
    const auto line = primary::to_json(out->dead_letters().at(0));
    BOOST_TEST(line.find('\n') == std::string::npos, line);
    BOOST_TEST(line.find('\r') == std::string::npos, line);
    const auto j = nlohmann::json::parse(line);
    BOOST_TEST(j["payload"] == nlohmann::json::parse("{\"a\":[1,2],\"b\":\"x\\ny\"}"));  // the same JSON
    BOOST_TEST(out->dead_letters().at(0).payload.find('\n') != std::string::npos);       // as stored: unchanged
}

BOOST_FIXTURE_TEST_CASE(read_only_opens_change_nothing, fixture) {
    // A dead-letter table of a version without requeue, read beside a running primary.
    out.reset();
    db->exec("DROP TABLE dead_letter");
    db->exec(
        "CREATE TABLE dead_letter(n INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, seq INTEGER NOT NULL, "
        "id TEXT NOT NULL, payload TEXT NOT NULL, reason TEXT NOT NULL, at_ms INTEGER NOT NULL)");
    db->exec("INSERT INTO dead_letter(stream, seq, id, payload, reason, at_ms) VALUES('s', 1, 'i', '[1]', 'r', 1)");
    db.reset();
    app::database ro(dir.string(), "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    primary::outbox o(ro);
    const auto dl = o.dead_letters();
    BOOST_REQUIRE(dl.size() == 1u);
    BOOST_TEST(!dl[0].requeued_seq.has_value());
    BOOST_TEST(primary::to_json(dl[0]) ==
               R"({"at_ms":1,"id":"i","n":1,"reason":"r","seq":1,"stream":"s","payload":[1]})");
}

BOOST_FIXTURE_TEST_CASE(an_acknowledgement_ends_only_the_schedule_of_a_head_it_covers, fixture) {
    publish("s", 6);
    // Seq 3 acknowledged; seq 4, the next head, failed and took a ladder
    // step before the acknowledgement of 3 reached the outbox.
    out->set_schedule("s", {2, 50'000, 4});
    out->acknowledge("s", 3, 3, 1'000);
    auto kept_sched = out->get_schedule("s");
    BOOST_TEST(kept_sched.attempts == 2u);
    BOOST_TEST(kept_sched.next_at_ms == 50'000);
    BOOST_TEST(kept_sched.head_seq == 4u);
    // A rewind resends 1..2 below the highest acknowledgement (3): the
    // schedule of head 4 is still not theirs.
    out->acknowledge("s", 3, 2, 2'000);
    BOOST_TEST(out->get_schedule("s").attempts == 2u);
    // Seq 4 acknowledged: its schedule is over.
    out->acknowledge("s", 4, 4, 3'000);
    BOOST_TEST(out->get_schedule("s").attempts == 0u);
    BOOST_TEST(out->get_schedule("s").head_seq == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_schedule_of_a_version_without_its_head_ends_at_the_next_acknowledgement, fixture) {
    publish("s", 3);
    out.reset();
    db->exec("DROP TABLE schedule");
    db->exec("CREATE TABLE schedule(stream TEXT PRIMARY KEY, attempts INTEGER NOT NULL, next_at_ms INTEGER NOT NULL)");
    db->exec("INSERT INTO schedule(stream, attempts, next_at_ms) VALUES('s', 3, 70000)");
    open();  // adds head_seq, 0 for the old row
    const auto old = out->get_schedule("s");
    BOOST_TEST(old.attempts == 3u);
    BOOST_TEST(old.head_seq == 0u);
    out->acknowledge("s", 1, 1, 1'000);
    BOOST_TEST(out->get_schedule("s").attempts == 0u);
    // The column is there for what comes next.
    out->set_schedule("s", {1, 5'000, 2});
    BOOST_TEST(out->get_schedule("s").head_seq == 2u);
}

// A read's byte limit never leaves it empty: one row larger than the limit
// is returned alone (else a stream whose head is big stalls); a second row
// joins only while the total stays within the limit (equal is within).
BOOST_FIXTURE_TEST_CASE(a_read_returns_a_first_row_larger_than_its_byte_limit, fixture) {
    const std::string big = "\"" + std::string(1000, 'x') + "\"";
    out->publish({{"s", big}, {"s", big}, {"s", "1"}}, 0);
    const auto one = out->pending("s", 0, 10, 100);
    BOOST_REQUIRE(one.size() == 1u);
    BOOST_TEST(one[0].seq == 1u);
    BOOST_TEST(one[0].payload == big);
    // What the read counts a row: its payload, its id and 64 bytes.
    const std::size_t cost = big.size() + one[0].id.size() + 64;
    BOOST_TEST(out->pending("s", 0, 10, 2 * cost).size() == 2u);
    BOOST_TEST(out->pending("s", 0, 10, 2 * cost - 1).size() == 1u);
    const auto after1 = out->pending("s", 1, 10, 1);  // from after seq 1: the second big one alone
    BOOST_REQUIRE(after1.size() == 1u);
    BOOST_TEST(after1[0].seq == 2u);
    const auto after2 = out->pending("s", 2, 10, 1u << 20);
    BOOST_REQUIRE(after2.size() == 1u);
    BOOST_TEST(after2[0].seq == 3u);
    BOOST_TEST(out->pending("s", 3, 10, 1u << 20).empty());
    BOOST_TEST(out->pending("s", 0, 2, 1u << 20).size() == 2u);  // the count limit
}

// An Idempotency-Key's digest keeps stream and payload apart: the same key
// with ("ab", "c") and then ("a", "bc") is a conflict, not a replay.
BOOST_FIXTURE_TEST_CASE(a_key_reused_across_a_stream_payload_split_is_a_conflict, fixture) {
    using k = primary::keyed_publish::status;
    BOOST_TEST((out->publish_once("key-split", "ab", "1", 1'000).what == k::stored));
    BOOST_TEST((out->publish_once("key-split", "a", "b1", 1'000).what == k::conflict));
    BOOST_TEST((out->publish_once("key-split", "ab", "1", 1'000).what == k::replayed));
}

// The oldest retained seq is the lowest one kept, per stream.
BOOST_FIXTURE_TEST_CASE(the_oldest_retained_seq_is_the_lowest, fixture) {
    BOOST_TEST(!out->oldest_seq("s").has_value());
    publish("s", 5);
    publish("t", 2);
    BOOST_TEST(out->oldest_seq("s").value_or(0) == 1u);
    BOOST_TEST(out->oldest_seq("t").value_or(0) == 1u);
    BOOST_TEST(!out->oldest_seq("u").has_value());
    out->acknowledge("s", 3, 3, 1'000);
    BOOST_TEST(out->purge(1'000) == 3u);
    BOOST_TEST(out->oldest_seq("s").value_or(0) == 4u);
}

// Small messages wait in the tail; a fold moves them all, and a read gives
// the same rows before and after.
BOOST_FIXTURE_TEST_CASE(small_messages_wait_in_the_tail_until_a_fold, fixture) {
    each({{"s", "{\"a\":1}"}, {"t", "[2]"}, {"s", "3"}}, 1'234);
    BOOST_TEST(in_tail() == 3);
    BOOST_TEST(in_outbox() == 0);
    const auto before = out->pending("s", 0, 10, 1u << 20);
    BOOST_REQUIRE(before.size() == 2u);
    BOOST_TEST(before[0].seq == 1u);
    BOOST_TEST(before[0].payload == "{\"a\":1}");
    BOOST_TEST(before[0].at_ms == 1'234);
    BOOST_TEST(before[0].id == primary::outbox::make_id(out->instance(), "s", 1));
    BOOST_TEST(before[1].seq == 2u);
    BOOST_TEST(before[1].payload == "3");
    BOOST_TEST(out->fold().value_or(99) == 3u);
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(in_outbox() == 3);
    const auto after = out->pending("s", 0, 10, 1u << 20);
    BOOST_REQUIRE(after.size() == 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        BOOST_TEST(after[i].seq == before[i].seq);
        BOOST_TEST(after[i].id == before[i].id);
        BOOST_TEST(after[i].payload == before[i].payload);
        BOOST_TEST(after[i].at_ms == before[i].at_ms);
    }
    BOOST_TEST(out->fold().value_or(99) == 0u);  // nothing left
    BOOST_TEST(out->fold_failures() == 0u);
}

// A payload over tail_payload_max goes to the outbox directly; a stream's
// messages then sit in both tables, and a read merges them by seq, the
// count and byte limits counting across both.
BOOST_FIXTURE_TEST_CASE(a_read_merges_both_tables_in_seq_order, fixture) {
    const std::string big = "\"" + std::string(primary::outbox::tail_payload_max, 'x') + "\"";
    const std::string at_limit = "\"" + std::string(primary::outbox::tail_payload_max - 2, 'y') + "\"";
    BOOST_REQUIRE(at_limit.size() == primary::outbox::tail_payload_max);
    each({{"s", "1"}, {"s", big}, {"s", "3"}, {"s", big}, {"s", at_limit}, {"s", "6"}});
    BOOST_TEST(in_outbox() == 2);  // seqs 2 and 4
    BOOST_TEST(in_tail() == 4);    // at the limit still goes to the tail
    // One byte over the limit: the outbox.
    out->publish({{"u", "\"" + std::string(primary::outbox::tail_payload_max - 1, 'z') + "\""}}, 0);
    BOOST_TEST(in_outbox() == 3);
    BOOST_TEST(in_tail() == 4);
    BOOST_TEST(kept("s") == range(1, 6));
    const auto all = out->pending("s", 0, 10, 1u << 20);
    BOOST_REQUIRE(all.size() == 6u);
    BOOST_TEST(all[1].payload == big);
    BOOST_TEST(all[2].payload == "3");
    BOOST_TEST(all[4].payload == at_limit);
    std::vector<std::uint64_t> seqs;
    for (auto& m : out->pending("s", 2, 3, 1u << 20)) seqs.push_back(m.seq);
    BOOST_TEST(seqs == range(3, 5));  // after 2, three of them: from both tables
    seqs.clear();
    for (auto& m : out->pending("s", 3, 10, 1u << 20)) seqs.push_back(m.seq);
    BOOST_TEST(seqs == range(4, 6));
    // The byte limit: seq 1 (small), then seq 2 (big) no longer fits.
    const std::size_t small_cost = 1 + all[0].id.size() + 64;
    BOOST_TEST(out->pending("s", 0, 10, small_cost + big.size()).size() == 1u);
    BOOST_TEST(out->pending("s", 0, 10, small_cost + big.size() + all[1].id.size() + 64).size() == 2u);
    // The oldest is the lowest of the two tables, whichever holds it.
    BOOST_TEST(out->oldest_seq("s").value_or(0) == 1u);
    out->acknowledge("s", 1, 1, 1'000);
    out->acknowledge("s", 3, 3, 5'000);
    BOOST_TEST(out->purge(1'000) == 1u);  // folds, then seq 1 goes
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(out->oldest_seq("s").value_or(0) == 2u);
    BOOST_TEST(kept("s") == range(2, 6));
    // After the fold, a new small message in the tail follows those in the outbox.
    out->publish({{"s", "7"}}, 0);
    BOOST_TEST(kept("s") == range(2, 7));
    BOOST_TEST(out->oldest_seq("s").value_or(0) == 2u);  // in the outbox, below the tail's 7
    BOOST_TEST(out->status().at("s").pending == 4u);     // 4 to 7: 4, 5 and 6 in the outbox, 7 in the tail
}

// A batch over tail_batch_max goes to the outbox directly; one at the limit
// to the tail.
BOOST_FIXTURE_TEST_CASE(a_large_batch_skips_the_tail, fixture) {
    publish("s", static_cast<int>(primary::outbox::tail_batch_max));
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::tail_batch_max));
    BOOST_TEST(in_outbox() == 0);
    publish("s", static_cast<int>(primary::outbox::tail_batch_max) + 1);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::tail_batch_max));
    BOOST_TEST(in_outbox() == static_cast<std::int64_t>(primary::outbox::tail_batch_max) + 1);
    BOOST_TEST(kept("s") == range(1, 2 * primary::outbox::tail_batch_max + 1));
}

// The tail folds by itself at fold_rows messages or fold_bytes of payload.
BOOST_FIXTURE_TEST_CASE(the_tail_folds_by_itself_at_its_limits, fixture) {
    for (std::size_t i = 0; i + 1 < primary::outbox::fold_rows; ++i) publish("s", 1);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::fold_rows) - 1);
    publish("t", 1);
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(in_outbox() == static_cast<std::int64_t>(primary::outbox::fold_rows));
    // By bytes: payloads at the tail's limit, fold_bytes of them.
    const std::string p = "\"" + std::string(primary::outbox::tail_payload_max - 2, 'b') + "\"";
    const std::size_t n = primary::outbox::fold_bytes / p.size();
    for (std::size_t i = 0; i + 1 < n; ++i) out->publish({{"b", p}}, 0);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(n - 1));
    out->publish({{"b", p}}, 0);
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(kept("b") == range(1, n));
    BOOST_TEST(kept("s") == range(1, primary::outbox::fold_rows - 1));
}

// A reopened outbox counts what its tail already holds: the fold comes at
// the same size as if the process had never stopped.
BOOST_FIXTURE_TEST_CASE(a_reopened_outbox_counts_its_tail, fixture) {
    for (std::size_t i = 0; i + 2 < primary::outbox::fold_rows; ++i) publish("s", 1);
    open();
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::fold_rows) - 2);
    BOOST_TEST(kept("s") == range(1, primary::outbox::fold_rows - 2));
    publish("s", 1);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::fold_rows) - 1);
    publish("s", 1);
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(kept("s") == range(1, primary::outbox::fold_rows));
}

// A fold that fails is undone: every message stays where it was, read once,
// and the publish that set it off is stored. It is tried again only after
// fold_rows more messages.
BOOST_FIXTURE_TEST_CASE(a_fold_that_fails_moves_nothing_and_loses_nothing, fixture) {
    singles("s", 3);
    // A row the fold cannot insert: seq 2 of "s" already in the outbox (what
    // no code path writes; here to make the fold fail).
    db->exec("INSERT INTO outbox(stream, seq, id, payload, at_ms) VALUES('s', 2, 'dup', '\"dup\"', 0)");
    BOOST_TEST(!out->fold().has_value());
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(in_tail() == 3);
    BOOST_TEST(in_outbox() == 1);
    BOOST_TEST(kept("s") == range(1, 3));  // seq 2 once, not twice
    // The next publishes go on; the fold is not tried at each of them.
    for (std::size_t i = 0; i + 1 < primary::outbox::fold_rows; ++i) publish("s", 1);
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(primary::outbox::fold_rows) + 2);
    BOOST_TEST(kept("s") == range(1, primary::outbox::fold_rows + 2));
    db->exec("DELETE FROM outbox WHERE id='dup'");
    publish("s", 1);  // the next try: folds
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(in_tail() == 0);
    BOOST_TEST(kept("s") == range(1, primary::outbox::fold_rows + 3));
}

// The same when the tail folds for its bytes: the next try waits for
// fold_bytes more, not the next publish.
BOOST_FIXTURE_TEST_CASE(a_fold_that_fails_on_bytes_is_not_tried_at_every_publish, fixture) {
    const std::string p = "\"" + std::string(primary::outbox::tail_payload_max - 2, 'b') + "\"";
    const std::size_t n = primary::outbox::fold_bytes / p.size();  // the n-th publish folds
    out->publish({{"b", p}}, 0);
    db->exec("INSERT INTO outbox(stream, seq, id, payload, at_ms) VALUES('b', 1, 'dup', '\"dup\"', 0)");
    for (std::size_t i = 1; i < n; ++i) out->publish({{"b", p}}, 0);
    BOOST_TEST(out->fold_failures() == 1u);
    for (std::size_t i = 1; i < n; ++i) out->publish({{"b", p}}, 0);  // under fold_bytes more
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(in_tail() == static_cast<std::int64_t>(2 * n - 1));
    BOOST_TEST(kept("b") == range(1, 2 * n - 1));
}

// A purge whose fold fails deletes nothing: a stream's messages may be in
// both tables, and the outbox's range alone would leave holes in what is
// kept for a rewind. The marks stay for the next purge.
BOOST_FIXTURE_TEST_CASE(a_purge_whose_fold_fails_deletes_nothing, fixture) {
    const std::string big = "\"" + std::string(primary::outbox::tail_payload_max, 'x') + "\"";
    each({{"s", "1"}, {"s", big}, {"s", "3"}, {"s", "4"}});  // 1, 3, 4 in the tail; 2 in the outbox
    out->acknowledge("s", 3, 3, 1'000);
    db->exec("INSERT INTO outbox(stream, seq, id, payload, at_ms) VALUES('s', 4, 'dup', '\"dup\"', 0)");
    BOOST_TEST(out->purge(1'000) == 0u);
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(kept("s") == range(1, 4));
    BOOST_TEST(marks() == 1);
    db->exec("DELETE FROM outbox WHERE id='dup'");
    // After a failed fold, a purge tries again at every tenth: nine more
    // delete nothing and try nothing, the tenth folds and deletes.
    for (int i = 0; i < 9; ++i) BOOST_TEST(out->purge(1'000) == 0u);
    BOOST_TEST(in_tail() == 3);
    BOOST_TEST(out->fold_failures() == 1u);
    BOOST_TEST(out->purge(1'000) == 3u);
    BOOST_TEST(kept("s") == range(4, 4));
    BOOST_TEST(marks() == 0);
    BOOST_TEST(out->purge(1'000) == 0u);  // folding again as usual
}

// A dead letter's tombstone replaces its payload in whichever table holds it.
BOOST_FIXTURE_TEST_CASE(a_tombstone_lands_in_either_table, fixture) {
    const std::string big = "\"" + std::string(primary::outbox::tail_payload_max, 'x') + "\"";
    each({{"s", "1"}, {"s", big}});
    auto rows = out->pending("s", 0, 10, 1u << 20);
    BOOST_REQUIRE(rows.size() == 2u);
    out->dead_letter("s", rows[0], "refused", 0);
    out->dead_letter("s", rows[1], "refused", 0);
    const auto after = out->pending("s", 0, 10, 1u << 20);
    BOOST_REQUIRE(after.size() == 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        BOOST_TEST(after[i].payload != rows[i].payload);
        BOOST_TEST(after[i].payload.find("refused") != std::string::npos, after[i].payload);
    }
    BOOST_TEST(out->dead_letter_count() == 2u);
}

// An outbox of a version without the tail, read beside its running primary:
// nothing is made, and its messages are counted.
BOOST_FIXTURE_TEST_CASE(a_read_only_outbox_without_a_tail_is_read, fixture) {
    publish("s", 3);
    out->fold();
    out.reset();
    db->exec("DROP TABLE outbox_tail");
    db.reset();
    app::database ro(dir.string(), "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    primary::outbox o(ro);
    BOOST_TEST(o.status().at("s").pending == 3u);
    BOOST_TEST(o.status().at("s").next_seq == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
