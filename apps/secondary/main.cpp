// steadfast-secondary: applies replicated messages exactly once, in order, per
// stream, durably (SQLite, committed before the answer). Contract:
// docs/contract.md. This file: the flags and the commands; serving is
// daemon.cpp over the library's service, the offline commands commands.cpp.
#include "../common/options.hpp"
#include "commands.hpp"
#include "daemon.hpp"
#include <common/log.hpp>
#include <common/names.hpp>

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/jetstream.hpp>
#include <steadfast/version.hpp>

#include <boost/program_options.hpp>

#include <csignal>
#include <iostream>
#include <string_view>

namespace po = boost::program_options;
using namespace steadfast;

int main(int argc, char** argv) {
    return app::daemon_main("secondary", [&]() -> int {
        const std::string_view command =
            argc >= 2 && argv[1][0] != '-' ? std::string_view(argv[1]) : std::string_view();
        if (!command.empty() && command != "dump" && command != "status" && command != "set-fence")
            throw po::error(std::string("unknown command \"") + argv[1] +
                            "\" (commands: dump, status, set-fence; or flags to serve)");
        if (command == "dump" || command == "status") {
            const auto data = app::data_command(argc, argv, "steadfast-secondary", std::string(command),
                                                "data directory (read-only access is enough)");
            if (!data) return 0;
            return command == "dump" ? secondary::dump(*data) : secondary::status(*data);
        }
        if (command == "set-fence") {
            po::options_description d("steadfast-secondary set-fence");
            std::string data;
            std::uint64_t epoch = 0;
            d.add_options()("data", po::value(&data)->required(), "data directory (the secondary stopped)")(
                "epoch", po::value(&epoch)->required(),
                "the new epoch fence: the epoch of the primary that is to deliver")("help", "this help");
            po::variables_map vm;
            auto parsed = app::parse_command_line(argc - 1, argv + 1, d);
            for (const auto& opt : parsed.options)
                if (opt.string_key == "epoch" && !opt.value.empty() &&
                    opt.value.front().find_first_not_of("0123456789") != std::string::npos)
                    throw po::error("--epoch takes a whole number, got \"" + opt.value.front() + "\"");
            po::store(parsed, vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-secondary set-fence --data DIR --epoch N\n"
                             "  sets the epoch fence (lowers one raised by mistake); the secondary must be stopped\n"
                          << d;
                return 0;
            }
            po::notify(vm);
            return secondary::set_fence(data, epoch);
        }
        secondary::options o;
        std::string sync = "full";
        po::options_description d("steadfast-secondary: applies replicated messages exactly once, in order");
        d.add_options()("listen", po::value(&o.listen),
                        "HOST:PORT to listen on, e.g. 127.0.0.1:9001 (required without --source)")(
            "data", po::value(&o.data)->required(), "data directory (created if missing)")(
            "token-file", po::value(&o.token_file),
            "bearer tokens to accept, one a line (any is accepted); SIGHUP reloads it")(
            "sync", po::value(&sync)->default_value("full"), "full: fsync before every answer; off: for benchmarks")(
            "fault-rate", po::value(&o.faults.fault_rate)->default_value(0),
            "share of requests answered --fault-status (0..1)")(
            "fault-status", po::value(&o.faults.fault_status)->default_value(503), "status of injected faults")(
            "drop-rate", po::value(&o.faults.drop_rate)->default_value(0),
            "share of requests whose connection is dropped (0..1)")(
            "delay", po::value<std::string>()->default_value("0s"),
            "wait this long before answering (for tests), e.g. 250ms")(
            "delay-ms", po::value<std::string>(), "the same as --delay, in milliseconds (kept for old scripts)")(
            "max-body", po::value(&o.max_body)->default_value(1 << 20), "largest request body in bytes (413 above)")(
            "max-epoch-step", po::value(&o.max_epoch_step)->default_value(1000),
            "refuse (400) an epoch more than this above the fence (a failover adds one)");
        app::add_listener_options(d);
        app::add_storage_options(d);
        po::options_description jsd("JetStream: consume the primary's stream (the primary has a nats:// --secondary)");
        jsd.add_options()("source", po::value(&o.source.servers),
                          "nats://HOST:PORT[,nats://HOST:PORT...]: consume from JetStream")(
            "js-stream", po::value(&o.source.stream)->default_value("steadfast"), "the primary's --js-stream")(
            "consumer", po::value(&o.source.consumer), "this secondary's durable consumer (one name per secondary)")(
            "js-batch", po::value(&o.source.batch)->default_value(1000),
            "JetStream messages fetched (and committed) at once at most");
        app::add_nats_options(jsd);
        d.add(jsd);
        po::options_description tls("TLS (HTTPS on --listen)");
        app::add_tls_server_options(tls);
        d.add(tls);
        app::add_common_options(d);
        po::variables_map vm;
        app::read_options(argc, argv, d, vm, {{"delay-ms", "delay"}});
        if (vm.count("version")) {
            std::cout << "steadfast-secondary " << steadfast::version << "\n";
            return 0;
        }
        if (vm.count("help")) {
            std::cout
                << "usage: steadfast-secondary --listen HOST:PORT --data DIR [options]\n"
                   "       steadfast-secondary --source nats://HOST:PORT --consumer NAME --data DIR [--listen "
                   "HOST:PORT] [options]\n"
                   "       steadfast-secondary dump --data DIR        (every applied message, one JSON line each)\n"
                   "       steadfast-secondary status --data DIR      (one JSON line: the fence, each stream's last "
                   "seq)\n"
                   "       steadfast-secondary set-fence --data DIR --epoch N   (stopped: lower a fence raised by "
                   "mistake)\n\n"
                << d << "\n"
                << "exit codes: 0 stopped (SIGTERM, SIGINT); 1 runtime error (storage failed, data directory in\n"
                   "            use, not a database of the secondary); 2 bad flags or configuration (the listen\n"
                   "            address in use)\n";
            return 0;
        }
        po::notify(vm);
        if (vm.count("token-file") && o.token_file.empty())
            throw std::invalid_argument(
                "--token-file is empty: give a file, or leave the flag out to run without tokens");
        o.sync = app::parse_sync(sync);
        if (!(o.faults.fault_rate >= 0 && o.faults.fault_rate <= 1))
            throw std::invalid_argument("--fault-rate must be between 0 and 1");
        if (!(o.faults.drop_rate >= 0 && o.faults.drop_rate <= 1))
            throw std::invalid_argument("--drop-rate must be between 0 and 1");
        if (o.faults.fault_status < 400 || o.faults.fault_status > 599)
            throw std::invalid_argument("--fault-status must be a 4xx or 5xx status");
        // (Above 64 MiB it would only hold memory: a primary's request is at
        // most 1 MiB. The default --min-free-space is 4 times it.)
        if (o.max_body < 1024 || o.max_body > (64u << 20))
            throw std::invalid_argument("--max-body must be from 1024 to 67108864 (64 MiB; a primary sends at most " +
                                        std::to_string(steadfast::envelope::limits{}.max_body_bytes) +
                                        " bytes a request)");
        if (o.max_epoch_step == 0) throw std::invalid_argument("--max-epoch-step must be at least 1");
        app::listener_from(vm, o.listener);
        o.min_free = app::min_free_space_from(vm, o.max_body);
        o.faults.delay = app::duration_option(vm, "delay", std::chrono::milliseconds(0), std::chrono::hours(1));
        o.data = app::non_empty(vm, "data");
        if (vm.count("source")) {
            (void)jetstream::parse_servers(o.source.servers);
            if (o.source.consumer.empty())
                throw std::invalid_argument("--source needs --consumer NAME (one durable consumer per secondary)");
            if (!app::valid_nats_name(o.source.consumer))
                throw std::invalid_argument("--consumer must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (!app::valid_nats_name(o.source.stream))
                throw std::invalid_argument("--js-stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (o.source.batch == 0 || o.source.batch > 10'000)
                throw std::invalid_argument("--js-batch must be 1 to 10000");
            o.source.security = app::nats_security_from(vm, true);
        } else {
            if (vm.count("consumer") || !vm["js-stream"].defaulted() || !vm["js-batch"].defaulted())
                throw std::invalid_argument("--consumer, --js-stream and --js-batch are for --source nats://...");
            (void)app::nats_security_from(vm, false);  // refuses the --nats-* flags
            if (!vm.count("listen"))
                throw std::invalid_argument("--listen is required (or --source nats://... to consume from JetStream)");
        }
        if (vm.count("listen")) o.listen = app::non_empty(vm, "listen");
        if (!o.listen.empty()) (void)http::parse_listen_address(o.listen);
        o.tls = app::tls_server_from(vm);
        o.log_level = app::parse_level(vm["log-level"].as<std::string>());
        app::init_log("secondary", o.log_level);
        return secondary::serve(o);
    });
}
