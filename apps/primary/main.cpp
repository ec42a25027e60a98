// steadfast-primary: accepts messages durably (outbox), replicates them to the
// secondary in order per stream, many streams at once, retried through the
// engine, gated by the secondary's health, stopped by shutdown or demotion;
// quick retries first, then durable redelivery on a ladder whose last step
// repeats. Contract: docs/contract.md. This file: the process (signals, exit
// codes); flags.cpp reads the flags, commands.cpp runs the offline commands,
// node.cpp runs the node.
#include "../common/options.hpp"
#include "node.hpp"

#include <boost/program_options.hpp>

#include <csignal>

namespace po = boost::program_options;

int main(int argc, char** argv) {
    using namespace steadfast;
    using namespace steadfast::primary;
    // A file-size limit (ulimit -f) must fail a write with EFBIG, which the
    // outbox reports, instead of killing the process.
    std::signal(SIGXFSZ, SIG_IGN);
    // SIGHUP reloads the token file while running; before and after that it
    // must not end the process either.
    std::signal(SIGHUP, SIG_IGN);
    try {
        if (auto code = run_command(argc, argv)) return *code;
        auto o = parse_flags(argc, argv);
        if (!o) return exit_ok;  // --help, --version
        app::database db(o->data, "primary.db", "steadfast-primary",
                         o->fsync ? app::sync_mode::full : app::sync_mode::off);
        node n(*o, db);
        return n.run();
    } catch (const po::error& e) {
        app::report_fatal("primary", "usage_error", std::string(e.what()) + " (see --help)");
        return exit_usage;
    } catch (const std::invalid_argument& e) {
        app::report_fatal("primary", "usage_error", e.what());
        return exit_usage;
    } catch (const app::config_error& e) {
        app::report_fatal("primary", "listen_failed", e.what());
        return exit_usage;
    } catch (const std::exception& e) {
        app::report_fatal("primary", "fatal", e.what());
        return exit_error;
    }
}
