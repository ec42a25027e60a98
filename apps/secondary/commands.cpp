#include "commands.hpp"

#include "../common/options.hpp"
#include <common/log.hpp>
#include <common/sqlite.hpp>
#include <secondary/store.hpp>

#include <steadfast/replication/envelope.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace steadfast::secondary {

using app::level;

int dump(const std::string& dir) {
    // Read-only, beside a running server (WAL: it sees the last commit).
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    auto rows = db.prepare("SELECT stream, seq, id, payload FROM applied ORDER BY n");
    std::string line;
    while (rows.step()) {
        line.clear();
        envelope::encode_dump_line(line, rows.column_text(0), static_cast<std::uint64_t>(rows.column_int(1)),
                                   rows.column_text(2), rows.column_text(3));
        if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size()) {
            app::report_fatal("secondary", "dump_failed",
                              std::string("writing to standard output failed: ") + std::strerror(errno));
            return 1;
        }
    }
    if (std::fflush(stdout) != 0) {
        app::report_fatal("secondary", "dump_failed",
                          std::string("writing to standard output failed: ") + std::strerror(errno));
        return 1;
    }
    db.check_unchanged();
    return 0;
}

// `status --data DIR`: one JSON line, read-only (beside a running server, or
// on a read-only copy).
int status(const std::string& dir) {
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    nlohmann::json j{{"epoch_fence", 0}, {"last_seq", nlohmann::json::object()}, {"applied", 0}};
    {
        auto f = db.prepare("SELECT value FROM meta WHERE key='epoch_fence'");
        if (f.step()) j["epoch_fence"] = std::stoull(std::string(f.column_text(0)));
    }
    {
        auto s = db.prepare("SELECT stream, last_seq FROM streams ORDER BY stream");
        while (s.step()) j["last_seq"][std::string(s.column_text(0))] = s.column_int(1);
    }
    {
        auto c = db.prepare("SELECT count(*) FROM applied");
        if (c.step()) j["applied"] = c.column_int(0);
    }
    db.check_unchanged();
    std::cout << j.dump() << "\n";
    return 0;
}

// `set-fence --data DIR --epoch N`: the secondary stopped, sets its epoch
// fence (lowers one raised by mistake). Logged, with the value it replaced.
int set_fence(const std::string& dir, std::uint64_t epoch) {
    // Only a secondary's existing store (never a fresh one in a mistyped
    // directory, or an empty file made one): checked read-only first.
    (void)app::database(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    app::init_log("secondary", level::info);
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::full);  // takes the directory's lock
    store st(db);
    db.exec("BEGIN IMMEDIATE");
    std::uint64_t before = 0;
    try {
        before = st.fence();
        st.set_fence(epoch);
        db.exec("COMMIT");
    } catch (...) {
        db.exec("ROLLBACK");
        throw;
    }
    app::log(level::warn, "fence_set",
             {{"data", db.path()},
              {"from", before},
              {"to", epoch},
              {"note", "a primary with an epoch below the new fence is refused (409 stale_epoch)"}});
    return 0;
}

}  // namespace steadfast::secondary
