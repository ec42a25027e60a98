// Fixtures for tests on virtual time: run a coroutine to completion on a
// manual_clock, and small attempt fakes.
#pragma once

#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>

namespace steadfast_test {

namespace asio = boost::asio;
using steadfast::manual_clock;
using steadfast::manual_timer;

/// Resets the manual clock for each test that uses it.
struct virtual_time {
    virtual_time() { manual_clock::reset(); }
    ~virtual_time() { manual_clock::reset(); }
    static std::chrono::nanoseconds now() { return manual_clock::now().time_since_epoch(); }
};

/// Runs `aw` on `ioc` on virtual time and returns its value.
template <class T>
T run_virtual(asio::io_context& ioc, asio::awaitable<T> aw) {
    std::optional<T> out;
    std::exception_ptr err;
    ioc.restart();  // it may have run out of work in an earlier call
    asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e, T v) {
        err = e;
        out.emplace(std::move(v));
    });
    steadfast::run_virtual(ioc);
    if (err) std::rethrow_exception(err);
    if (!out) throw std::logic_error("the coroutine did not finish: the io_context ran out of work");
    return std::move(*out);
}

/// Whole seconds of `d` (Boost.Test cannot print durations).
inline std::int64_t secs(std::chrono::nanoseconds d) {
    return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

/// Waits `d` of virtual time inside an attempt.
inline asio::awaitable<void> virtual_sleep(std::chrono::nanoseconds d) {
    manual_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

}  // namespace steadfast_test

#include <steadfast/engine/retry.hpp>

#include <array>
#include <functional>
#include <type_traits>

namespace steadfast_test {

/// An attempt function as one type per result type. Each attempt type (and
/// each completion handler type) instantiates the retry again: for
/// async_retry, its state machine and a coroutine entry point for every way
/// it starts an attempt. Cases whose attempt's own type is not what they
/// test pass it through this, and the test programs compile in about half
/// the time (test/unit/engine/pipeline.cpp: 79 -> 37 s under clang's ASan).
template <class R>
using attempt_fn = std::function<asio::awaitable<R>(const steadfast::attempt_context&)>;

template <class F>
auto erased(F f) {
    using R = typename std::invoke_result_t<F&, const steadfast::attempt_context&>::value_type;
    return attempt_fn<R>(std::move(f));
}
template <class T>
inline constexpr bool is_attempt_fn = false;
template <class R>
inline constexpr bool is_attempt_fn<attempt_fn<R>> = true;

/// Runs the same retry through both forms, co_await retry() and the composed
/// async_retry(), each from t = 0 on a fresh io_context. `setup` runs before
/// each (to schedule flag flips and the like) and may keep state alive. A
/// plain attempt function runs erased (see erased()).
template <class Attempt>
std::array<steadfast::retry_result_for<Attempt>, 2> run_both(const steadfast::retry_policy& policy,
                                                             const Attempt& attempt,
                                                             const std::function<void(asio::io_context&)>& setup = {}) {
    // (Not erased(attempt)'s type in the test: deducing it instantiates
    // erased() even for an attempt that is not a plain function, classified()
    // say, which it cannot take.)
    if constexpr (std::is_invocable_v<const Attempt&, const steadfast::attempt_context&> && !is_attempt_fn<Attempt>)
        return run_both(policy, erased(attempt), setup);
    else {
        using result_t = steadfast::retry_result_for<Attempt>;
        std::array<std::optional<result_t>, 2> out;
        for (int form = 0; form < 2; ++form) {
            manual_clock::reset();
            asio::io_context ioc;
            if (setup) setup(ioc);
            if (form == 0)
                asio::co_spawn(ioc, steadfast::retry<manual_timer>(policy, attempt),
                               [&](std::exception_ptr e, result_t r) {
                                   if (e) std::rethrow_exception(e);
                                   out[0].emplace(std::move(r));
                               });
            else
                steadfast::async_retry<manual_timer>(ioc.get_executor(), policy, attempt,
                                                     [&](result_t r) { out[1].emplace(std::move(r)); });
            steadfast::run_virtual(ioc);
            if (!out[form]) throw std::logic_error("the retry did not finish");
        }
        return {std::move(*out[0]), std::move(*out[1])};
    }
}

}  // namespace steadfast_test
