// Fault injection for demos and tests (--fault-rate, --fault-status,
// --drop-rate, --delay): a wrapper around a route's handler, so that the
// handler itself knows nothing of it. Order: the delay, then a dropped
// connection, then an injected status, else the handler.
#pragma once

#include <steadfast/transport/server.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace steadfast::secondary {

struct fault_options {
    double fault_rate = 0, drop_rate = 0;  // shares of requests, 0..1
    unsigned fault_status = 503;
    std::chrono::milliseconds delay{0};
    bool any() const noexcept { return fault_rate > 0 || drop_rate > 0 || delay.count() > 0; }
};

/// `inner` with faults injected; `rejected` is told "injected_drop" or
/// "injected_fault" (metrics). `seed` fixes the coin (tests); 0: random.
http::router::handler with_faults(http::router::handler inner, fault_options o, boost::asio::any_io_executor ex,
                                  std::function<void(const std::string&)> rejected, std::uint64_t seed = 0);

}  // namespace steadfast::secondary
