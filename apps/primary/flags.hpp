// steadfast-primary's configuration, as its flags set it, and its exit codes.
#pragma once

#include <primary/config.hpp>

#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/server.hpp>
#include <steadfast/transport/tls.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

/// The daemon's settings: the node's (primary_config) and the intake's.
struct options : primary_config {
    std::string listen, token_file, stream = "default";
    bool from_stdin = false, exit_when_drained = false;
    std::size_t max_streams = 10'000;
    http::server::options listener;                      // --max-connections, --reserved-connections, --header-timeout
    std::optional<http::tls_server_options> listen_tls;  // HTTPS on --listen
};

/// Exit codes (also in --help and the README).
enum exit_code : int { exit_ok = 0, exit_error = 1, exit_usage = 2, exit_demoted = 3 };

/// The flags to run (flags.cpp), checked, with the log set up and the token
/// file read. nullopt: --help or --version was printed. Throws
/// boost::program_options::error or std::invalid_argument (exit 2).
std::optional<options> parse_flags(int argc, char** argv);

/// `status` and `dead-letters` (commands.cpp): the exit code, or nullopt
/// when argv names no command (flags to run). Throws as parse_flags does.
std::optional<int> run_command(int argc, char** argv);

}  // namespace steadfast::primary
