// Where the daemons' settings come from, in this order (the first that sets
// a flag wins):
//   1. the command line:            --max-backoff 30s
//   2. the environment:             STEADFAST_MAX_BACKOFF=30s
//   3. a configuration file:        --config FILE (or STEADFAST_CONFIG), lines of
//                                   `max-backoff = 30s`, `#` comments
// Built on Boost.Program_options' own parsers for the three.
#pragma once

#include "log.hpp"

#include <steadfast/transport/tls.hpp>

#include <boost/program_options.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace steadfast::app {

/// Adds --config, --log-level, --version and --help to `d`.
void add_common_options(boost::program_options::options_description& d);

/// Reads the three sources into `vm` (not notified). Errors name the source:
/// an unknown key in the file (with its line), an unknown STEADFAST_*
/// variable, a value that does not parse.
void read_options(int argc, char** argv, const boost::program_options::options_description& d,
                  boost::program_options::variables_map& vm);

/// The log level of --log-level (debug, info, warn, error).
level parse_level(const std::string& text);

/// A duration flag ("250ms", "30s", "5m", "1h"): its value in milliseconds,
/// at least `min`, or invalid_argument naming the flag. A legacy twin in
/// milliseconds (e.g. --max-backoff-ms next to --max-backoff) is taken when
/// the new flag is not given; giving both is an error.
std::chrono::milliseconds duration_option(const boost::program_options::variables_map& vm, const std::string& name,
                                          const std::string& legacy_ms_name, std::chrono::milliseconds min);

/// --tls-cert, --tls-key, --tls-client-ca: HTTPS on the daemon's listener,
/// optionally requiring client certificates (mutual TLS).
void add_tls_server_options(boost::program_options::options_description& d);
/// The listener's TLS, or nullopt without --tls-cert. The files are loaded
/// once here: a bad path or PEM is an invalid_argument naming it.
std::optional<http::tls_server_options> tls_server_from(const boost::program_options::variables_map& vm);

/// --tls-ca, --tls-client-cert, --tls-client-key, --tls-server-name: how a
/// daemon verifies (and shows itself to) an https:// peer.
void add_tls_client_options(boost::program_options::options_description& d);
/// The TLS of a connection to `url`: nullopt for http:// (where any of these
/// flags is an error), the flags (or the system's trust store) for https://.
std::optional<http::tls_client_options> tls_client_from(const boost::program_options::variables_map& vm,
                                                        const std::string& url, const std::string& url_flag);

/// A fatal error before or outside the event loop, as one JSON line on
/// standard error like every other line: {"level":"error","event":EVENT,"error":TEXT}.
void report_fatal(std::string_view app, std::string_view event, const std::string& text);

}  // namespace steadfast::app
