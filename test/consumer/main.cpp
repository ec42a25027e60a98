// Smallest use of the installed package: a co_await retry that succeeds on the third attempt.
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
    int attempts = 0;
    bool ok = false;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        auto policy = steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1ms));
        auto r = co_await steadfast::retry(policy, [&](const steadfast::attempt_context&) -> asio::awaitable<steadfast::error_code> {
            ++attempts;
            co_return attempts < 3 ? asio::error::connection_refused : steadfast::error_code{};
        });
        ok = r.ok() && r.attempts() == 3;
    }, asio::detached);
    ioc.run();
    std::printf("consumer: %s after %d attempts\n", ok ? "ok" : "FAILED", attempts);
    return ok ? 0 : 1;
}
