// The health probe of a peer, for steadfast::probe_condition:
//
//   http::client probe_client(ex, http::client::from_url("http://127.0.0.1:9001"));
//   auto online = steadfast::make_probe(ex, "secondary-online", [&] { return http::health_check(probe_client); });
//
// Use a client of its own: a client sends one request at a time.
#pragma once

#include <steadfast/transport/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>

namespace steadfast::http {

/// GET `target`; healthy when the answer is 200. Any transport failure or
/// other status is unhealthy. Never throws for network failures.
boost::asio::awaitable<bool> health_check(client& c, std::string target = "/health");

/// The same, and why it is unhealthy ("HTTP 503: " and the answer's body on
/// one line, at most 160 characters; "connect: Connection refused";
/// "handshake: certificate verify failed ...") in `why`, which is cleared
/// when healthy. `tls_failure`: an error of OpenSSL's (see is_tls_error).
struct health_report {
    bool healthy = false;
    bool tls_failure = false;
    // The peer's host refused the connection: nothing listens at the address
    // (a peer restarting, or not started). A check that fails this way costs
    // the other side nothing; any other failure (a timeout, an answer that is
    // not 200, TLS, a name that does not resolve) may cost it work.
    bool refused = false;
    std::string why;
    // The peer's X-Steadfast-Instance header (a steadfast-secondary's id for
    // this run of the process; empty when absent): a new value means that it
    // restarted, however briefly it was down.
    std::string instance;
};
boost::asio::awaitable<health_report> health_check_report(client& c, std::string target = "/health");

}  // namespace steadfast::http
