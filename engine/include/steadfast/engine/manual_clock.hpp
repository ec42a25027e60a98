// A manual clock for tests: hours of backoff run in milliseconds.
//
// manual_timer is an Asio timer on manual_clock. Its wait traits tell the
// reactor never to block and remember the earliest deadline asked for;
// run_virtual() polls the io_context and, when nothing is ready, jumps the
// clock to that deadline. Single-threaded use only; reset() between tests.
#pragma once

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace steadfast {

struct manual_clock {
    using rep = std::int64_t;
    using period = std::nano;
    using duration = std::chrono::nanoseconds;
    using time_point = std::chrono::time_point<manual_clock>;
    static constexpr bool is_steady = true;

    static time_point now() noexcept { return time_point(duration(now_ns_.load(std::memory_order_relaxed))); }
    static void advance(duration d) noexcept { now_ns_.fetch_add(d.count(), std::memory_order_relaxed); }
    static void set(time_point t) noexcept { now_ns_.store(t.time_since_epoch().count(), std::memory_order_relaxed); }
    /// Back to t = 0 with no remembered deadline.
    static void reset() noexcept {
        now_ns_.store(0);
        next_deadline_.store(none);
    }

    static constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    inline static std::atomic<std::int64_t> now_ns_{0};
    inline static std::atomic<std::int64_t> next_deadline_{none};

    static void remember(duration d) noexcept {
        const std::int64_t now = now_ns_.load(std::memory_order_relaxed);
        const std::int64_t at = d.count() > none - now ? none : now + d.count();
        std::int64_t cur = next_deadline_.load(std::memory_order_relaxed);
        while (at < cur && !next_deadline_.compare_exchange_weak(cur, at)) {
        }
    }
};

struct manual_wait_traits {
    static manual_clock::duration to_wait_duration(const manual_clock::duration& d) {
        if (d.count() > 0) manual_clock::remember(d);
        return manual_clock::duration::zero();
    }
    static manual_clock::duration to_wait_duration(const manual_clock::time_point& t) {
        return to_wait_duration(t - manual_clock::now());
    }
};

using manual_timer = boost::asio::basic_waitable_timer<manual_clock, manual_wait_traits>;

/// Runs `ioc` on virtual time until it runs out of work, or until the clock
/// would pass `until`. Returns the number of handlers run.
inline std::size_t run_virtual(boost::asio::io_context& ioc,
                               manual_clock::time_point until = manual_clock::time_point::max()) {
    std::size_t total = 0;
    for (;;) {
        manual_clock::next_deadline_.store(manual_clock::none);
        const std::size_t n = ioc.poll();
        total += n;
        if (ioc.stopped()) break;
        if (n > 0) continue;
        const std::int64_t next = manual_clock::next_deadline_.load();
        if (next == manual_clock::none) {
            // Nothing ran and no timer asked for a wait: either done, or only
            // work outside this thread is pending. One more poll decides.
            if (ioc.poll() == 0) break;
            continue;
        }
        if (next > until.time_since_epoch().count()) {
            manual_clock::set(until);
            ioc.poll();
            break;
        }
        if (next > manual_clock::now_ns_.load()) manual_clock::now_ns_.store(next);
    }
    return total;
}

}  // namespace steadfast
