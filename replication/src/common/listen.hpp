// A listener's start, with its failure sorted: an address in use is the
// configuration's fault (config_error), not the machine's.
#pragma once

#include <steadfast/transport/server.hpp>

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace steadfast::app {

/// A configuration the process cannot run with that no flag check could
/// catch (the listen address in use): exit 2, like a bad flag, so that a
/// service manager does not restart it forever.
struct config_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// server.listen(host, port), with its failure sorted for the exit code: an
/// address in use, or not ours to bind, is config_error (exit 2); one not
/// configured on this host yet (a boot where the network comes later) stays
/// a system_error (exit 1: the unit tries again).
boost::asio::ip::tcp::endpoint listen(http::server& server, const std::string& host, std::uint16_t port);

/// Sets `so.accept_failed`: a failed accept (out of descriptors, ...) is
/// logged as "accept_failed", at most once a second, naming the error and
/// how many were held back (the server retries every 50 ms, and counts
/// them in stats::accept_failures for the metric).
void report_accept_failures(http::server::options& so);

/// Sets `so.before_continue`: a request that asks to be told to go on
/// (Expect: 100-continue) for a path outside so.reserved_paths (health,
/// readiness, metrics: open to all) without one of `tokens()` is answered
/// 401 at its header, before its body is sent, and counted by `refused`
/// (when given) as the route would have counted it. `tokens` is read on the
/// server's executor each time (tokens reloaded in place).
void refuse_unauthorized_at_header(http::server::options& so, std::function<const std::vector<std::string>&()> tokens,
                                   std::function<void()> refused = {});

}  // namespace steadfast::app
