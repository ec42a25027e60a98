// The primary's stream table (primary/stream_table.hpp): its per-stream
// series on /metrics are bounded, whatever the number of streams pending,
// and go once their stream is no longer among those reported.
#include <primary/stream_table.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace steadfast;

namespace {
std::string name(int i) {
    char b[8];
    std::snprintf(b, sizeof b, "s%03d", i);
    return b;
}
// The streams of family `family` on the registry, and their values.
std::vector<std::pair<std::string, double>> series_of(const primary::metrics& m, const std::string& family) {
    std::vector<std::pair<std::string, double>> v;
    for (const auto& f : m.registry->Collect())
        if (f.name == family)
            for (const auto& x : f.metric) v.emplace_back(x.label.at(0).value, x.gauge.value);
    std::sort(v.begin(), v.end());
    return v;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_stream_table)

BOOST_AUTO_TEST_CASE(per_stream_series_are_bounded_and_go_with_their_stream) {
    primary::delivery_config c;
    primary::metrics m;
    primary::stream_table t(c, m);
    const int n = static_cast<int>(primary::stream_table::max_stream_series) + 50;
    // s000 has 1 pending, s149 has 150: the most pending are reported (their
    // heads' times are not known, so none is older than another).
    for (int i = 0; i < n; ++i) t.add(name(i), 0, 0, static_cast<std::uint64_t>(i + 1));
    t.refresh_metrics(1'000'000);
    auto pending = series_of(m, "steadfast_primary_stream_pending");
    BOOST_TEST_REQUIRE(pending.size() == primary::stream_table::max_stream_series);
    BOOST_TEST(pending.front().first == name(50));
    BOOST_TEST(pending.front().second == 51.0);
    BOOST_TEST(pending.back().first == name(n - 1));
    BOOST_TEST(pending.back().second == static_cast<double>(n));
    BOOST_TEST(series_of(m, "steadfast_primary_stream_oldest_pending_age_seconds").size() ==
               primary::stream_table::max_stream_series);
    BOOST_TEST(t.streams_with_series().size() == primary::stream_table::max_stream_series);

    // The 50 with the most go: the others take their places, theirs go; a
    // stream that keeps its series shows its new count (s060: 61 -> 999).
    for (int i = n - 50; i < n; ++i) t.erase(name(i));
    t.erase(name(60));
    t.add(name(60), 0, 0, 999);
    t.refresh_metrics(1'000'000);
    pending = series_of(m, "steadfast_primary_stream_pending");
    BOOST_TEST_REQUIRE(pending.size() == primary::stream_table::max_stream_series);
    BOOST_TEST(pending.front().first == name(0));
    BOOST_TEST(pending.back().first == name(n - 51));
    BOOST_TEST(pending.back().second == static_cast<double>(n - 50));
    BOOST_TEST(pending[60].first == name(60));
    BOOST_TEST(pending[60].second == 999.0);

    // Every stream gone: no series left.
    for (int i = 0; i < n - 50; ++i) t.erase(name(i));
    t.refresh_metrics(1'000'000);
    BOOST_TEST(series_of(m, "steadfast_primary_stream_pending").empty());
    BOOST_TEST(series_of(m, "steadfast_primary_stream_oldest_pending_age_seconds").empty());
    BOOST_TEST(t.streams_with_series().empty());
}

BOOST_AUTO_TEST_SUITE_END()
