// What joins a stream's send window (apps/primary/window.hpp): a commit in
// memory, and the rows of a read that ran while commits joined.
#include <primary/window.hpp>

#include <steadfast/replication/envelope.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace steadfast::primary;

namespace {
pending_message msg(std::uint64_t seq, std::size_t payload_bytes = 7) {
    return {seq, "i-" + std::to_string(seq), std::string(payload_bytes, 'x'), 1};
}
std::vector<pending_message> rows(std::uint64_t first, std::uint64_t last) {
    std::vector<pending_message> out;
    for (auto s = first; s <= last; ++s) out.push_back(msg(s));
    return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_window)

BOOST_AUTO_TEST_CASE(a_commit_joins_only_the_seq_after_the_end) {
    const std::deque<pending_message> w{msg(4), msg(5)};
    BOOST_TEST(window::joins(w, 5, msg(6)));
    BOOST_TEST(!window::joins(w, 5, msg(7)));  // a hole: read back instead
    BOOST_TEST(!window::joins(w, 5, msg(5)));  // already there
    BOOST_TEST(!window::joins(w, 5, msg(4)));
    BOOST_TEST(window::joins({}, 9, msg(10)));  // an empty window that knows where it stands
}

BOOST_AUTO_TEST_CASE(an_unknown_window_takes_nothing) {
    BOOST_TEST(!window::joins({}, 0, msg(1)));  // end 0: forgotten or never read
}

BOOST_AUTO_TEST_CASE(the_bounds_of_a_read_hold_in_memory_too) {
    BOOST_TEST(window::joins({}, 1, msg(2, window::in_memory_payload)));
    BOOST_TEST(!window::joins({}, 1, msg(2, window::in_memory_payload + 1)));
    std::deque<pending_message> full;
    for (std::uint64_t s = 1; s <= window::in_memory_rows; ++s) full.push_back(msg(s));
    BOOST_TEST(!window::joins(full, window::in_memory_rows, msg(window::in_memory_rows + 1)));
    full.pop_front();
    BOOST_TEST(window::joins(full, window::in_memory_rows, msg(window::in_memory_rows + 1)));
}

BOOST_AUTO_TEST_CASE(a_read_keeps_only_the_rows_past_what_joined_meanwhile) {
    // Read after 10; seqs 11 and 12 joined in memory while it ran; 13 and 14 did not.
    const auto r = rows(11, 14);
    const auto f = window::fresh_rows(12, 10, r);
    BOOST_TEST(f.from == 2u);
    BOOST_TEST_REQUIRE(f.from < r.size());  // (a wrong from must not read past the rows)
    BOOST_TEST(r[f.from].seq == 13u);
    BOOST_TEST(f.read_again);  // rows the window lacked: there may be more
}

BOOST_AUTO_TEST_CASE(a_read_of_what_all_joined_adds_nothing_and_reads_no_more) {
    const auto r = rows(11, 14);
    const auto f = window::fresh_rows(14, 10, r);
    BOOST_TEST(f.from == r.size());
    BOOST_TEST(!f.read_again);
    const auto empty = window::fresh_rows(14, 14, {});
    BOOST_TEST(empty.from == 0u);
    BOOST_TEST(!empty.read_again);
}

BOOST_AUTO_TEST_CASE(a_read_cut_at_its_bound_whose_rows_all_joined_adds_nothing) {
    // 1,000 rows after 10, all of which joined while the read ran.
    const auto r = rows(11, 1010);
    const auto f = window::fresh_rows(1010, 10, r);
    BOOST_TEST(f.from == r.size());
    BOOST_TEST(!f.read_again);
}

BOOST_AUTO_TEST_CASE(a_read_with_nothing_joined_is_taken_whole) {
    const auto r = rows(11, 14);
    const auto f = window::fresh_rows(10, 10, r);
    BOOST_TEST(f.from == 0u);
    BOOST_TEST(f.read_again);
}

BOOST_AUTO_TEST_CASE(a_read_that_does_not_continue_the_window_is_read_again) {
    // A hole between the window's end and the rows.
    auto f = window::fresh_rows(10, 10, rows(12, 14));
    BOOST_TEST(f.from == 3u);
    BOOST_TEST(f.read_again);
    // A read from past the window's end, or for a window not known.
    f = window::fresh_rows(10, 11, rows(12, 14));
    BOOST_TEST(f.from == 3u);
    BOOST_TEST(f.read_again);
    f = window::fresh_rows(0, 0, rows(1, 3));
    BOOST_TEST(f.from == 3u);
    BOOST_TEST(f.read_again);
}

// The batch cut: the count limit, the body limit by exact encoded size (the
// envelope's own arithmetic), a message too big to share going alone, the
// rest left in order.
BOOST_AUTO_TEST_CASE(batches_are_cut_by_count_and_by_encoded_size) {
    std::deque<pending_message> w;
    for (std::uint64_t s = 1; s <= 10; ++s) w.push_back(msg(s, 100));
    auto b = window::take_batch(w, 4, 1 << 20, "orders", 3);
    BOOST_REQUIRE(b.size() == 4u);
    BOOST_TEST(b.front().seq == 1u);
    BOOST_TEST(b.back().seq == 4u);
    BOOST_TEST(w.size() == 6u);
    BOOST_TEST(w.front().seq == 5u);
    // The body limit: exactly as many as fit in a batch envelope.
    const std::size_t one = steadfast::envelope::encoded_size("i-5", "orders", 5, 3, 100) + 1;
    const std::size_t frame = steadfast::envelope::batch_prefix.size() + steadfast::envelope::batch_suffix.size();
    b = window::take_batch(w, 100, frame + 3 * one, "orders", 3);
    BOOST_TEST(b.size() == 3u);
    b = window::take_batch(w, 100, frame + 3 * one - 1, "orders", 3);
    BOOST_TEST(b.size() == 2u);  // seqs 8, 9 (one byte short of three)
    BOOST_TEST(b.front().seq == 8u);
    // A message bigger than the limit goes alone, never an empty batch.
    w.push_front(msg(7, 5000));
    b = window::take_batch(w, 100, 1024, "orders", 3);
    BOOST_REQUIRE(b.size() == 1u);
    BOOST_TEST(b.front().seq == 7u);
    BOOST_TEST(w.size() == 1u);
    b = window::take_batch(w, 1, 1 << 20, "orders", 3);
    BOOST_TEST(b.size() == 1u);
    BOOST_TEST(w.empty());
    BOOST_TEST(window::take_batch(w, 10, 1 << 20, "orders", 3).empty());
}

BOOST_AUTO_TEST_SUITE_END()
