// steadfast-primary's flags (and their config file and STEADFAST_*
// variables: app::read_options): what they mean, and every check that can
// refuse them before anything starts (exit 2); then the log is set up and the
// token file read.
#include "flags.hpp"

#include "../common/options.hpp"
#include <common/names.hpp>
#include <common/sqlite.hpp>
#include <common/token.hpp>
#include <primary/ladder.hpp>

#include <steadfast/engine.hpp>
#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/version.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <optional>

namespace po = boost::program_options;
using steadfast::app::level;

namespace steadfast::primary {

namespace {
constexpr const char* exit_codes_help =
    "exit codes: 0 stopped or drained; 1 runtime error (storage failed, data directory in use,\n"
    "            streams left blocked with --exit-when-drained); 2 bad flags or\n"
    "            configuration (the listen address in use); 3 demoted\n"
    "            (a secondary has seen a newer --epoch: another primary took over)\n";

// Refuses a --secondary that names this primary's own --listen (a copied
// line): every send would reach the primary itself. Only what is sure by
// the addresses alone: the same address and port; a loopback secondary
// against a listener on every address of its family (:: also takes IPv4,
// the socket being dual-stack); localhost against 127.0.0.1 or ::1. A name
// that resolves here is found at the first send (link_error, http_404).
void refuse_own_address(const std::string& url, const http::client::options& secondary, const std::string& listen_host,
                        std::uint16_t listen_port) {
    unsigned long port = 0;
    const auto& p = secondary.port;
    if (std::from_chars(p.data(), p.data() + p.size(), port).ptr != p.data() + p.size() || port != listen_port) return;
    namespace ip = boost::asio::ip;
    // (Both hosts come without brackets: from_url's host_address() and
    // parse_listen_address drop them.)
    auto address_of = [](const std::string& h) -> std::optional<ip::address> {
        boost::system::error_code ec;
        auto a = ip::make_address(h, ec);
        if (ec) return std::nullopt;
        if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::address(ip::make_address_v4(ip::v4_mapped, a.to_v6()));
        return a;
    };
    const bool s_localhost = boost::beast::iequals(secondary.host, "localhost");
    const auto s = address_of(secondary.host), l = address_of(listen_host);
    if (!l) return;  // (a listener takes addresses only)
    const bool l_exact_loopback =
        *l == ip::address(ip::address_v4::loopback()) || *l == ip::address(ip::address_v6::loopback());
    const bool same = (s && *s == *l) || (s_localhost && l_exact_loopback) ||
                      (l->is_unspecified() && (s_localhost || (s && s->is_loopback() && (l->is_v6() || s->is_v4()))));
    if (same)
        throw std::invalid_argument("--secondary " + url +
                                    " is this primary's own --listen address: give the secondary's address");
}
}  // namespace

std::optional<options> parse_flags(int argc, char** argv) {
    options o;
    std::string sync, retain = "1h";
    po::options_description d("steadfast-primary: replicates messages to a secondary, durably and in order");
    d.add_options()("secondary", po::value(&o.secondary)->required(), "the secondary, e.g. http://127.0.0.1:9001")(
        "data", po::value(&o.data)->required(), "data directory (created if missing; one process per directory)")(
        "listen", po::value(&o.listen), "HOST:PORT for /publish, /health, /metrics")(
        "token-file", po::value(&o.token_file),
        "bearer tokens, one a line: the first is sent to the secondary, any is accepted on /publish; SIGHUP "
        "reloads it")("stream", po::value(&o.stream)->default_value("default"),
                      "stream for --stdin and /publish without ?stream=")(
        "stdin", po::bool_switch(&o.from_stdin), "publish each line of standard input (one JSON value a line)")(
        "exit-when-drained", po::bool_switch(&o.exit_when_drained),
        "exit 0 once input is closed and everything is acknowledged")(
        "sync", po::value(&sync)->default_value("full"), "full: fsync before acknowledging; off: for benchmarks")(
        "epoch", po::value(&o.epoch)->default_value(0),
        "this primary's term; a secondary that saw a newer one fences it")(
        "connections", po::value(&o.connections)->default_value(8),
        "keep-alive connections to the secondary (streams deliver concurrently over them)")(
        "batch-max", po::value(&o.batch_max)->default_value(4000), "messages per request at most (and --batch-bytes)")(
        "batch-bytes", po::value(&o.batch_bytes)->default_value(512 * 1024),
        "request body bytes at most (a bigger message goes alone)")("quick-retries",
                                                                    po::value(&o.quick_retries)->default_value(5),
                                                                    "attempts before durable redelivery takes over")(
        "max-backoff", po::value<std::string>()->default_value("30s"), "cap of the quick retries' backoff, e.g. 30s")(
        "linger", po::value<std::string>()->default_value("2ms"),
        "while streams share requests to an http(s):// secondary, how long a request waits for more to join "
        "(0ms to 10ms; 0ms: at once; no effect with JetStream)")(
        "attempt-timeout", po::value<std::string>()->default_value("10s"),
        "per-attempt timeout (the HTTP read timeout), e.g. 10s")(
        "max-backoff-ms", po::value<std::string>(),
        "the same as --max-backoff, in milliseconds (kept for old scripts)")(
        "attempt-timeout-ms", po::value<std::string>(),
        "the same as --attempt-timeout, in milliseconds (kept for old scripts)")(
        "ladder", po::value(&o.ladder),
        "durable redelivery ladder: steps of at least 100ms (whole numbers with a unit: 500ms, 10s, 1m, 2h) "
        "separated by spaces or commas, e.g. \"10s 30s 1m\" (default: RocketMQ's 16 steps); the last step repeats")(
        "retain", po::value(&retain)->default_value("1h"),
        "keep acknowledged messages this long, to resend to a secondary restored from an older copy")(
        "max-streams", po::value(&o.max_streams)->default_value(10'000),
        "streams with pending messages at most; /publish to another one gets 429");
    app::add_listener_options(d);
    app::add_storage_options(d);
    po::options_description jsd("JetStream (a nats://HOST:PORT[,nats://HOST:PORT...] --secondary)");
    jsd.add_options()("js-stream", po::value(&o.js_stream)->default_value("steadfast"),
                      "the JetStream stream (created if missing)")(
        "js-replicas", po::value(&o.js_replicas)->default_value(1),
        "the stream's replicas when it is created (1 to 5; 3 for a 3-node cluster)")(
        "js-prefix", po::value(&o.js_prefix),
        "subject prefix: stream S goes to PREFIX.S (default: the --js-stream name)");
    app::add_nats_options(jsd);
    d.add(jsd);
    po::options_description tls("TLS (an https:// --secondary; HTTPS on --listen with --tls-listen)");
    app::add_tls_primary_options(tls);
    d.add(tls);
    app::add_common_options(d);
    po::variables_map vm;
    app::read_options(argc, argv, d, vm,
                      {{"max-backoff-ms", "max-backoff"}, {"attempt-timeout-ms", "attempt-timeout"}});
    if (vm.count("version")) {
        std::cout << "steadfast-primary " << steadfast::version << "\n";
        return std::nullopt;
    }
    if (vm.count("help")) {
        std::cout << "usage: steadfast-primary --secondary URL --data DIR [options]\n"
                     "       steadfast-primary status --data DIR        (one JSON line)\n"
                     "       steadfast-primary dead-letters --data DIR  (one JSON line each)\n\n"
                  << d << "\n"
                  << exit_codes_help;
        return std::nullopt;
    }
    po::notify(vm);
    if (vm.count("token-file") && o.token_file.empty())
        throw std::invalid_argument("--token-file is empty: give a file, or leave the flag out to run without tokens");
    o.fsync = app::parse_sync(sync) == app::sync_mode::full;
    if (o.batch_max == 0 || o.batch_max > steadfast::envelope::limits{}.max_batch)
        throw std::invalid_argument("--batch-max must be 1 to " +
                                    std::to_string(steadfast::envelope::limits{}.max_batch) +
                                    " (a secondary takes at most that many messages a request)");
    if (o.batch_bytes < 1024) throw std::invalid_argument("--batch-bytes must be at least 1024");
    if (o.quick_retries == 0) throw std::invalid_argument("--quick-retries must be at least 1");
    if (o.connections == 0 || o.connections > 1024) throw std::invalid_argument("--connections must be 1 to 1024");
    if (o.max_streams == 0) throw std::invalid_argument("--max-streams must be at least 1");
    o.max_backoff = app::duration_option(vm, "max-backoff", std::chrono::milliseconds(100), std::chrono::hours(24));
    o.linger = app::duration_option(vm, "linger", std::chrono::milliseconds(0), std::chrono::milliseconds(10));
    o.attempt_timeout =
        app::duration_option(vm, "attempt-timeout", std::chrono::milliseconds(10), std::chrono::hours(1));
    o.data = app::non_empty(vm, "data");
    o.secondary = app::non_empty(vm, "secondary");
    app::listener_from(vm, o.listener);
    // The largest message a publish may carry (the request body's limit).
    o.min_free_bytes = app::min_free_space_from(vm, envelope::limits{}.max_body_bytes);
    if (vm.count("listen")) o.listen = app::non_empty(vm, "listen");
    const auto log_level = app::parse_level(vm["log-level"].as<std::string>());
    o.retain = std::chrono::duration_cast<std::chrono::milliseconds>(app::parse_duration_flag("retain", retain));
    if (vm.count("ladder"))
        if (auto why = ladder_problem(o.ladder)) throw std::invalid_argument("--ladder: " + *why);
    if (!envelope::valid_stream_name(o.stream))
        throw std::invalid_argument("--stream must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
    if (o.jetstream()) {
        (void)jetstream::parse_servers(o.secondary);
        if (!app::valid_nats_name(o.js_stream))
            throw std::invalid_argument("--js-stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        if (o.js_prefix.empty()) o.js_prefix = o.js_stream;
        if (!app::valid_nats_name(o.js_prefix))
            throw std::invalid_argument("--js-prefix must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        if (o.js_replicas < 1 || o.js_replicas > 5) throw std::invalid_argument("--js-replicas must be 1 to 5");
        if (!valid_subject_tokens(o.stream))
            throw std::invalid_argument(
                "--stream must not begin or end with a dot or hold two in a row over JetStream");
        o.nats = app::nats_security_from(vm, true);
    } else {
        (void)app::nats_security_from(vm, false);  // refuses the --nats-* flags
        if (!vm["js-stream"].defaulted() || vm.count("js-prefix") || !vm["js-replicas"].defaulted())
            throw std::invalid_argument("--js-stream, --js-replicas and --js-prefix are for a nats:// --secondary");
        (void)http::client::from_url(o.secondary);
    }
    o.secondary_tls = app::tls_client_from(vm, o.secondary);  // refuses TLS flags for a nats:// one
    if (vm["tls-listen"].as<bool>()) {
        o.listen_tls = app::tls_server_from(vm);
        if (!o.listen_tls) throw std::invalid_argument("--tls-listen serves --tls-cert/--tls-key: give them");
        if (o.listen.empty()) throw std::invalid_argument("--tls-listen serves HTTPS on --listen: give --listen too");
    } else {
        if (vm.count("tls-client-ca"))
            throw std::invalid_argument("--tls-client-ca on the primary is for --tls-listen");
        if ((vm.count("tls-cert") || vm.count("tls-key")) && !o.secondary_tls)
            throw std::invalid_argument(
                "--tls-cert/--tls-key are the primary's certificate for an https:// --secondary "
                "or for --tls-listen; neither is set");
    }
    if (!o.listen.empty()) {
        const auto [lhost, lport] = http::parse_listen_address(o.listen);
        if (!o.jetstream()) refuse_own_address(o.secondary, http::client::from_url(o.secondary), lhost, lport);
    }
    app::init_log("primary", log_level);
    if (o.listen_tls)
        app::warn_invalid_certificate(o.listen_tls->cert_file, "--tls-cert (served on --listen)");
    else if (o.secondary_tls)
        app::warn_invalid_certificate(o.secondary_tls->cert_file, "--tls-cert (shown to the secondary)");
    if (!o.from_stdin && o.listen.empty() && !o.exit_when_drained)
        app::log(level::warn, "no_input",
                 {{"hint", "without --stdin or --listen only the existing outbox is delivered"}});
    // A bad token file is refused before the data directory is touched.
    if (!o.token_file.empty()) o.tokens = app::read_token_file(o.token_file);
    return o;
}

}  // namespace steadfast::primary
