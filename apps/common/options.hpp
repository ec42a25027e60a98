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
#include <map>
#include <optional>
#include <string>

namespace steadfast::app {

/// Adds --config, --log-level, --version and --help to `d`.
void add_common_options(boost::program_options::options_description& d);

/// Flags kept for old scripts that take milliseconds where the new spelling
/// takes a duration: {"max-backoff-ms", "max-backoff"}. Each is read as its
/// twin ("500" as "500ms"), so precedence and "given twice" work as for one flag.
using legacy_ms_flags = std::map<std::string, std::string>;

/// Reads the three sources into `vm` (not notified). Errors name the source:
/// an unknown key in the file, an unknown STEADFAST_* variable, a negative
/// value for a count, a value that does not parse. help, version and config
/// are command-line (or STEADFAST_CONFIG) only.
void read_options(int argc, char** argv, const boost::program_options::options_description& d,
                  boost::program_options::variables_map& vm, const legacy_ms_flags& legacy = {});

/// The command line parsed against `d`, refusing a word that is no flag's
/// value (Boost.Program_options drops such words silently: `dead-letters
/// requeue --data D` listed the dead letters and exited 0). argv[0] is skipped.
boost::program_options::parsed_options parse_command_line(int argc, char** argv,
                                                          const boost::program_options::options_description& d);

/// The log level of --log-level (debug, info, warn, error).
level parse_level(const std::string& text);

/// A duration flag ("250ms", "30s", "5m", "1h"), within [min, max], or
/// invalid_argument naming the flag.
std::chrono::milliseconds duration_option(const boost::program_options::variables_map& vm, const std::string& name,
                                          std::chrono::milliseconds min, std::chrono::milliseconds max);

/// The value of a string flag that may not be given empty ("--data ''", `data =`).
std::string non_empty(const boost::program_options::variables_map& vm, const std::string& name);

/// The secondary's TLS flags: --tls-cert, --tls-key, --tls-client-ca (HTTPS on
/// --listen, optionally requiring client certificates: mutual TLS).
void add_tls_server_options(boost::program_options::options_description& d);
/// The primary's: --tls-ca, --tls-server-name (verifying an https:// secondary),
/// --tls-cert, --tls-key (its certificate: presented to a secondary that asks
/// for one, and served on --listen with --tls-listen), --tls-listen,
/// --tls-client-ca (with --tls-listen: publishers' certificates).
void add_tls_primary_options(boost::program_options::options_description& d);

/// The listener's TLS from --tls-cert/--tls-key/--tls-client-ca, or nullopt
/// without them. The files are loaded once here: a bad path or PEM is an
/// invalid_argument naming it.
std::optional<http::tls_server_options> tls_server_from(const boost::program_options::variables_map& vm);

/// The TLS of the primary's link to `url`: nullopt for http:// (where
/// --tls-ca and --tls-server-name are errors), for https:// the CA (or the
/// system's trust store), the name and --tls-cert/--tls-key as its client
/// certificate.
std::optional<http::tls_client_options> tls_client_from(const boost::program_options::variables_map& vm,
                                                        const std::string& url);

/// A fatal error before or outside the event loop, as one JSON line on
/// standard error like every other line: {"level":"error","event":EVENT,"error":TEXT}.
void report_fatal(std::string_view app, std::string_view event, const std::string& text);

}  // namespace steadfast::app
