// steadfast-primary's commands other than running: `status` and
// `dead-letters` read a data directory (beside a running primary: read-only),
// `dead-letters --requeue N` writes one (the primary stopped).
#include "../common/options.hpp"
#include "flags.hpp"
#include <primary/outbox.hpp>

#include <steadfast/replication/envelope.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

namespace po = boost::program_options;

namespace steadfast::primary {

namespace {

int status(const std::string& dir) {
    app::database db(dir, "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    outbox out(db);
    // One read transaction: a consistent snapshot. The streams' acknowledged
    // seqs and the count of what is above them are two statements; between
    // them the running primary could acknowledge more (pending then counted
    // against an older acked_seq: a CI run saw 65 for 67).
    db.exec("BEGIN");
    auto st = out.status();
    nlohmann::json j = {
        {"pending", 0}, {"acked_seq", nlohmann::json::object()}, {"next_seq", nlohmann::json::object()}};
    std::uint64_t pending = 0;
    for (auto& [s, v] : st) {
        pending += v.pending;
        j["acked_seq"][s] = v.acked_seq;
        j["next_seq"][s] = v.next_seq;
    }
    j["pending"] = pending;
    j["dead_letter"] = out.dead_letter_count();
    j["blocked"] = out.blocked();
    db.exec("COMMIT");
    db.check_unchanged();
    std::cout << j.dump() << "\n";
    return 0;
}

int dead_letters(const std::string& dir) {
    app::database db(dir, "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    outbox out(db);
    // A page at a time: memory stays bounded however many there are. No
    // read transaction around the pages: held while a slow reader (less)
    // takes the lines, it would stop a running primary's WAL checkpoints.
    // Dead letters are never deleted and n only grows: paging by n misses
    // none.
    dead_letter_page page;
    std::int64_t after = 0;
    do {
        page = out.dead_letters(after, 1000, std::size_t{8} << 20);
        for (const auto& d : page.rows) std::cout << to_json(d) << "\n";
        if (!page.rows.empty()) after = page.rows.back().n;
    } while (page.more);
    db.check_unchanged();
    return 0;
}

// `dead-letters --requeue N`: needs the data directory (the primary stopped);
// a running primary does the same on POST /dead-letters/requeue?n=N.
int requeue_dead_letter(const std::string& dir, std::int64_t n) {
    // Never a fresh database in a mistyped directory.
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "primary.db", ec))
        throw app::db_error("no database at \"" + (std::filesystem::path(dir) / "primary.db").string() + "\"");
    std::optional<app::database> db;
    try {
        db.emplace(dir, "primary.db", "steadfast-primary", app::sync_mode::full);
    } catch (const app::db_error& e) {
        throw app::db_error(std::string(e.what()) +
                            "; a running primary requeues with POST /dead-letters/requeue?n=N on its --listen");
    }
    outbox out(*db);
    db->exec("BEGIN IMMEDIATE");
    requeue_result r;
    try {
        r = out.requeue(n, now_ms());
        db->exec("COMMIT");
    } catch (...) {
        db->exec("ROLLBACK");
        throw;
    }
    switch (r.what) {
        case requeue_result::status::requeued:
            std::cout << envelope::encode_requeued(n, r.p.id, r.p.stream, r.p.seq) << "\n";
            return exit_ok;
        case requeue_result::status::not_found:
            app::report_fatal("primary", "requeue_refused", "no dead letter " + std::to_string(n));
            return exit_error;
        case requeue_result::status::already:
            app::report_fatal("primary", "requeue_refused",
                              "dead letter " + std::to_string(n) + " was requeued already, as seq " +
                                  std::to_string(r.p.seq) + " of stream " + r.p.stream);
            return exit_error;
    }
    return exit_error;
}

// `steadfast-primary status|dead-letters --data DIR`: read-only, beside a running server.
int read_only_command(int argc, char** argv, const std::string& name, int (*fn)(const std::string&)) {
    const auto data = app::data_command(argc, argv, "steadfast-primary", name, "data directory");
    return data ? fn(*data) : 0;
}

}  // namespace

std::optional<int> run_command(int argc, char** argv) {
    if (argc >= 2 && argv[1][0] != '-' && std::string_view(argv[1]) != "status" &&
        std::string_view(argv[1]) != "dead-letters")
        throw po::error(std::string("unknown command \"") + argv[1] +
                        "\" (commands: status, dead-letters; or flags to run)");
    if (argc >= 2 && std::string_view(argv[1]) == "status") return read_only_command(argc, argv, "status", status);
    if (argc >= 2 && std::string_view(argv[1]) == "dead-letters") {
        std::string data;
        std::int64_t requeue = 0;
        po::options_description d("steadfast-primary dead-letters");
        d.add_options()("data", po::value(&data)->required(), "data directory")(
            "requeue", po::value(&requeue),
            "publish dead letter N again at the end of its stream (the primary stopped)")("help", "this help");
        po::variables_map vm;
        po::store(app::parse_command_line(argc - 1, argv + 1, d), vm);
        if (vm.count("help")) {
            std::cout << "usage: steadfast-primary dead-letters --data DIR [--requeue N]\n"
                         "  lists dead letters, one JSON line each; --requeue N publishes N's payload again as a\n"
                         "  new message at the end of its stream (once). A running primary does the same on\n"
                         "  GET /dead-letters and POST /dead-letters/requeue?n=N.\n"
                      << d;
            return 0;
        }
        po::notify(vm);
        if (vm.count("requeue")) {
            if (requeue <= 0) throw std::invalid_argument("--requeue takes a dead letter's n (1 or more)");
            return requeue_dead_letter(data, requeue);
        }
        return dead_letters(data);
    }
    return std::nullopt;
}

}  // namespace steadfast::primary
