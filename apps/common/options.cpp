#include "options.hpp"

#include <steadfast/engine/backoff.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

namespace po = boost::program_options;

namespace steadfast::app {

void add_common_options(po::options_description& d) {
    d.add_options()
        ("config", po::value<std::string>(), "a file of `flag = value` lines (`#` comments); the command line and STEADFAST_* variables win over it")
        ("log-level", po::value<std::string>()->default_value("info"), "debug, info, warn or error: the least severe line written")
        ("version", "print the version and exit")
        ("help", "this help");
}

namespace {
// STEADFAST_MAX_BACKOFF -> max-backoff
std::string flag_of(const std::string& var) {
    std::string f = var.substr(std::string_view("STEADFAST_").size());
    for (auto& c : f) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return f;
}
}  // namespace

void read_options(int argc, char** argv, const po::options_description& d, po::variables_map& vm) {
    po::store(po::parse_command_line(argc, argv, d), vm);
    // Only flags that carry a value can come from the environment or a file.
    std::set<std::string> known;
    for (const auto& o : d.options())
        if (o->long_name() != "help" && o->long_name() != "version") known.insert(o->long_name());
    std::string unknown;
    auto from_env = po::parse_environment(d, [&](const std::string& var) -> std::string {
        if (var.rfind("STEADFAST_", 0) != 0) return {};
        const std::string f = flag_of(var);
        if (known.count(f)) return f;
        if (unknown.empty()) unknown = var;
        return {};
    });
    if (!unknown.empty())
        throw po::error("environment variable " + unknown + " is not a setting (" + flag_of(unknown) +
                        " is not a flag of this program)");
    po::store(from_env, vm);
    if (vm.count("config")) {
        const auto path = vm["config"].as<std::string>();
        std::ifstream in(path);
        if (!in) throw po::error("--config: cannot read \"" + path + "\"");
        try {
            po::store(po::parse_config_file(in, d, false), vm);
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

std::chrono::milliseconds duration_option(const po::variables_map& vm, const std::string& name,
                                          const std::string& legacy_ms_name, std::chrono::milliseconds min) {
    const bool given = vm.count(name) && !vm[name].defaulted();
    const bool legacy = !legacy_ms_name.empty() && vm.count(legacy_ms_name) && !vm[legacy_ms_name].defaulted();
    if (given && legacy) throw std::invalid_argument("--" + name + " and --" + legacy_ms_name + " both given: keep --" + name);
    std::chrono::milliseconds v{};
    if (legacy) {
        const long long ms = vm[legacy_ms_name].as<long long>();
        if (ms < 0) throw std::invalid_argument("--" + legacy_ms_name + " must not be negative");
        v = std::chrono::milliseconds(ms);
    } else {
        const std::string text = vm[name].as<std::string>();
        try {
            v = std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration(text));
        } catch (const std::exception& e) {
            throw std::invalid_argument("--" + name + ": " + e.what());
        }
    }
    if (v < min)
        throw std::invalid_argument("--" + (legacy ? legacy_ms_name : name) + " must be at least " +
                                    std::to_string(min.count()) + "ms");
    return v;
}

void add_tls_server_options(po::options_description& d) {
    d.add_options()
        ("tls-cert", po::value<std::string>(), "serve HTTPS: certificate chain (PEM)")
        ("tls-key", po::value<std::string>(), "serve HTTPS: private key of --tls-cert (PEM)")
        ("tls-client-ca", po::value<std::string>(), "with --tls-cert: require client certificates signed by this CA (mutual TLS)");
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

void add_tls_client_options(po::options_description& d) {
    d.add_options()
        ("tls-ca", po::value<std::string>(), "for an https:// peer: CA certificates to trust (PEM; default: the system's)")
        ("tls-client-cert", po::value<std::string>(), "for an https:// peer: present this certificate (mutual TLS)")
        ("tls-client-key", po::value<std::string>(), "the private key of --tls-client-cert (PEM)")
        ("tls-server-name", po::value<std::string>(), "for an https:// peer: the name its certificate must carry (default: the URL's host)");
}

std::optional<http::tls_client_options> tls_client_from(const po::variables_map& vm, const std::string& url,
                                                        const std::string& url_flag) {
    http::tls_client_options t{flag_value(vm, "tls-ca"), flag_value(vm, "tls-client-cert"), flag_value(vm, "tls-client-key"),
                               flag_value(vm, "tls-server-name")};
    const bool any = !t.ca_file.empty() || !t.cert_file.empty() || !t.key_file.empty() || !t.server_name.empty();
    if (url.rfind("https://", 0) != 0) {
        if (any)
            throw std::invalid_argument("--tls-ca, --tls-client-cert, --tls-client-key and --tls-server-name are for an https:// " +
                                        url_flag + "; it is " + url);
        return std::nullopt;
    }
    if (t.cert_file.empty() != t.key_file.empty())
        throw std::invalid_argument("--tls-client-cert and --tls-client-key go together");
    http::check_tls(t);
    return t;
}

void report_fatal(std::string_view app, std::string_view event, const std::string& text) {
    init_log(app);
    log(level::error, event, {{"error", text}});
}

}  // namespace steadfast::app
