// What a recheck resends to (recheck.hpp), page by page, without a socket:
// missing streams, ones held less or more of, streams only the secondary has,
// page boundaries, and pages that do not move on.
#include <primary/recheck.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>

using namespace steadfast;
using namespace steadfast::primary;
using behind_t = std::vector<std::pair<std::string, std::uint64_t>>;

namespace {
envelope::positions_page page(std::vector<envelope::stream_position> s, bool more) {
    return {std::move(s), more};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_recheck)

BOOST_AUTO_TEST_CASE(behind_means_missing_or_holding_less) {
    const std::map<std::string, std::uint64_t> acked{{"a", 5}, {"b", 5}, {"c", 5}, {"d", 5}, {"e", 5}};
    recheck_merge m(acked);
    BOOST_TEST(m.after() == "");
    // a held as much, b less, c missing, a0 only the secondary's, d more (a
    // restored primary's concern, not this recheck's); then e missing after
    // the secondary's last stream.
    BOOST_TEST(m.add(page({{"B", 1}, {"a", 5}, {"a0", 9}, {"b", 4}}, true)));
    BOOST_TEST(m.after() == "b");
    BOOST_TEST(m.add(page({{"d", 6}}, false)));
    BOOST_TEST((m.finish() == behind_t{{"b", 5}, {"c", 5}, {"e", 5}}));
}

BOOST_AUTO_TEST_CASE(page_boundaries_change_nothing) {
    std::map<std::string, std::uint64_t> acked;
    std::vector<envelope::stream_position> all;
    for (int i = 0; i < 50; ++i) {
        const std::string s = "s" + std::to_string(i);
        acked[s] = 10;
        if (i % 7 != 3) all.push_back({s, static_cast<std::uint64_t>(i % 5 == 0 ? 9 : 10)});
    }
    std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.stream < y.stream; });
    behind_t whole;
    {
        recheck_merge m(acked);
        BOOST_TEST(m.add(page(all, false)));
        whole = m.finish();
    }
    for (std::size_t size : {1u, 2u, 3u, 7u, 49u}) {
        recheck_merge m(acked);
        for (std::size_t i = 0; i < all.size(); i += size) {
            const auto end = std::min(all.size(), i + size);
            BOOST_TEST(m.add(
                page({all.begin() + static_cast<std::ptrdiff_t>(i), all.begin() + static_cast<std::ptrdiff_t>(end)},
                     end < all.size())));
        }
        BOOST_TEST((m.finish() == whole), "pages of " << size);
    }
    // 7 missing (i % 7 == 3: s3, s10, ..., s45) and 8 more held less (i % 5 == 0 but s10 and s45).
    BOOST_TEST(whole.size() == 15u);
}

BOOST_AUTO_TEST_CASE(pages_that_do_not_move_on_are_refused) {
    const std::map<std::string, std::uint64_t> acked{{"a", 1}, {"b", 1}};
    recheck_merge m(acked);
    BOOST_TEST(m.add(page({{"a", 1}}, true)));
    BOOST_TEST(!m.add(page({{"a", 1}}, true)));  // the same page again
    recheck_merge n(acked);
    BOOST_TEST(!n.add(page({{"b", 1}, {"a", 1}}, false)));  // out of order
    recheck_merge e(acked);
    BOOST_TEST(e.add(page({}, false)));  // a secondary with nothing: everything is behind
    BOOST_TEST((e.finish() == behind_t{{"a", 1}, {"b", 1}}));
    const std::map<std::string, std::uint64_t> none;
    recheck_merge z(none);
    BOOST_TEST(z.add(page({{"x", 3}}, false)));
    BOOST_TEST(z.finish().empty());
}

BOOST_AUTO_TEST_SUITE_END()
