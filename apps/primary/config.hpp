// steadfast-primary's configuration, as its flags set it, and the small
// things every part of it shares (exit codes, the wall clock).
#pragma once

#include "../common/sqlite.hpp"

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

struct options {
    std::string secondary, data, listen, token_file, stream = "default", ladder;
    std::vector<std::string> tokens;  // token_file's, read when the flags are (SIGHUP reloads them)
    bool from_stdin = false, exit_when_drained = false;
    app::sync_mode sync = app::sync_mode::full;
    std::uint64_t epoch = 0;
    std::size_t batch_max = 4000, batch_bytes = 512 * 1024;
    std::size_t connections = 8, max_streams = 10'000;
    http::server::options listener;  // --max-connections, --reserved-connections, --header-timeout
    std::uint64_t min_free = 0;      // --min-free-space (0: off)
    std::uint32_t quick_retries = 5;
    std::chrono::milliseconds max_backoff{30'000}, attempt_timeout{10'000}, retain{3'600'000};
    std::optional<http::tls_client_options> secondary_tls;  // an https:// --secondary
    std::optional<http::tls_server_options> listen_tls;     // HTTPS on --listen
    // A nats:// --secondary: JetStream. Stream `<js_stream>`, subjects `<js_prefix>.<stream>`.
    std::string js_stream = "steadfast", js_prefix;
    unsigned js_replicas = 1;
    bool jetstream() const { return jetstream::is_nats_url(secondary); }
};

/// Exit codes (also in --help and the README).
enum exit_code : int { exit_ok = 0, exit_error = 1, exit_usage = 2, exit_demoted = 3 };

std::int64_t now_ms();

/// Over JetStream a stream's name becomes subject tokens: no empty one.
bool valid_subject_tokens(std::string_view stream);

/// The flags to run (flags.cpp), checked, with the log set up and the token
/// file read. nullopt: --help or --version was printed. Throws
/// boost::program_options::error or std::invalid_argument (exit 2).
std::optional<options> parse_flags(int argc, char** argv);

/// `status` and `dead-letters` (commands.cpp): the exit code, or nullopt
/// when argv names no command (flags to run). Throws as parse_flags does.
std::optional<int> run_command(int argc, char** argv);

}  // namespace steadfast::primary
