// The log limiter (common/log.hpp) on made-up times: the first line goes out,
// then at most one a second, each saying how many were held back since the
// one before; reset() forgets what was held.
#include <common/log.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>

using steadfast::app::log_limiter;
using namespace std::chrono_literals;

namespace {
// A steady-clock time `d` after an arbitrary start (not the clock's epoch:
// the limiter's "never logged" is 0).
std::chrono::steady_clock::time_point at(std::chrono::nanoseconds d) {
    return std::chrono::steady_clock::time_point(100s + d);
}
// What allow() answered: the lines held back before this one, or -1 for "not now".
long long said(std::optional<std::uint64_t> held) {
    return held ? static_cast<long long>(*held) : -1;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(app_log_limiter)

BOOST_AUTO_TEST_CASE(the_first_line_goes_out_then_one_a_second_counting_the_held) {
    log_limiter l;
    BOOST_TEST(said(l.allow_at(at(0ms))) == 0);
    BOOST_TEST(!l.allow_at(at(1ms)).has_value());
    BOOST_TEST(!l.allow_at(at(500ms)).has_value());
    BOOST_TEST(!l.allow_at(at(999ms)).has_value());
    // A second after the last line (to the nanosecond): the three held back.
    BOOST_TEST(said(l.allow_at(at(1s))) == 3);
    // The next second counts from that line, not from the first one.
    BOOST_TEST(!l.allow_at(at(1s + 999ms)).has_value());
    BOOST_TEST(said(l.allow_at(at(2s))) == 1);
    // Long quiet: the next line goes out at once, nothing held.
    BOOST_TEST(said(l.allow_at(at(1h))) == 0);
}

BOOST_AUTO_TEST_CASE(just_under_a_second_is_held) {
    log_limiter l;
    BOOST_TEST(l.allow_at(at(0ns)).has_value());
    BOOST_TEST(!l.allow_at(at(1s - 1ns)).has_value());
    BOOST_TEST(said(l.allow_at(at(1s))) == 1);
}

BOOST_AUTO_TEST_CASE(reset_forgets_the_held_lines_not_the_last_time) {
    log_limiter l;
    BOOST_TEST(l.allow_at(at(0ms)).has_value());
    BOOST_TEST(!l.allow_at(at(10ms)).has_value());
    BOOST_TEST(!l.allow_at(at(20ms)).has_value());
    l.reset();                                      // (told elsewhere: a recovery line)
    BOOST_TEST(!l.allow_at(at(30ms)).has_value());  // still within the second
    BOOST_TEST(said(l.allow_at(at(1s))) == 1);
}

BOOST_AUTO_TEST_CASE(two_limiters_are_apart) {
    log_limiter a, b;
    BOOST_TEST(a.allow_at(at(0ms)).has_value());
    BOOST_TEST(b.allow_at(at(1ms)).has_value());
    BOOST_TEST(!a.allow_at(at(2ms)).has_value());
    BOOST_TEST(said(b.allow_at(at(1s + 1ms))) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
