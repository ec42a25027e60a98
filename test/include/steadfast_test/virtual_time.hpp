// Fixtures for tests on virtual time: run a coroutine to completion on a
// manual_clock, and small attempt fakes.
#pragma once

#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
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

/// Waits `d` of virtual time inside an attempt.
inline asio::awaitable<void> virtual_sleep(std::chrono::nanoseconds d) {
    manual_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

}  // namespace steadfast_test
