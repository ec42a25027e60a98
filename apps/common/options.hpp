// Where the daemons' settings come from, in this order (the first that sets
// a flag wins):
//   1. the command line:            --max-backoff 30s
//   2. the environment:             STEADFAST_MAX_BACKOFF=30s
//   3. a configuration file:        --config FILE (or STEADFAST_CONFIG), lines of
//                                   `max-backoff = 30s`, `#` comments
// Built on Boost.Program_options' own parsers for the three.
#pragma once

#include <common/listen.hpp>
#include <common/log.hpp>

#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/server.hpp>
#include <steadfast/transport/tls.hpp>

#include <boost/program_options.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
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

/// `BINARY COMMAND --data DIR [--help]` (argv[1] is COMMAND): the data
/// directory, or nullopt when --help was asked for (the usage is printed).
/// Throws boost::program_options::error for anything else.
std::optional<std::string> data_command(int argc, char** argv, const std::string& binary, const std::string& command,
                                        const char* data_help);

/// The log level of --log-level (debug, info, warn, error).
level parse_level(const std::string& text);

/// TEXT (30s, 500ms, 2h) as the value of --NAME: std::invalid_argument
/// naming the flag, in a user's words, when it is not a duration.
std::chrono::nanoseconds parse_duration_flag(const std::string& name, const std::string& text);
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

/// TLS and credentials toward NATS, the same on both daemons: --nats-tls,
/// --nats-ca, --nats-cert, --nats-key, --nats-server-name, --nats-user with
/// --nats-password-file, --nats-token-file, --nats-creds.
void add_nats_options(boost::program_options::options_description& d);
/// Their value for a JetStream link (`nats`: --secondary or --source names
/// NATS servers; without, any of them is refused). Secrets are read from
/// their files here; a file that cannot be read, a certificate without its
/// key, two kinds of credential: invalid_argument naming it (exit 2).
jetstream::security nats_security_from(const boost::program_options::variables_map& vm, bool nats);

/// The listener's limits, the same on both daemons: --max-connections,
/// --reserved-connections (health, readiness and metrics beyond the cap),
/// --header-timeout (a new connection's first request header).
void add_listener_options(boost::program_options::options_description& d);
/// Sets them on `so`, or invalid_argument naming the flag.
void listener_from(const boost::program_options::variables_map& vm, http::server::options& so);

/// --min-free-space: the storage watermark (see disk_space.hpp).
void add_storage_options(boost::program_options::options_description& d);
/// Its value in bytes; 0 turns the check off. A value under `largest_message`
/// (that could not store one) is refused.
std::uint64_t min_free_space_from(const boost::program_options::variables_map& vm, std::uint64_t largest_message);
/// "64MiB", "512KiB", "1GiB", "1048576" (bytes), or invalid_argument.
std::uint64_t parse_size(const std::string& text);

/// Logs (error) a certificate that is expired or not yet valid: the process
/// still starts, but peers that verify will refuse it. `role` names the flag.
void warn_invalid_certificate(const std::string& cert_file, std::string_view role);

/// A fatal error before or outside the event loop, as one JSON line on
/// standard error like every other line: {"level":"error","event":EVENT,"error":TEXT}.
void report_fatal(std::string_view app, std::string_view event, const std::string& text);

/// Both daemons' process shell around `body`: SIGXFSZ ignored (a file-size
/// limit fails a write with EFBIG, which the storage reports, instead of
/// killing the process) and SIGHUP too (it reloads the token file while
/// serving; before and after that it must not end the process); what
/// escapes `body` becomes one fatal line and the exit code: a bad flag or
/// configuration (program_options, invalid_argument, config_error: the
/// listen address in use) 2, anything else 1.
int daemon_main(std::string_view app, const std::function<int()>& body);

}  // namespace steadfast::app
