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

BOOST_AUTO_TEST_SUITE_END()
