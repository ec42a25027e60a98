// Smallest use of the installed package: a co_await retry that succeeds on the third attempt.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/envelope.hpp>

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
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto policy = steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1ms));
            auto r = co_await steadfast::retry(
                policy, [&](const steadfast::attempt_context&) -> asio::awaitable<steadfast::error_code> {
                    ++attempts;
                    co_return attempts < 3 ? asio::error::connection_refused : steadfast::error_code{};
                });
            ok = r.ok() && r.attempts() == 3;
        },
        asio::detached);
    ioc.run();
    // The other two components link and work from the installed package too.
    auto online = steadfast::make_flag(ioc.get_executor(), "secondary-online", true);
    const bool flag_ok = online->value();
    const auto decoded = steadfast::envelope::decode(R"({"id":"a","stream":"s","seq":1,"payload":null})");
    const bool envelope_ok = std::holds_alternative<steadfast::envelope::decoded>(decoded);
    std::printf("consumer: %s after %d attempts; conditions %s; envelope %s\n", ok ? "ok" : "FAILED", attempts,
                flag_ok ? "ok" : "FAILED", envelope_ok ? "ok" : "FAILED");
    return ok && flag_ok && envelope_ok ? 0 : 1;
}
