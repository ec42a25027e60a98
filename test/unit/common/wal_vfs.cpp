// The VFS that writes a commit's WAL frames at once (apps/common/wal_vfs.hpp),
// on real files: fewer writes, nothing lost or changed (also for a reader in
// another connection and after reopening), a write that fails (a file size
// limit, as a full disk) fails its commit without harming what was committed
// before or after, and frames undone by ROLLBACK TO are never written.
#include <common/sqlite.hpp>
#include <common/wal_vfs.hpp>

#include <boost/test/unit_test.hpp>

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <steadfast_test/scratch_dir.hpp>
#include <string>
#include <vector>

using namespace steadfast;

namespace {
struct fixture {
    test::scratch_dir scratch{"walvfs"};  // removed after the members below
    const std::filesystem::path dir = scratch.path;
    std::optional<app::database> db;
    fixture() {
        db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::full);
        db->exec(
            "CREATE TABLE t(k TEXT NOT NULL, n INTEGER NOT NULL, v TEXT NOT NULL, PRIMARY KEY(k, n)) WITHOUT ROWID");
    }
    // One transaction: `per` rows on each of `keys` keys, from n = `from`.
    void put(int keys, int from, int per, const std::string& v) {
        db->exec("BEGIN IMMEDIATE");
        auto ins = db->prepare("INSERT INTO t(k, n, v) VALUES(?,?,?)");
        for (int n = from; n < from + per; ++n)
            for (int k = 0; k < keys; ++k) {
                ins.reset();
                ins.bind(1, "key" + std::to_string(k)).bind(2, n).bind(3, v + std::to_string(n));
                ins.step();
            }
        db->exec("COMMIT");
    }
    // Rows and the total length of their values, read through `c`.
    static std::pair<std::int64_t, std::int64_t> count(app::database& c) {
        auto q = c.prepare("SELECT count(*), total(length(v)) FROM t");
        q.step();
        return {q.column_int(0), q.column_int(1)};
    }
    app::database reader() {
        return app::database(dir.string(), "t.db", "steadfast-test", app::sync_mode::full, app::open_mode::read_only);
    }
};

