#include "faults.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <random>

namespace asio = boost::asio;

namespace steadfast::secondary {

http::router::handler with_faults(http::router::handler inner, fault_options o, asio::any_io_executor ex,
                                  std::function<void(const std::string&)> rejected, std::uint64_t seed) {
    if (!o.any()) return inner;
    auto rng = std::make_shared<std::mt19937_64>(seed ? seed : std::random_device{}());
    return [inner = std::move(inner), o, ex, rejected = std::move(rejected),
            rng](http::request& req) -> asio::awaitable<http::response> {
        std::uniform_real_distribution<double> coin(0.0, 1.0);
        if (o.delay.count()) {
            asio::steady_timer t(ex, o.delay);
            co_await t.async_wait(asio::use_awaitable);
        }
        if (o.drop_rate > 0 && coin(*rng) < o.drop_rate) {
            if (rejected) rejected("injected_drop");
            http::response r;
            r.drop_connection = true;
            co_return r;
        }
        if (o.fault_rate > 0 && coin(*rng) < o.fault_rate) {
            if (rejected) rejected("injected_fault");
            auto r = http::response::error(o.fault_status, "injected fault");
            if (o.fault_status == 503 || o.fault_status == 429) r.set("Retry-After", "1");
            co_return r;
        }
        co_return co_await inner(req);
    };
}

}  // namespace steadfast::secondary
