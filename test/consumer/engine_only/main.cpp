// The engine and conditions from the installed package, without the transport.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace asio = boost::asio;
using namespace std::chrono_literals;

int main() {
    asio::io_context ioc;
    auto gate = steadfast::make_flag(ioc.get_executor(), "gate", true);
    int attempts = 0;
    bool ok = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto policy =
                steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1ms)).with_attempt_when(gate);
            auto r = co_await steadfast::retry(
                policy, [&](const steadfast::attempt_context&) -> asio::awaitable<steadfast::error_code> {
                    co_return ++attempts < 2 ? asio::error::connection_reset : steadfast::error_code{};
                });
            ok = r.ok() && r.attempts() == 2;
            // The pipeline, hedged, from the installed headers.
            const auto p = steadfast::pipeline{}
                               .with_concurrency_limit(std::make_shared<steadfast::concurrency_limit>(
                                   steadfast::concurrency_limit::options{.limit = 1}))
                               .with_hedging({.max_attempts = 2, .delay = 1ms})
                               .with_timeout(1s);
            auto hedged = co_await steadfast::execute(
                p, [&](const steadfast::attempt_context& c) -> asio::awaitable<steadfast::error_code> {
                    ++attempts;
                    co_return c.hedge == 0 ? steadfast::error_code{} : asio::error::operation_aborted;
                });
            ok = ok && hedged.ok();
        },
        asio::detached);
    ioc.run();
    std::printf("engine-only consumer: %s after %d attempts\n", ok ? "ok" : "FAILED", attempts);
    return ok ? 0 : 1;
}
