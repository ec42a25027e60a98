// The engine and conditions from the installed package, without the transport.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>

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
        },
        asio::detached);
    ioc.run();
    std::printf("engine-only consumer: %s after %d attempts\n", ok ? "ok" : "FAILED", attempts);
    return ok ? 0 : 1;
}
