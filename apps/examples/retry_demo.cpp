// steadfast-retry-demo: retries happening, on a real loopback socket.
//
// 1. A TCP connect to a port nobody listens on yet: refused, retried with
//    exponential backoff and jitter, until a listener opens 1.5 s later.
// 2. A permanent error: not retried.
// 3. A shared retry budget: ten operations against a dead port run dry.
// 4. Cancellation: a retry that would wait an hour ends at once.
#include <steadfast/engine.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {
double ms(std::chrono::nanoseconds d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

// Logs every attempt through the hooks: the engine itself prints nothing.
steadfast::retry_hooks logging(const char* name) {
    return {
        .before_attempt = {},
        .after_attempt =
            [name](const steadfast::attempt_context& c, const steadfast::classification& cl,
                   const steadfast::decision& d) {
                if (d.what == steadfast::decision::action::retry)
                    std::printf("  [%s] attempt %llu at %7.1f ms: %s -> retry in %.1f ms\n", name,
                                static_cast<unsigned long long>(c.number), ms(c.elapsed), cl.ec.message().c_str(),
                                ms(d.delay));
                else
                    std::printf("  [%s] attempt %llu at %7.1f ms: %s -> %s\n", name,
                                static_cast<unsigned long long>(c.number), ms(c.elapsed),
                                cl.ec ? cl.ec.message().c_str() : "ok",
                                std::string(steadfast::to_string(d.reason)).c_str());
            },
        .on_give_up = {},
    };
}

// One attempt: connect to 127.0.0.1:port. Errors are values.
auto connect_to(unsigned short port) {
    return [port](const steadfast::attempt_context&) -> asio::awaitable<steadfast::error_code> {
        tcp::socket s(co_await asio::this_coro::executor);
        auto [ec] =
            co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::as_tuple(asio::use_awaitable));
        co_return ec;
    };
}

unsigned short free_port(asio::io_context& ioc) {
    tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}

asio::awaitable<void> demo(asio::io_context& ioc, asio::cancellation_signal& cancel) {
    auto ex = co_await asio::this_coro::executor;

    std::puts("1. connect until the server is up (exponential 50 ms x2, cap 1 s, full jitter)");
    const unsigned short port = free_port(ioc);
    auto acceptor = std::make_shared<tcp::acceptor>(ex);
    auto opener = std::make_shared<asio::steady_timer>(ex, 1500ms);
    opener->async_wait([acceptor, port, opener](steadfast::error_code) {
        acceptor->open(tcp::v4());
        acceptor->set_option(tcp::acceptor::reuse_address(true));
        acceptor->bind({asio::ip::make_address("127.0.0.1"), port});
        acceptor->listen();
        std::printf("  (server now listening on port %u)\n", port);
    });
    auto policy = steadfast::retry_policy{}
                      .with_backoff(steadfast::backoff::exponential(50ms, 2.0, 1s).with_jitter(steadfast::jitter::full))
                      .with_stop(steadfast::stop::max_elapsed(10s))
                      .with_attempt_timeout(500ms)
                      .with_hooks(logging("connect"));
    auto r = co_await steadfast::retry(policy, connect_to(port));
    std::printf("  => %s after %llu attempts, %.1f ms\n\n", std::string(steadfast::to_string(r.reason())).c_str(),
                static_cast<unsigned long long>(r.attempts()), ms(r.elapsed()));

    std::puts("2. a permanent error is not retried");
    auto invalid = [](const steadfast::attempt_context&) -> asio::awaitable<steadfast::attempt_result<int>> {
        co_return steadfast::attempt_result<int>::fail(asio::error::access_denied);
    };
    auto r2 = co_await steadfast::retry(policy.with_hooks(logging("permanent")), invalid);
    std::printf("  => %s after %llu attempt\n\n", std::string(steadfast::to_string(r2.reason())).c_str(),
                static_cast<unsigned long long>(r2.attempts()));

    std::puts("3. ten operations against a dead port share a budget of 20 tokens (5 a retry)");
    auto budget =
        std::make_shared<steadfast::retry_budget>(steadfast::retry_budget::options{.capacity = 20, .retry_cost = 5});
    auto shared = steadfast::retry_policy{}
                      .with_backoff(steadfast::backoff::fixed(20ms))
                      .with_stop(steadfast::stop::max_attempts(10))
                      .with_budget(budget);
    const unsigned short dead = free_port(ioc);
    auto remaining = std::make_shared<int>(10);
    auto attempts = std::make_shared<unsigned long long>(0);
    for (int i = 0; i < 10; ++i)
        steadfast::async_retry(ex, shared, connect_to(dead), [=](steadfast::retry_result<steadfast::error_code> res) {
            *attempts += res.attempts();
            if (--*remaining == 0)
                std::printf("  => 10 operations made %llu attempts in all (without a budget: 100); last stop: %s\n\n",
                            *attempts, std::string(steadfast::to_string(res.reason())).c_str());
        });
    asio::steady_timer wait(ex, 500ms);
    co_await wait.async_wait(asio::use_awaitable);

    std::puts("4. cancelling a retry that sleeps for an hour");
    auto hour =
        steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1h)).with_stop(steadfast::stop::never());
    steadfast::async_retry(
        ex, hour, connect_to(dead),
        asio::bind_cancellation_slot(cancel.slot(), [](steadfast::retry_result<steadfast::error_code> res) {
            std::printf("  => %s after %llu attempt, %.1f ms\n",
                        std::string(steadfast::to_string(res.reason())).c_str(),
                        static_cast<unsigned long long>(res.attempts()), ms(res.elapsed()));
        }));
    asio::steady_timer soon(ex, 100ms);
    co_await soon.async_wait(asio::use_awaitable);
    cancel.emit(asio::cancellation_type::terminal);
    acceptor->close();
}
}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    asio::io_context ioc;
    asio::cancellation_signal cancel;  // must outlive the operation it cancels
    asio::co_spawn(ioc, demo(ioc, cancel), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
    });
    ioc.run();
    return 0;
}
