#include "options.hpp"

#include <common/engine_reason.hpp>

#include <steadfast/engine/backoff.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

namespace po = boost::program_options;

namespace steadfast::app {

void add_common_options(po::options_description& d) {
    d.add_options()(
        "config", po::value<std::string>(),
        "a file of `flag = value` lines (`#` comments); the command line and STEADFAST_* variables win over it")(
        "log-level", po::value<std::string>()->default_value("info"),
        "debug, info, warn (the lines say warning) or error: the least severe line written")(
        "version", "print the version and exit")("help", "this help");
}

namespace {
// STEADFAST_MAX_BACKOFF -> max-backoff
std::string flag_of(const std::string& var) {
    std::string f = var.substr(std::string_view("STEADFAST_").size());
    for (auto& c : f) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return f;
}

// Program_options reads "-1" into an unsigned flag as its largest value
// (--epoch -1 would fence every future primary): refuse it by name.
template <class T>
bool is_unsigned_flag(const po::value_semantic* s) {
    return dynamic_cast<const po::typed_value<T>*>(s) != nullptr;
}
void refuse_negative_counts(const po::parsed_options& parsed, const po::options_description& d, const char* where) {
    for (const auto& o : parsed.options) {
        const auto* desc = d.find_nothrow(o.string_key, false);
        if (!desc) continue;
        const auto* s = desc->semantic().get();
        if (!(is_unsigned_flag<unsigned>(s) || is_unsigned_flag<unsigned long>(s) ||
              is_unsigned_flag<unsigned long long>(s) || is_unsigned_flag<unsigned short>(s)))
            continue;
        for (const auto& v : o.value) {
            const auto first = v.find_first_not_of(" \t");
            if (first != std::string::npos && v[first] == '-')
                throw po::error("--" + o.string_key + " must not be negative, got \"" + v + "\"" + where);
        }
    }
}

// Reads a legacy milliseconds flag as its twin: max-backoff-ms 500 -> max-backoff 500ms.
// Both spellings in one source are refused by name (not as one flag "specified
// more than once").
void rename_legacy(po::parsed_options& parsed, const legacy_ms_flags& legacy) {
    for (const auto& [old_name, twin] : legacy) {
        bool has_old = false, has_twin = false;
        for (const auto& o : parsed.options) {
            has_old = has_old || o.string_key == old_name;
            has_twin = has_twin || o.string_key == twin;
        }
        if (has_old && has_twin)
            throw po::error("--" + old_name + " and --" + twin + " are two spellings of one setting (--" + old_name +
                            " in milliseconds): give one of them");
    }
    for (auto& o : parsed.options) {
        auto it = legacy.find(o.string_key);
        if (it == legacy.end()) continue;
        for (auto& v : o.value) {
            if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
                throw po::error("--" + o.string_key + " takes milliseconds (a whole number), got \"" + v + "\"");
            v += "ms";
        }
        o.string_key = it->second;
    }
}
}  // namespace

po::parsed_options parse_command_line(int argc, char** argv, const po::options_description& d) {
    auto parsed = po::command_line_parser(argc, argv).options(d).run();
    for (const auto& o : parsed.options)
        if (o.string_key.empty() || o.position_key >= 0) {
            const std::string word = o.original_tokens.empty() ? std::string() : o.original_tokens.front();
            throw po::error("unexpected argument \"" + word + "\" (flags take the form --name value)");
        }
    return parsed;
}

std::optional<std::string> data_command(int argc, char** argv, const std::string& binary, const std::string& command,
                                        const char* data_help) {
    std::string data;
    po::options_description d(binary + " " + command);
    d.add_options()("data", po::value(&data)->required(), data_help)("help", "this help");
    po::variables_map vm;
    po::store(parse_command_line(argc - 1, argv + 1, d), vm);
    if (vm.count("help")) {
        std::cout << "usage: " << binary << " " << command << " --data DIR\n" << d;
        return std::nullopt;
    }
    po::notify(vm);
    return data;
}

void read_options(int argc, char** argv, const po::options_description& d, po::variables_map& vm,
                  const legacy_ms_flags& legacy) {
    // What the environment and files may set: every flag that carries a
    // value but help, version and config.
    po::options_description settable;
    std::set<std::string> known;
    for (const auto& o : d.options()) {
        const auto& n = o->long_name();
        if (n == "help" || n == "version" || n == "config") continue;
        settable.add(o);
        known.insert(n);
    }
    auto cmd = parse_command_line(argc, argv, d);
    refuse_negative_counts(cmd, d, "");
    rename_legacy(cmd, legacy);
    po::store(cmd, vm);

    std::string unknown;
    auto from_env = po::parse_environment(d, [&](const std::string& var) -> std::string {
        if (var.rfind("STEADFAST_", 0) != 0) return {};
        const std::string f = flag_of(var);
        if (known.count(f) || f == "config") return f;
        if (unknown.empty()) unknown = var;
        return {};
    });
    if (!unknown.empty())
        throw po::error("environment variable " + unknown + " is not a setting (" + flag_of(unknown) +
                        " is not a flag of this program)");
    refuse_negative_counts(from_env, d, " (from the environment)");
    rename_legacy(from_env, legacy);
    po::store(from_env, vm);

    if (vm.count("config")) {
        const auto path = vm["config"].as<std::string>();
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec))
            throw po::error("--config \"" + path + "\" is a directory, not a file");
        std::ifstream in(path);
        if (!in) throw po::error("--config: cannot read \"" + path + "\"");
        try {
            auto from_file = po::parse_config_file(in, settable, false);
            refuse_negative_counts(from_file, d, "");
            rename_legacy(from_file, legacy);
            po::store(from_file, vm);
        } catch (const po::error& e) {
            throw po::error("--config \"" + path + "\": " + e.what());
        }
    }
}