std::string filler(std::size_t n) {
    std::string s(n, 'x');
    for (std::size_t i = 0; i < n; i += 7) s[i] = static_cast<char>('a' + i % 26);
    return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(app_wal_vfs)

BOOST_FIXTURE_TEST_CASE(a_commit_over_many_pages_is_one_write, fixture) {
    put(16, 0, 1, "warm-up");  // the WAL's header and the tables' first pages
    const auto before = app::coalescing_wal_vfs_stats();
    // 16 keys, 4 rows each with 900-byte values (kept in the leaf pages, 4 to
    // a page): about 20 pages, each a frame header and a page written by
    // SQLite, 80 KiB that go to the file in one write (pieces are 124 KiB).
    put(16, 1, 4, filler(900));
    const auto after = app::coalescing_wal_vfs_stats();
    const auto asked = after.writes_asked - before.writes_asked;
    const auto issued = after.writes_issued - before.writes_issued;
    BOOST_TEST(asked >= 32u);
    BOOST_TEST(issued == 1u);
}

BOOST_FIXTURE_TEST_CASE(what_is_committed_is_read_back_by_other_connections_and_after_reopening, fixture) {
    // Values of every size, up to 9 MiB: a transaction larger than what is
    // gathered in memory (4 MiB) is written in parts before its commit.
    std::int64_t rows = 0, bytes = 0;
    int from = 0;
    for (std::size_t size : {0u, 10u, 3000u, 70'000u, 9'000'000u, 1u, 5000u}) {
        const int per = size > 1'000'000 ? 1 : 5;
        put(3, from, per, filler(size));
        for (int n = from; n < from + per; ++n) {
            rows += 3;
            bytes += 3 * static_cast<std::int64_t>(size + std::to_string(n).size());
        }
        from += per;
        // A reader in another connection through SQLite's own VFS, as status
        // and dump read beside a running server: everything committed.
        auto r = reader();
        BOOST_TEST(count(r).first == rows);
        BOOST_TEST(count(r).second == bytes);
    }
    db.reset();
    db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::full);  // quick_check on open
    BOOST_TEST(count(*db).first == rows);
    BOOST_TEST(count(*db).second == bytes);
    auto q = db->prepare("SELECT v FROM t WHERE k='key1' AND n=?");
    q.bind(1, 20);  // the 9 MiB value
    BOOST_REQUIRE(q.step());
    BOOST_TEST(q.column_text(0) == filler(9'000'000) + "20");
}

BOOST_FIXTURE_TEST_CASE(a_failed_write_fails_its_commit_and_nothing_else, fixture) {
    put(4, 0, 10, "before");
    auto r0 = reader();
    const auto committed = count(r0);
    // The WAL may not grow past its size now plus 64 KiB: a 2 MiB commit fails
    // in the write that the sync at commit makes.
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    BOOST_REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    const auto wal = std::filesystem::file_size(dir / "t.db-wal");
    rlimit small = old;
    small.rlim_cur = static_cast<rlim_t>(wal + 65536);
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool failed = false;
    try {
        put(4, 10, 50, filler(10'000));
    } catch (const app::db_error&) {
        failed = true;
    }
    if (failed && sqlite3_get_autocommit(db->handle()) == 0) db->exec("ROLLBACK");
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    BOOST_TEST(failed);
    BOOST_TEST(count(*db).first == committed.first);
    BOOST_TEST(count(*db).second == committed.second);
    {
        auto r = reader();
        BOOST_TEST(count(r).first == committed.first);
        BOOST_TEST(count(r).second == committed.second);
    }
    // Space is back: the same rows commit, and nothing of the failed attempt
    // comes back with them.
    put(4, 10, 50, "after");
    db.reset();
    db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::full);
    BOOST_TEST(count(*db).first == committed.first + 200);
    auto q = db->prepare("SELECT count(*) FROM t WHERE v LIKE 'after%'");
    q.step();
    BOOST_TEST(q.column_int(0) == 200);
}

// At the file level, as SQLite writes a WAL: frames (a 24-byte header, then
// the page), then, after a ROLLBACK TO, a header written again inside them.
// What followed it was undone: it must never reach the file, or a commit
// frame could be written before stale bytes whose write then fails.
BOOST_FIXTURE_TEST_CASE(frames_undone_by_rollback_to_never_reach_the_file, fixture) {
    sqlite3_vfs* vfs = sqlite3_vfs_find(app::coalescing_wal_vfs());
    BOOST_REQUIRE(vfs != nullptr);
    const std::string db_path = (dir / "raw.db").string(), wal_path = db_path + "-wal";
    { std::ofstream(db_path).put('x'); }  // the Unix VFS takes a WAL file's mode from its database's
    std::vector<std::max_align_t> mem(static_cast<std::size_t>(vfs->szOsFile) / sizeof(std::max_align_t) + 1);
    auto* f = reinterpret_cast<sqlite3_file*>(mem.data());
    int out = 0;
    BOOST_REQUIRE(vfs->xOpen(vfs, wal_path.c_str(), f, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_WAL,
                             &out) == SQLITE_OK);
    const std::string header(24, 'h'), page(4096, 'p'), again(4096, 'a');
    constexpr sqlite3_int64 frame = 24 + 4096;
    for (int i = 0; i < 3; ++i) {  // frames 0, 1, 2 after the 32-byte WAL header
        BOOST_REQUIRE(f->pMethods->xWrite(f, header.data(), 24, 32 + i * frame) == SQLITE_OK);
        BOOST_REQUIRE(f->pMethods->xWrite(f, page.data(), 4096, 32 + i * frame + 24) == SQLITE_OK);
    }
    // A page rewritten in place (not a rewind): kept with what follows.
    BOOST_REQUIRE(f->pMethods->xWrite(f, again.data(), 4096, 32 + 2 * frame + 24) == SQLITE_OK);
    // Back to frame 1: frame 2 is void.
    BOOST_REQUIRE(f->pMethods->xWrite(f, header.data(), 24, 32 + frame) == SQLITE_OK);
    BOOST_REQUIRE(f->pMethods->xWrite(f, again.data(), 4096, 32 + frame + 24) == SQLITE_OK);
    BOOST_REQUIRE(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL) == SQLITE_OK);
    BOOST_REQUIRE(f->pMethods->xClose(f) == SQLITE_OK);
    BOOST_TEST(std::filesystem::file_size(wal_path) == static_cast<std::uintmax_t>(32 + 2 * frame));
    std::ifstream in(wal_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_REQUIRE(bytes.size() == static_cast<std::size_t>(32 + 2 * frame));
    BOOST_TEST(bytes.substr(32 + 24, 4096) == page);
    BOOST_TEST(bytes.substr(32 + frame + 24, 4096) == again);
}

// A deferral installed on the thread takes the WAL's syncs: the commit is
// written (another connection reads it) and a flush is owed, with a
// descriptor of the WAL file to flush from any thread. Without a deferral
// syncs happen at once, as before, and a deferral serves one WAL file.
BOOST_FIXTURE_TEST_CASE(a_deferral_takes_the_wal_syncs_and_owes_a_flush, fixture) {
    db.reset();
    app::wal_sync_deferral d;
    app::wal_sync_deferral* was = app::wal_sync_deferral::install(&d);
    BOOST_TEST(was == nullptr);
    struct uninstall {
        ~uninstall() { app::wal_sync_deferral::install(nullptr); }
    } on_exit;
    // A new WAL's first commit syncs for real; the next one is deferred.
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "raw.db").string();
    sqlite3* raw = nullptr;
    BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                  app::coalescing_wal_vfs()) == SQLITE_OK);
    auto run = [](sqlite3* c, const char* sql) { return sqlite3_exec(c, sql, nullptr, nullptr, nullptr); };
    BOOST_REQUIRE(run(raw, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL") == SQLITE_OK);
    auto before = app::coalescing_wal_vfs_stats();
    BOOST_REQUIRE(run(raw, "CREATE TABLE u(n INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    auto after = app::coalescing_wal_vfs_stats();
    // The new log's header sync was done (the directory's too), its frames' deferred.
    BOOST_TEST(after.syncs_done - before.syncs_done == 1u);
    BOOST_TEST(after.syncs_deferred - before.syncs_deferred == 1u);
    BOOST_REQUIRE(run(raw, "INSERT INTO u(n) VALUES(1)") == SQLITE_OK);
    BOOST_TEST(d.owed());
    BOOST_TEST(d.take_owed());
    BOOST_TEST(!d.owed());
    BOOST_REQUIRE(d.fd() >= 0);
    // The descriptor is the WAL's: its size is the file's.
    struct stat st {};
    BOOST_REQUIRE(::fstat(d.fd(), &st) == 0);
    BOOST_TEST(static_cast<std::uintmax_t>(st.st_size) == std::filesystem::file_size(path + "-wal"));
    BOOST_TEST(::fdatasync(d.fd()) == 0);
    {
        // Written, so another connection reads it.
        sqlite3* other = nullptr;
        BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &other, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
        sqlite3_stmt* q = nullptr;
        BOOST_REQUIRE(sqlite3_prepare_v2(other, "SELECT count(*) FROM u", -1, &q, nullptr) == SQLITE_OK);
        BOOST_REQUIRE(sqlite3_step(q) == SQLITE_ROW);
        BOOST_TEST(sqlite3_column_int(q, 0) == 1);
        sqlite3_finalize(q);
        sqlite3_close(other);
    }
    // A checkpoint writes the database file: the deferred syncs are done
    // first, once however many pages it writes. Then the log restarts, and
    // its new header is synced for real before its frames (whose sync is
    // deferred again).
    d.take_owed();
    BOOST_REQUIRE(run(raw, "BEGIN") == SQLITE_OK);
    for (int n = 2; n < 40; ++n) {
        const std::string sql = "INSERT INTO u(n, v) VALUES(" + std::to_string(n) + ", zeroblob(8192))";
        BOOST_REQUIRE(run(raw, sql.c_str()) == SQLITE_OK);
    }
    BOOST_REQUIRE(run(raw, "COMMIT") == SQLITE_OK);
    before = app::coalescing_wal_vfs_stats();
    BOOST_REQUIRE(run(raw, "PRAGMA wal_checkpoint(TRUNCATE)") == SQLITE_OK);
    after = app::coalescing_wal_vfs_stats();
    BOOST_TEST(after.settles - before.settles == 1u);  // about 80 pages written, one flush before them
    BOOST_TEST(std::filesystem::file_size(path) > std::uintmax_t{300} * 1024);
    before = app::coalescing_wal_vfs_stats();
    BOOST_REQUIRE(run(raw, "INSERT INTO u(n) VALUES(100)") == SQLITE_OK);
    after = app::coalescing_wal_vfs_stats();
    BOOST_TEST(after.syncs_done - before.syncs_done == 1u);  // the restarted log's header
    BOOST_TEST(after.syncs_deferred - before.syncs_deferred == 1u);
    // Lifted: the next commit syncs at once and owes nothing.
    BOOST_TEST(d.take_owed());
    app::wal_sync_deferral::install(nullptr);
    BOOST_REQUIRE(run(raw, "INSERT INTO u(n) VALUES(200)") == SQLITE_OK);
    BOOST_TEST(!d.owed());
    // Closing checkpoints the WAL into the database file: with the deferral
    // installed, the owed flush is done before that (and still owed).
    app::wal_sync_deferral::install(&d);
    sqlite3_close(raw);
    d.take_owed();
    // Another database's WAL on the same thread, while the deferral serves
    // the first one's (closed now): its syncs are done at once.
    db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::full);
    db->exec("CREATE TABLE IF NOT EXISTS u(n INTEGER PRIMARY KEY)");
    db->exec("INSERT INTO u(n) VALUES(1)");
    db->exec("INSERT INTO u(n) VALUES(2)");
    BOOST_TEST(!d.owed());
}

BOOST_AUTO_TEST_SUITE_END()
