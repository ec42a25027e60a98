// Backoff formulas against exact sequences, jitter with injected random numbers.
#include <steadfast/engine/backoff.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using steadfast::backoff;
using steadfast::jitter;

namespace {
std::vector<std::int64_t> ms_sequence(const backoff& b, int n, const std::function<std::uint64_t()>& draw = {}) {
    std::vector<std::int64_t> out;
    nanoseconds prev{};
    for (int i = 1; i <= n; ++i) {
        prev = b.delay(static_cast<std::uint32_t>(i), prev, draw);
        out.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(prev).count());
    }
    return out;
}

// Returns the given values in turn.
std::function<std::uint64_t()> script(std::vector<std::uint64_t> values) {
    auto i = std::make_shared<std::size_t>(0);
    return [values, i] { return values.at((*i)++ % values.size()); };
}

template <class F>
void check_throws_with(F&& f, const std::string& fragment) {
    try {
        f();
        BOOST_FAIL("expected std::invalid_argument mentioning \"" + fragment + "\"");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find(fragment) != std::string::npos, e.what());
    }
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_backoff)

BOOST_AUTO_TEST_CASE(fixed_linear_exponential_exact) {
    BOOST_TEST(ms_sequence(backoff::fixed(250ms), 4) == (std::vector<std::int64_t>{250, 250, 250, 250}),
               boost::test_tools::per_element());
    BOOST_TEST(
        ms_sequence(backoff::linear(100ms, 50ms, 220ms), 5) == (std::vector<std::int64_t>{100, 150, 200, 220, 220}),
        boost::test_tools::per_element());
    BOOST_TEST(ms_sequence(backoff::exponential(1s, 2.0, 30s), 7) ==
                   (std::vector<std::int64_t>{1000, 2000, 4000, 8000, 16000, 30000, 30000}),
               boost::test_tools::per_element());
    BOOST_TEST(ms_sequence(backoff::exponential(100ms, 1.5, 1s), 6) ==
                   (std::vector<std::int64_t>{100, 150, 225, 337, 506, 759}),
               boost::test_tools::per_element());
    // Far past the cap nothing overflows.
    BOOST_TEST(backoff::exponential(1s, 10.0, 1h).base_delay(1000, {}).count() == nanoseconds(1h).count());
    BOOST_TEST(backoff::linear(1s, 1h, 2h).base_delay(4'000'000'000u, {}).count() == nanoseconds(2h).count());
}

BOOST_AUTO_TEST_CASE(schedule_last_step_repeats) {
    auto b = backoff::schedule("1s 5s 2m");
    BOOST_TEST(ms_sequence(b, 5) == (std::vector<std::int64_t>{1000, 5000, 120000, 120000, 120000}),
               boost::test_tools::per_element());
    BOOST_TEST(b.cap().count() == nanoseconds(2min).count());
}

BOOST_AUTO_TEST_CASE(rocketmq_ladders) {
    auto levels = backoff::rocketmq_delay_levels();
    nanoseconds total{};
    for (std::uint32_t i = 1; i <= 18; ++i) total += levels.base_delay(i, {});
    BOOST_TEST(total.count() == nanoseconds(4h + 45min + 46s).count());
    // The consumer's 16 retries start at level 3 (10 s).
    auto retries = backoff::rocketmq();
    BOOST_TEST(retries.base_delay(1, {}).count() == nanoseconds(10s).count());
    BOOST_TEST(retries.base_delay(16, {}).count() == nanoseconds(2h).count());
    BOOST_TEST(retries.base_delay(17, {}).count() == nanoseconds(2h).count());
    BOOST_TEST(retries.steps() == 16u);
    BOOST_TEST(levels.steps() == 18u);
    BOOST_TEST(backoff::fixed(1s).steps() == 0u);
}

BOOST_AUTO_TEST_CASE(full_and_equal_jitter_exact) {
    // random_between(lo, hi, r) = lo + r % (hi - lo + 1), in nanoseconds.
    auto full = backoff::exponential(1s, 2.0, 30s).with_jitter(jitter::full);
    const std::uint64_t half_of_1s = 500'000'000, top = 1'000'000'000;
    auto draws = script({half_of_1s, top, 0});
    nanoseconds d1 = full.delay(1, {}, draws);  // 500ms of [0, 1s]
    nanoseconds d2 = full.delay(2, d1, draws);  // top of [0, 2s]: 1e9 % (2e9 + 1)
    nanoseconds d3 = full.delay(3, d2, draws);  // 0
    BOOST_TEST(d1.count() == 500'000'000);
    BOOST_TEST(d2.count() == 1'000'000'000);
    BOOST_TEST(d3.count() == 0);

    auto equal = backoff::exponential(1s, 2.0, 30s).with_jitter(jitter::equal);
    auto draws2 = script({0, 1'000'000'000, 7});
    BOOST_TEST(equal.delay(1, {}, draws2).count() == 500'000'000);                      // 1s/2 + 0
    BOOST_TEST(equal.delay(2, {}, draws2).count() == 1'000'000'000ll + 1'000'000'000);  // 1s + 1s
    BOOST_TEST(equal.delay(3, {}, draws2).count() == 2'000'000'000ll + 7);
}

// A custom backoff and the random source are both the caller's code, and
// one may depend on the other (a scripted generator shared by both, say):
// the base is asked before the draw under every jitter. (Under full jitter
// the two were arguments of one call, whose order g++ reverses.)
BOOST_AUTO_TEST_CASE(the_base_is_asked_before_the_draw) {
    for (jitter j : {jitter::full, jitter::equal}) {
        std::string order;
        auto b = backoff::custom([&](std::uint64_t, nanoseconds) {
                     order += "base ";
                     return nanoseconds(1s);
                 }).with_jitter(j);
        std::function<std::uint64_t()> draw = [&]() -> std::uint64_t {
            order += "draw ";
            return 0;
        };
        b.delay(1, {}, draw);
        BOOST_TEST(order == "base draw ");
    }
}

BOOST_AUTO_TEST_CASE(decorrelated_jitter_exact) {
    // sleep = min(cap, random_between(base, previous * 3)), previous starts at base.
    auto b = backoff::exponential(1s, 2.0, 10s).with_jitter(jitter::decorrelated);
    auto draws = script({2'000'000'000, 5'000'000'000, 100'000'000'000});
    nanoseconds d1 = b.delay(1, {}, draws);
    BOOST_TEST(d1.count() == 1'000'000'000ll + 2'000'000'000);  // [1s, 3s] -> 3s
    nanoseconds d2 = b.delay(2, d1, draws);
    BOOST_TEST(d2.count() == 1'000'000'000ll + 5'000'000'000);  // [1s, 9s] -> 6s
    nanoseconds d3 = b.delay(3, d2, draws);
    // [1s, 18s]: 100e9 % (17e9 + 1) = 14'999'999'995 -> 15.999999995s, capped at 10s
    BOOST_TEST(d3.count() == 10'000'000'000);
}

BOOST_AUTO_TEST_CASE(jitter_stays_in_bounds) {
    std::uint64_t x = 12345;
    std::function<std::uint64_t()> lcg = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
    auto full = backoff::exponential(100ms, 2.0, 5s).with_jitter(jitter::full);
    auto dec = backoff::exponential(100ms, 2.0, 5s).with_jitter(jitter::decorrelated);
    nanoseconds prev{};
    for (std::uint32_t i = 1; i < 200; ++i) {
        auto f = full.delay(i, {}, lcg);
        BOOST_TEST((f >= 0ns && f <= full.base_delay(i, {})));
        prev = dec.delay(i, prev, lcg);
        BOOST_TEST((prev >= 100ms && prev <= 5s));
    }
}

BOOST_AUTO_TEST_CASE(custom_function) {
    auto b = backoff::custom([](std::uint32_t n, nanoseconds prev) { return n == 1 ? nanoseconds(7ms) : prev + 1ms; });
    BOOST_TEST(ms_sequence(b, 3) == (std::vector<std::int64_t>{7, 8, 9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(invalid_values_are_refused) {
    check_throws_with([] { backoff::fixed(-1ms); }, "negative");
    check_throws_with([] { backoff::exponential(0ms, 2.0, 1s); }, "must be positive");
    check_throws_with([] { backoff::exponential(1s, 0.5, 10s); }, "multiplier must be");
    check_throws_with([] { backoff::exponential(10s, 2.0, 1s); }, "below the initial delay");
    check_throws_with([] { backoff::linear(1s, -1s, 2s); }, "increment must not be negative");
    check_throws_with([] { backoff::schedule(std::vector<nanoseconds>{}); }, "at least one step");
    check_throws_with([] { backoff::schedule("  "); }, "has no steps");
    check_throws_with([] { backoff::schedule("1s 5x"); }, "\"5x\" needs a unit");
    // A fraction or two units: told what to write instead.
    check_throws_with([] { backoff::schedule("1.5s"); },
                      "\"1.5s\" needs a unit: ms, s, m, h or d, after a whole number");
    check_throws_with([] { backoff::schedule("1h30m"); }, "(1500ms, not 1.5s; 90m, not 1h30m)");
    check_throws_with([] { backoff::schedule("1s soon"); }, "\"soon\" must start with a number");
    check_throws_with([] { backoff::custom(std::function<nanoseconds(std::uint32_t, nanoseconds)>{}); },
                      "needs a function");
}

BOOST_AUTO_TEST_CASE(parse_durations) {
    BOOST_TEST(steadfast::parse_duration("250ms").count() == nanoseconds(250ms).count());
    BOOST_TEST(steadfast::parse_duration("2m").count() == nanoseconds(2min).count());
    BOOST_TEST(steadfast::parse_duration("1d").count() == nanoseconds(24h).count());
    check_throws_with([] { steadfast::parse_duration("99999999999999999999h"); }, "out of range");
}

BOOST_AUTO_TEST_SUITE_END()