level parse_level(const std::string& text) {
    if (text == "debug") return level::debug;
    if (text == "info") return level::info;
    if (text == "warn" || text == "warning") return level::warn;
    if (text == "error") return level::error;
    throw std::invalid_argument("--log-level must be debug, info, warn or error, not \"" + text + "\"");
}

std::chrono::nanoseconds parse_duration_flag(const std::string& name, const std::string& text) {
    try {
        return parse_duration(text);
    } catch (const std::exception& e) {
        throw std::invalid_argument("--" + name + ": " + engine_reason(e));
    }
}

std::chrono::milliseconds duration_option(const po::variables_map& vm, const std::string& name,
                                          std::chrono::milliseconds min, std::chrono::milliseconds max) {
    const std::string text = vm[name].as<std::string>();
    const auto v = std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration_flag(name, text));
    auto show = [](std::chrono::milliseconds d) {
        return d.count() != 0 && d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                                                       : std::to_string(d.count()) + "ms";
    };
    if (v < min || v > max)
        throw std::invalid_argument("--" + name + " must be from " + show(min) + " to " + show(max) + ", got \"" +
                                    text + "\"");
    return v;
}

std::string non_empty(const po::variables_map& vm, const std::string& name) {
    const std::string v = vm[name].as<std::string>();
    if (v.empty()) throw std::invalid_argument("--" + name + " is empty");
    return v;
}

void add_tls_server_options(po::options_description& d) {
    d.add_options()("tls-cert", po::value<std::string>(), "serve HTTPS: certificate chain (PEM)")(
        "tls-key", po::value<std::string>(), "serve HTTPS: private key of --tls-cert (PEM)")(
        "tls-client-ca", po::value<std::string>(),
        "with --tls-cert: require client certificates signed by this CA (mutual TLS)");
}

void add_tls_primary_options(po::options_description& d) {
    d.add_options()("tls-ca", po::value<std::string>(),
                    "for an https:// --secondary: CA certificates to trust (PEM; default: the system's)")(
        "tls-server-name", po::value<std::string>(),
        "for an https:// --secondary: the name its certificate must carry (default: the URL's host)")(
        "tls-cert", po::value<std::string>(),
        "this primary's certificate (PEM): presented to a secondary that asks for one; served on --listen with "
        "--tls-listen")("tls-key", po::value<std::string>(), "the private key of --tls-cert (PEM)")(
        "tls-listen", po::bool_switch(), "serve HTTPS on --listen with --tls-cert/--tls-key")(
        "tls-client-ca", po::value<std::string>(),
        "with --tls-listen: require publishers' certificates signed by this CA");
}

namespace {
std::string flag_value(const po::variables_map& vm, const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string{};
}
}  // namespace

std::optional<http::tls_server_options> tls_server_from(const po::variables_map& vm) {
    http::tls_server_options t{flag_value(vm, "tls-cert"), flag_value(vm, "tls-key"), flag_value(vm, "tls-client-ca")};
    if (t.cert_file.empty() && t.key_file.empty() && t.client_ca_file.empty()) return std::nullopt;
    if (t.cert_file.empty() || t.key_file.empty())
        throw std::invalid_argument("--tls-cert and --tls-key go together (and --tls-client-ca needs them)");
    http::check_tls(t);
    return t;
}

