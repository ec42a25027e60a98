// A small RAII layer over SQLite for the apps: one connection, prepared
// statements, transactions and savepoints. Errors throw db_error (inside the
// database thread only; callers get error values).
#pragma once

#include <boost/system/error_code.hpp>

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::app {

/// SQLite's result codes (extended ones too) as error codes: message() is
/// sqlite3_errstr's ("database or disk is full", "disk I/O error", ...).
/// Also db_job_threw: a job failed with an exception of its own.
const boost::system::error_category& db_category() noexcept;
inline constexpr int db_job_threw = 0x10000;  // outside SQLite's codes
/// An application's code failed, not the storage: its apply handler threw,
/// or its code ended the transaction (then the other jobs of the group fail
/// with db_group_ended). The request is refused and sent again; a publish fails.
inline constexpr int db_apply_failed = 0x10001;
/// The node is being destroyed: a request being applied was given up
/// between two messages (nothing of it stays; the primary sends it again).
inline constexpr int db_abandoned = 0x10002;
/// Another job of the same group commit (an application's code) ended the
/// transaction: nothing of this job was stored, through no fault of its own
/// (a publish fails and may be made again; a request is sent again).
inline constexpr int db_group_ended = 0x10003;
inline boost::system::error_code make_db_error_code(int code) noexcept {
    return {code, db_category()};
}
/// A failure of an application's code (db_apply_failed, or db_group_ended:
/// another job's in its group commit), not of the storage: nothing of the
/// storage's health changes, and what failed is sent or published again.
inline bool application_failed(const boost::system::error_code& code) noexcept {
    return code == make_db_error_code(db_apply_failed) || code == make_db_error_code(db_group_ended);
}

struct db_error : std::runtime_error {
    /// `sqlite_code`: SQLite's result code of the failure (SQLITE_ERROR when
    /// the check is ours: a directory in use, a file of another program).
    explicit db_error(const std::string& what, int sqlite_code = SQLITE_ERROR)
        : std::runtime_error(what), code_(make_db_error_code(sqlite_code)) {}
    /// Any code (a cancelled job's operation_aborted).
    db_error(const std::string& what, boost::system::error_code code) : std::runtime_error(what), code_(code) {}
    boost::system::error_code code() const noexcept { return code_; }

private:
    boost::system::error_code code_;
};

/// After an embedding program's code threw inside a transaction: whether
/// the storage failed under it (SQLite rolled the transaction back, or the
/// connection's last error is a full disk, an I/O error, a read-only or
/// corrupt file, no memory) rather than the program's own logic.
bool storage_failed_under(sqlite3* db) noexcept;
/// After an embedding program's code ran inside a transaction: it ended the
/// transaction itself (SQLite is in autocommit mode again, and not for a
/// storage failure). Nothing after it may be written (db_worker's commit
/// hook refuses every commit but its own), and the job fails with
/// transaction_ended_text.
bool ended_by_program(sqlite3* db) noexcept;
extern const char* const transaction_ended_text;

class database;

/// While an embedding program's code runs inside the node's transaction
/// (publish writes, a transaction, an apply handler), its statements are
/// checked as SQLite prepares them, and refused (SQLITE_AUTH, "not
/// authorized") when they would end that transaction or undo the node's
/// savepoints (BEGIN, COMMIT, ROLLBACK; SAVEPOINT, RELEASE or ROLLBACK TO of
/// a name starting "steadfast_", the node's), touch the node's own tables
/// (`reserved`: create, alter, drop, index or write one, or a TEMP table or
/// view shadowing one), or change the connection (PRAGMA query_only,
/// synchronous, journal_mode, locking_mode, writable_schema, schema_version,
/// wal_autocheckpoint, temp_store): they cannot take the other jobs of a
/// group commit with them. refused() names the first. Savepoints of its own
/// stay allowed. A statement that rolls back on a conflict (INSERT OR
/// ROLLBACK, RAISE(ROLLBACK)) cannot be told at prepare time:
/// ended_by_program() still catches it. (The check is the connection's one
/// authorizer, set once at open: setting one expires every prepared
/// statement.)
class program_code_guard {
public:
    program_code_guard(database& db, const std::vector<std::string_view>& reserved) noexcept;
    ~program_code_guard();
    program_code_guard(const program_code_guard&) = delete;
    program_code_guard& operator=(const program_code_guard&) = delete;

    /// The first statement refused ("COMMIT", "RELEASE steadfast_job"), or "".
    const std::string& refused() const noexcept;
    /// refused()'s sentence for an error: what was refused, and why.
    std::string refusal() const;

private:
    database& db_;
};

enum class sync_mode { full, off };
/// read_write: the server's own connection; it holds the data directory's lock
/// (one process per directory). read_only: status and dump, beside a running
/// server, without a lock and without the integrity check.
enum class open_mode { read_write, read_only };
sync_mode parse_sync(std::string_view s);  // "full" | "off", else std::invalid_argument

class statement {
public:
    statement(sqlite3* db, std::string_view sql);
    ~statement();
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    statement& bind(int i, std::int64_t v);
    statement& bind(int i, std::string_view v);
    /// Steps once: true when a row is available.
    bool step();
    void reset();
    /// Steps a statement that returns no row (BEGIN, SAVEPOINT, COMMIT) and
    /// resets it: SQLite's result code (SQLITE_DONE when it worked); on an
    /// error, `message` gets SQLite's message.
    int run(std::string& message) noexcept;
    std::int64_t column_int(int i) const;
    std::string_view column_text(int i) const;
    bool column_null(int i) const;

private:
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
};

/// An exclusive lock on a data directory (flock on DIR/LOCK), held until destroyed.
class dir_lock {
public:
    dir_lock() = default;
    ~dir_lock();
    dir_lock(const dir_lock&) = delete;
    dir_lock& operator=(const dir_lock&) = delete;
    /// Throws db_error naming the directory when another process holds it.
    void acquire(const std::string& dir);

private:
    int fd_ = -1;
};

class database {
public:
    /// Opens (creating when missing) DIR/NAME in WAL mode. Refuses, with a
    /// message naming the file, a directory that cannot be created or written,
    /// a file that is not a SQLite database, a corrupt one (quick_check), and a
    /// database of another application or schema version. In read_write mode,
    /// first takes an exclusive lock on DIR/LOCK and refuses, naming the
    /// directory, when another process holds it.
    database(const std::string& dir, const std::string& name, const std::string& application, sync_mode sync,
             open_mode mode = open_mode::read_write);
    ~database();
    database(const database&) = delete;
    database& operator=(const database&) = delete;

    void exec(std::string_view sql);
    /// Runs the application's `sql` (the setting `setting`, e.g.
    /// "primary_config::schema") with the node's own tables out of its
    /// reach: a statement that creates, alters, drops, indexes or writes one
    /// of `reserved` (any case), or names a table, index, view or trigger
    /// after one, is refused with std::invalid_argument naming it. Otherwise
    /// fails as exec() does.
    void exec_schema(std::string_view sql, const std::vector<std::string_view>& reserved, std::string_view setting);
    /// The same for `sql` prepared once as `s` (the database thread's
    /// BEGIN, SAVEPOINT, RELEASE and COMMIT, about 0.7 us each saved against
    /// parsing them every time); fails with exec's message.
    void exec(statement& s, std::string_view sql);
    /// A small write (a row of `meta`), in the caller's transaction: whether
    /// the database can commit again after a failure (a full disk).
    void touch() { exec("INSERT OR REPLACE INTO meta(key, value) VALUES('health_probe', datetime('now'))"); }
    /// A write of `bytes` that the caller's transaction commits: what readiness
    /// tries while storage fails, so that "ready" means a message of the
    /// largest size can be stored (a file-size limit or a quota that statvfs
    /// does not show refuses it). touch() puts a small value back.
    void probe_write(std::size_t bytes) {
        auto s = prepare("INSERT OR REPLACE INTO meta(key, value) VALUES('health_probe', zeroblob(?))");
        s.bind(1, static_cast<std::int64_t>(bytes));
        s.step();
    }
    statement prepare(std::string_view sql) { return statement(db_, sql); }
    sqlite3* handle() const noexcept { return db_; }
    const std::string& path() const noexcept { return path_; }
    /// True when the file was created by this open (a fresh data directory).
    bool created() const noexcept { return created_; }
    /// Opened with open_mode::read_only (status, dump): no schema changes.
    bool read_only() const noexcept { return read_only_; }
    /// After an inspection of a stopped store (opened immutable): db_error if
    /// a server started on it meanwhile (a -wal appeared, or the file
    /// changed), since what was read may then be incomplete. Call it after
    /// the reading, before reporting success.
    void check_unchanged() const;

    /// What the connection's authorizer checks now (program_code_guard,
    /// exec_schema): nothing, a schema setting, or a program's code.
    struct sql_watch {
        enum class mode { off, schema, program } what = mode::off;
        const std::vector<std::string_view>* reserved = nullptr;  // the node's own tables
        std::string refused;                                      // the first statement refused
        std::string why;                                          // and why
        /// Watches from now on as `m` says, `r` the node's tables; nothing refused yet.
        void start(mode m, const std::vector<std::string_view>& r) {
            what = m;
            reserved = &r;
            refused.clear();
            why.clear();
        }
    };
    sql_watch& watch() noexcept { return watch_; }

private:
    dir_lock lock_;  // a member: released even when the constructor throws
    sql_watch watch_;
    sqlite3* db_ = nullptr;
    std::string path_;
    bool created_ = false;
    bool immutable_ = false;  // read-only, opened immutable: the file's state when opened
    std::uintmax_t size_at_open_ = 0;
    std::filesystem::file_time_type mtime_at_open_{};
    bool read_only_ = false;
};

}  // namespace steadfast::app
