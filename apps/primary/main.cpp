// steadfast-primary: accepts messages durably (outbox), replicates them to the
// secondary in order per stream, many streams at once, retried through the
// engine, gated by the secondary's health, stopped by shutdown or demotion;
// quick retries first, then durable redelivery on a ladder whose last step
// repeats. Contract: docs/contract.md. This file: the process (signals, exit
// codes); flags.cpp reads the flags, commands.cpp runs the offline commands,
// node.cpp runs the node.
#include "../common/options.hpp"
#include "node.hpp"

int main(int argc, char** argv) {
    using namespace steadfast;
    using namespace steadfast::primary;
    return app::daemon_main("primary", [&] {
        if (auto code = run_command(argc, argv)) return *code;
        auto o = parse_flags(argc, argv);
        if (!o) return int{exit_ok};  // --help, --version
        app::database db(o->data, "primary.db", "steadfast-primary",
                         o->fsync ? app::sync_mode::full : app::sync_mode::off);
        node n(*o, db);
        return n.run();
    });
}