std::optional<http::tls_client_options> tls_client_from(const po::variables_map& vm, const std::string& url) {
    http::tls_client_options t{flag_value(vm, "tls-ca"), flag_value(vm, "tls-cert"), flag_value(vm, "tls-key"),
                               flag_value(vm, "tls-server-name")};
    if (url.rfind("https://", 0) != 0 && url.rfind("HTTPS://", 0) != 0) {
        if (!t.ca_file.empty() || !t.server_name.empty())
            throw std::invalid_argument("--tls-ca and --tls-server-name are for an https:// --secondary; it is " + url);
        return std::nullopt;
    }
    if (t.cert_file.empty() != t.key_file.empty()) throw std::invalid_argument("--tls-cert and --tls-key go together");
    http::check_tls(t);
    return t;
}

void add_nats_options(po::options_description& d) {
    d.add_options()("nats-tls", po::bool_switch(), "TLS to the NATS servers (also set by tls:// URLs)")(
        "nats-ca", po::value<std::string>(),
        "the CA that signed the NATS servers' certificates (PEM; else the system's)")(
        "nats-cert", po::value<std::string>(),
        "this process's certificate, for NATS servers that verify clients (PEM)")(
        "nats-key", po::value<std::string>(), "the private key of --nats-cert (PEM)")(
        "nats-server-name", po::value<std::string>(),
        "the name the NATS servers' certificates must carry (else the URL's host)")(
        "nats-user", po::value<std::string>(), "the NATS user (with --nats-password-file)")(
        "nats-password-file", po::value<std::string>(), "a file holding --nats-user's password (its first line)")(
        "nats-token-file", po::value<std::string>(), "a file holding the NATS token (its first line)")(
        "nats-creds", po::value<std::string>(), "a NATS .creds file (a user JWT and its nkey seed)");
}

namespace {
// A secret's file: its first line, without surrounding blanks; not empty.
std::string read_secret(const std::string& path, const char* flag) {
    std::ifstream f(path);
    if (!f)
        throw std::invalid_argument(std::string("cannot read ") + flag + " \"" + path + "\": " + std::strerror(errno));
    std::string line;
    std::getline(f, line);
    if (line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 BOM
    const auto b = line.find_first_not_of(" \t\r");
    const auto e = line.find_last_not_of(" \t\r");
    line = b == std::string::npos ? std::string{} : line.substr(b, e - b + 1);
    if (line.empty()) throw std::invalid_argument(std::string(flag) + " \"" + path + "\": its first line is empty");
    return line;
}
}  // namespace

jetstream::security nats_security_from(const po::variables_map& vm, bool nats) {
    static constexpr const char* flags[] = {"nats-ca",   "nats-cert",          "nats-key",        "nats-server-name",
                                            "nats-user", "nats-password-file", "nats-token-file", "nats-creds"};
    if (!nats) {
        for (const char* f : flags)
            if (vm.count(f))
                throw std::invalid_argument(std::string("--") + f + " is for NATS servers (a nats:// or tls:// URL)");
        if (vm.count("nats-tls") && vm["nats-tls"].as<bool>())
            throw std::invalid_argument("--nats-tls is for NATS servers (a nats:// or tls:// URL)");
        return {};
    }
    jetstream::security s;
    s.tls = vm.count("nats-tls") && vm["nats-tls"].as<bool>();
    s.ca_file = flag_value(vm, "nats-ca");
    s.cert_file = flag_value(vm, "nats-cert");
    s.key_file = flag_value(vm, "nats-key");
    s.server_name = flag_value(vm, "nats-server-name");
    s.user = flag_value(vm, "nats-user");
    s.creds_file = flag_value(vm, "nats-creds");
    if (vm.count("nats-password-file")) {
        if (s.user.empty())
            throw std::invalid_argument("--nats-password-file is --nats-user's password: give --nats-user");
        s.password = read_secret(vm["nats-password-file"].as<std::string>(), "--nats-password-file");
    } else if (!s.user.empty()) {
        throw std::invalid_argument("--nats-user needs --nats-password-file");
    }
    if (vm.count("nats-token-file"))
        s.token = read_secret(vm["nats-token-file"].as<std::string>(), "--nats-token-file");
    jetstream::check_security(s);  // readable files, one kind of credential
    return s;
}

void add_listener_options(po::options_description& d) {
    d.add_options()("max-connections", po::value<std::size_t>()->default_value(256),
                    "connections to --listen open at once (1 or more); more are closed at once, but for the reserve")(
        "reserved-connections", po::value<std::size_t>()->default_value(8),
        "beyond --max-connections, this many more for /health, /ready and /metrics only (0: none)")(
        "header-timeout", po::value<std::string>()->default_value("5s"),
        "a new connection must send its first request's header within this, e.g. 5s");
}

void listener_from(const po::variables_map& vm, http::server::options& so) {
    so.max_connections = vm["max-connections"].as<std::size_t>();
    if (so.max_connections == 0 || so.max_connections > 1'000'000)
        throw std::invalid_argument("--max-connections must be 1 to 1000000");
    so.reserved_connections = vm["reserved-connections"].as<std::size_t>();
    if (so.reserved_connections > 1000) throw std::invalid_argument("--reserved-connections must be 0 to 1000");
    // At most the read timeout, which bounds any request's reading (10 s).
    so.header_timeout = duration_option(vm, "header-timeout", std::chrono::milliseconds(100),
                                        std::chrono::duration_cast<std::chrono::milliseconds>(so.read_timeout));
}

void add_storage_options(po::options_description& d) {
    d.add_options()("min-free-space", po::value<std::string>(),
                    "below this much free space on the data directory's filesystem: not ready, "
                    "and writes refused before they fail (e.g. 64MiB; 0: off; default: 64MiB, "
                    "or 4 times the largest message if more)");
}

std::uint64_t parse_size(const std::string& text) {
    std::size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    const std::string unit = text.substr(i);
    static const std::pair<const char*, std::uint64_t> units[] = {
        {"", 1},      {"B", 1},     {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
        {"kB", 1000}, {"KB", 1000}, {"MB", 1000'000},    {"GB", 1000'000'000}};
    const std::pair<const char*, std::uint64_t>* u = nullptr;
    for (const auto& c : units)
        if (unit == c.first) u = &c;
    if (i == 0 || i > 15 || !u)
        throw std::invalid_argument("\"" + text +
                                    "\" is not a size: a whole number of bytes, or with KiB, MiB, GiB, TiB "
                                    "(or kB, MB, GB), e.g. 64MiB");
    const std::uint64_t n = std::stoull(text.substr(0, i));
    if (n > UINT64_MAX / u->second) throw std::invalid_argument("\"" + text + "\" is too large a size");
    return n * u->second;
}

std::uint64_t min_free_space_from(const po::variables_map& vm, std::uint64_t largest_message) {
    const std::uint64_t fallback = std::max<std::uint64_t>(64ull << 20, 4 * largest_message);
    if (!vm.count("min-free-space")) return fallback;
    std::uint64_t v = 0;
    try {
        v = parse_size(vm["min-free-space"].as<std::string>());
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--min-free-space: ") + e.what());
    }
    if (v != 0 && v < largest_message)
        throw std::invalid_argument("--min-free-space must be 0 (off) or at least the largest message (" +
                                    std::to_string(largest_message) +
                                    " bytes): below that not even one could be stored");
    return v;
}

void warn_invalid_certificate(const std::string& cert_file, std::string_view role) {
    if (cert_file.empty()) return;
    const auto problem = http::certificate_validity_problem(cert_file);
    if (problem.empty()) return;
    log(level::error, "tls_certificate_invalid",
        {{"certificate", cert_file},
         {"role", role},
         {"problem", problem},
         {"note",
          "peers that verify certificates refuse this one until it is replaced (SIGHUP does not reload it: restart)"}});
}

void report_fatal(std::string_view app, std::string_view event, const std::string& text) {
    init_log(app);
    log(level::error, event, {{"error", text}});
}

int daemon_main(std::string_view app, const std::function<int()>& body) {
    std::signal(SIGXFSZ, SIG_IGN);
    std::signal(SIGHUP, SIG_IGN);
    try {
        return body();
    } catch (const po::error& e) {
        report_fatal(app, "usage_error", std::string(e.what()) + " (see --help)");
        return 2;
    } catch (const std::invalid_argument& e) {
        report_fatal(app, "usage_error", e.what());
        return 2;
    } catch (const config_error& e) {
        report_fatal(app, "listen_failed", e.what());
        return 2;
    } catch (const std::exception& e) {
        report_fatal(app, "fatal", e.what());
        return 1;
    }
}

}  // namespace steadfast::app
