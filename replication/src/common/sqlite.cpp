#include "sqlite.hpp"

#include "wal_vfs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace steadfast::app {

namespace {
// The connection's one authorizer (database::sql_watch says what it checks).
int authorize(void* watch, int action, const char* a3, const char* a4, const char*, const char*) noexcept;
}  // namespace

sync_mode parse_sync(std::string_view s) {
    if (s == "full") return sync_mode::full;
    if (s == "off") return sync_mode::off;
    throw std::invalid_argument("--sync must be full or off, got \"" + std::string(s) + "\"");
}

namespace {
class db_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "sqlite"; }
    std::string message(int ev) const override {
        if (ev == db_job_threw) return "the job failed";
        if (ev == db_apply_failed) return "the application's code failed (it threw, or it ended the transaction)";
        if (ev == db_abandoned) return "the node is stopping: the request was given up";
        if (ev == db_group_ended)
            return "another job of its group commit (an application's code) ended the transaction: nothing of this "
                   "one was stored";
        return sqlite3_errstr(ev);
    }
};
}  // namespace

const boost::system::error_category& db_category() noexcept {
    static const db_category_impl c;
    return c;
}

statement::statement(sqlite3* db, std::string_view sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s_, nullptr) != SQLITE_OK)
        throw db_error("cannot prepare \"" + std::string(sql) + "\": " + sqlite3_errmsg(db),
                       sqlite3_extended_errcode(db));
}
statement::~statement() {
    sqlite3_finalize(s_);
}
statement& statement::bind(int i, std::int64_t v) {
    if (const int rc = sqlite3_bind_int64(s_, i, v); rc != SQLITE_OK) throw db_error(sqlite3_errmsg(db_), rc);
    return *this;
}
statement& statement::bind(int i, std::string_view v) {
    if (const int rc = sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        rc != SQLITE_OK)
        throw db_error(sqlite3_errmsg(db_), rc);
    return *this;
}
namespace {
// SQLite's message for the connection's last error, with the system's own
// words for an I/O failure ("disk I/O error (File too large)"): SQLite says
// only that a read or write failed, and the cause (a file-size limit, a
// quota, a dying disk) is what an operator needs.
std::string error_text(sqlite3* db, const char* message) {
    std::string out = message ? message : sqlite3_errmsg(db);
    const int primary = sqlite3_extended_errcode(db) & 0xff;
    const int noted = take_last_io_errno();  // this VFS's, read at the failure
    if (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN) {
        const int e = noted != 0 ? noted : sqlite3_system_errno(db);
        if (e != 0) out += " (" + std::generic_category().message(e) + ")";
    }
    return out;
}
}  // namespace

bool statement::step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    const std::string msg = error_text(db_, nullptr);
    const int code = sqlite3_extended_errcode(db_);
    sqlite3_reset(s_);
    throw db_error(msg, code);
}
void statement::reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
}
int statement::run(std::string& message) noexcept {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) rc = SQLITE_DONE;
    if (rc != SQLITE_DONE) {
        try {
            message = error_text(db_, nullptr);
        } catch (...) {  // no memory for the message: the code says enough
        }
        rc = sqlite3_extended_errcode(db_);
    }
    sqlite3_reset(s_);
    return rc;
}
std::int64_t statement::column_int(int i) const {
    return sqlite3_column_int64(s_, i);
}
std::string_view statement::column_text(int i) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, i))) : std::string_view{};
}
bool statement::column_null(int i) const {
    return sqlite3_column_type(s_, i) == SQLITE_NULL;
}

namespace {
// An exclusive, non-blocking flock on DIR/LOCK, held for the process's life
// (released by the kernel when it dies, even by kill -9). The file holds the
// holder's pid, for the message of the next one.
int lock_directory(const std::string& dir);
}  // namespace

namespace {
// The LOCK files this process holds (device, inode): a second node of the
// same process on a directory is told so, whatever pid the file holds (two
// processes in two pid namespaces may both be pid 1).
std::mutex held_mutex;
std::set<std::pair<dev_t, ino_t>>& held_locks() {
    static std::set<std::pair<dev_t, ino_t>> s;
    return s;
}
std::optional<std::pair<dev_t, ino_t>> file_id(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return std::nullopt;
    return std::pair{st.st_dev, st.st_ino};
}
}  // namespace

dir_lock::~dir_lock() {
    if (fd_ < 0) return;
    std::lock_guard l(held_mutex);  // (the set and the lock change together)
    if (auto id = file_id(fd_)) held_locks().erase(*id);
    ::close(fd_);
}
void dir_lock::acquire(const std::string& dir) {
    fd_ = lock_directory(dir);
}

namespace {
// Before SQLite's first use (opening a connection, or finding a VFS, which
// initialises it): no global memory statistics (each allocation would take a
// process-wide mutex: 6 % of the secondary's CPU in a batch apply), and no
// per-connection mutexes (each connection is used by one thread at a time).
// Either call fails harmlessly if SQLite was already initialised by someone
// else in the process. (Registering the WAL VFS first once undid both: 9 % of
// the secondary's CPU went to mutexes, 10 % off --stdin end to end.)
void configure_sqlite() {
    static const bool configured = [] {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
        return true;
    }();
    (void)configured;
}

// A path as the path of a file: URI (RFC 3986 characters kept, the rest
// percent-encoded: "?", "#" and "%" in a directory name stay in the path).
std::string uri_path(const std::string& path) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

// A connection to `path` with `flags`, through the coalescing WAL VFS if
// `gather_wal` (else the default), waiting up to 5 s on a busy database, or
// db_error naming the file.
sqlite3* open_connection(const std::string& path, int flags, bool gather_wal = false) {
    configure_sqlite();  // before the VFS is looked up
    const char* vfs = gather_wal ? coalescing_wal_vfs() : nullptr;
    sqlite3* db = nullptr;
    if (const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, vfs); rc != SQLITE_OK) {
        std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
        const int code = db ? sqlite3_extended_errcode(db) : rc;
        sqlite3_close(db);
        throw db_error("cannot open \"" + path + "\": " + msg, code);
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

int lock_directory(const std::string& dir) {
    const std::string path = (std::filesystem::path(dir) / "LOCK").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw db_error("cannot open \"" + path + "\": " + std::strerror(errno));
    const auto id = file_id(fd);
    std::lock_guard held(held_mutex);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        const bool ours = id && held_locks().count(*id) != 0;
        char buf[32] = {};
        const auto n = ::pread(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string{};
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
        if (err == EWOULDBLOCK && ours)
            throw db_error("data directory \"" + dir +
                           "\" is in use by another node of this process; one node per directory");
        if (err == EWOULDBLOCK)
            throw db_error("data directory \"" + dir + "\" is in use by another process" +
                           (holder.empty() ? std::string{} : " (pid " + holder + ")") + "; one process per directory");
        throw db_error("cannot lock \"" + path + "\": " + std::strerror(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The lock holds without the pid; only the message gets poorer.
    }
    if (id) held_locks().insert(*id);
    return fd;
}
}  // namespace

namespace {
// The pair's other node's store in `dir`, if it is there (its file name).
const char* other_nodes_store(const std::string& dir, const std::string& name) {
    std::error_code ec;
    for (const char* other : {"primary.db", "secondary.db"})
        if (name != other && std::filesystem::exists(std::filesystem::path(dir) / other, ec)) return other;
    return nullptr;
}
}  // namespace

database::database(const std::string& dir, const std::string& name, const std::string& application, sync_mode sync,
                   open_mode mode) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool ro = mode == open_mode::read_only;
    if (ro) {
        read_only_ = true;
        path_ = (fs::path(dir) / name).string();
        if (!fs::exists(path_, ec)) {
            // The other node's store there: the command of the other daemon.
            if (const char* other = other_nodes_store(dir, name))
                throw db_error("no database at \"" + path_ + "\": \"" + dir + "\" holds " + other +
                               ", another node's store (use that node's command)");
            throw db_error("no database at \"" + path_ + "\"");
        }
        // Inspection needs no write access and leaves no files behind. A
        // cleanly stopped store has no -wal: opened immutable, SQLite creates
        // no -wal or -shm and takes no locks (a read-only mount works). With
        // a -wal (a running server, or one that did not stop cleanly) the
        // log must be read: read-only mode, which a running server's -shm
        // makes possible.
        const bool has_wal = fs::exists(path_ + "-wal", ec);
        immutable_ = !has_wal;
        size_at_open_ = fs::file_size(path_, ec);
        mtime_at_open_ = fs::last_write_time(path_, ec);
        try {
            db_ = open_connection("file:" + uri_path(path_) + (has_wal ? "?mode=ro" : "?immutable=1"),
                                  SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
            // Reading something finds a log that cannot be read (no -shm and no
            // right to create one).
            statement probe(db_, "SELECT count(*) FROM sqlite_master");
            probe.step();
        } catch (const db_error& e) {
            if (db_) sqlite3_close(db_);
            db_ = nullptr;
            if (!has_wal) throw;
            throw db_error(
                std::string(e.what()) + " (\"" + path_ +
                    "-wal\" holds commits not yet in the database, and reading them needs write access to the "
                    "directory: the server did not stop cleanly; copy the directory somewhere writable)",
                e.code().value());
        }
        try {
            statement app(db_, "SELECT value FROM meta WHERE key='application'");
            if (!app.step() || app.column_text(0) != application)
                throw db_error("\"" + path_ + "\" is not a database of " + application);
        } catch (...) {
            sqlite3_close(db_);
            db_ = nullptr;
            throw;
        }
        return;
    }
    // (Created by another process between the two calls, it is not made
    // here and that is no error: the lock below settles who uses it.)
    if (!fs::exists(dir, ec) && !fs::create_directories(dir, ec) && ec)
        throw db_error("cannot create data directory \"" + dir + "\": " + ec.message());
    if (!fs::is_directory(dir, ec)) throw db_error("data directory \"" + dir + "\" is not a directory");
    path_ = (fs::path(dir) / name).string();
    created_ = !fs::exists(path_, ec);
    // The pair's two stores never share a directory (its lock is one
    // process's): a node started on the other's directory (a copied unit or
    // configuration) is refused, before it takes the lock, rather than given
    // a new, empty store there.
    if (created_)
        if (const char* other = other_nodes_store(dir, name))
            throw db_error("data directory \"" + dir + "\" holds " + other +
                           ", another node's store; give each node a directory of its own");
    lock_.acquire(dir);
    if (!created_) {
        std::ifstream probe(path_, std::ios::binary);
        if (!probe) throw db_error("cannot read \"" + path_ + "\": " + std::strerror(errno));
        char magic[16] = {};
        probe.read(magic, 16);
        if (probe.gcount() != 0 && std::memcmp(magic, "SQLite format 3", 16) != 0)
            throw db_error("\"" + path_ + "\" is not a SQLite database; refusing to replace it");
    }
    // With fsync, a commit's WAL frames reach the file in one write (wal_vfs.hpp
    // says why that is safe); without, SQLite's own writes are kept, since
    // nothing would flush gathered frames before readers are told of them.
    db_ = open_connection(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, sync == sync_mode::full);
    // Once, now: setting an authorizer expires every prepared statement.
    sqlite3_set_authorizer(db_, &authorize, &watch_);
    try {
        exec("PRAGMA journal_mode=WAL");
        exec(sync == sync_mode::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF");
        if (!created_) {
            statement check(db_, "PRAGMA quick_check");
            if (!check.step() || check.column_text(0) != "ok")
                throw db_error("\"" + path_ + "\" is corrupt (quick_check: " + std::string(check.column_text(0)) +
                               "); refusing to start on it");
        }
        exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
        statement app(db_, "SELECT value FROM meta WHERE key='application'");
        if (app.step()) {
            if (app.column_text(0) != application)
                throw db_error("\"" + path_ + "\" belongs to " + std::string(app.column_text(0)) + ", not " +
                               application);
        } else {
            statement count(db_, "SELECT count(*) FROM sqlite_master WHERE tbl_name <> 'meta'");
            count.step();
            if (count.column_int(0) != 0)
                throw db_error("\"" + path_ + "\" is a SQLite database of some other program; refusing to use it");
            statement put(db_, "INSERT INTO meta(key, value) VALUES('application', ?)");
            put.bind(1, application);
            put.step();
        }
    } catch (...) {
        sqlite3_close(db_);
        db_ = nullptr;
        throw;
    }
}

database::~database() {
    sqlite3_close(db_);
}

void database::check_unchanged() const {
    if (!immutable_) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path_ + "-wal", ec) || fs::file_size(path_, ec) != size_at_open_ ||
        fs::last_write_time(path_, ec) != mtime_at_open_)
        throw db_error("\"" + path_ +
                       "\" changed while it was read (a server started on it): what was printed may be "
                       "incomplete; run the command again");
}

namespace {
bool storage_code(int code) noexcept {
    switch (code & 0xff) {
        case SQLITE_FULL:
        case SQLITE_IOERR:
        case SQLITE_READONLY:
        case SQLITE_CORRUPT:
        case SQLITE_NOMEM:
        case SQLITE_CANTOPEN:
        case SQLITE_NOTADB:
            return true;
        default:
            return false;
    }
}
}  // namespace

bool storage_failed_under(sqlite3* db) noexcept {
    return storage_code(sqlite3_errcode(db)) || (sqlite3_get_autocommit(db) && !ended_by_program(db));
}

bool ended_by_program(sqlite3* db) noexcept {
    return sqlite3_get_autocommit(db) && !storage_code(sqlite3_errcode(db));
}

const char* const transaction_ended_text =
    "ended the transaction (a statement that rolls the transaction back: INSERT OR ROLLBACK, ON CONFLICT "
    "ROLLBACK, RAISE(ROLLBACK)); a program's code must leave the transaction to the node (SAVEPOINT and RELEASE "
    "of its own are fine)";

program_code_guard::program_code_guard(database& db, const std::vector<std::string_view>& reserved) noexcept : db_(db) {
    db_.watch().start(database::sql_watch::mode::program, reserved);
}

program_code_guard::~program_code_guard() {
    db_.watch().what = database::sql_watch::mode::off;
}

const std::string& program_code_guard::refused() const noexcept {
    return db_.watch().refused;
}

std::string program_code_guard::refusal() const {
    return "tried " + db_.watch().refused + ", which was refused: " + db_.watch().why;
}

void database::exec(std::string_view sql) {
    char* err = nullptr;
    const std::string s(sql);
    if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = error_text(db_, err);
        sqlite3_free(err);
        throw db_error("\"" + s + "\" failed on \"" + path_ + "\": " + msg, sqlite3_extended_errcode(db_));
    }
}

namespace {

bool same_name(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && sqlite3_strnicmp(a.data(), b.data(), static_cast<int>(a.size())) == 0;
}

// Every schema object named after one of `reserved`, or on one (an index, a
// trigger), one a line: what the application's schema may not change.
std::string reserved_objects(sqlite3* db, const std::vector<std::string_view>& reserved) {
    struct ctx {
        const std::vector<std::string_view>& reserved;
        std::string out;
    } c{reserved, {}};
    auto row = [](void* p, int n, char** v, char**) -> int {
        auto& into = *static_cast<ctx*>(p);
        if (n < 4) return 0;
        for (const auto r : into.reserved)
            if ((v[1] && same_name(v[1], r)) || (v[2] && same_name(v[2], r))) {
                for (int i = 0; i < 4; ++i) (into.out += v[i] ? v[i] : "") += '\t';
                into.out += '\n';
                break;
            }
        return 0;
    };
    char* err = nullptr;
    if (sqlite3_exec(db, "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name", row, &c, &err) !=
        SQLITE_OK) {
        std::string msg = err ? err : "?";
        sqlite3_free(err);
        throw db_error("reading the schema failed: " + msg, sqlite3_extended_errcode(db));
    }
    return c.out;
}

}  // namespace

namespace {
bool starts_with_name(const char* name, std::string_view prefix) noexcept {
    if (!name) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i)
        if (name[i] == '\0' || std::tolower(static_cast<unsigned char>(name[i])) != prefix[i]) return false;
    return true;
}

int authorize(void* p, int action, const char* a3, const char* a4, const char*, const char*) noexcept {
    auto& w = *static_cast<database::sql_watch*>(p);
    if (w.what == database::sql_watch::mode::off) return SQLITE_OK;
    const bool program = w.what == database::sql_watch::mode::program;
    static constexpr const char* transaction_why =
        "the transaction is the node's, and holds other publishes of its group commit (savepoints of its own, "
        "not named steadfast_..., are fine)";
    try {
        auto deny = [&](std::string statement, std::string why) {
            if (w.why.empty()) {
                w.refused = std::move(statement);
                w.why = std::move(why);
            }
            return SQLITE_DENY;
        };
        auto reserved = [&](const char* name) {
            if (!name || !w.reserved) return false;
            for (const auto r : *w.reserved)
                if (same_name(name, r)) return true;
            return false;
        };
        auto table = [&](const char* name) {
            // (built from a string_view: g++ 12 at -O3 warns falsely of an
            // overlap when a const char* is copied into a std::string here)
            const std::string_view n(name);
            std::string quoted;
            quoted.reserve(n.size() + 2);
            quoted.push_back('"');
            quoted.append(n).push_back('"');
            return deny("a statement naming " + quoted, quoted + " is one of the node's own tables");
        };
        switch (action) {
            // a3: the object made or dropped, a4: its table (or module)
            case SQLITE_CREATE_TABLE:
            case SQLITE_CREATE_TEMP_TABLE:
            case SQLITE_DROP_TABLE:
            case SQLITE_DROP_TEMP_TABLE:
            case SQLITE_CREATE_INDEX:
            case SQLITE_CREATE_TEMP_INDEX:
            case SQLITE_DROP_INDEX:
            case SQLITE_DROP_TEMP_INDEX:
            case SQLITE_CREATE_TRIGGER:
            case SQLITE_CREATE_TEMP_TRIGGER:
            case SQLITE_DROP_TRIGGER:
            case SQLITE_DROP_TEMP_TRIGGER:
            case SQLITE_CREATE_VIEW:
            case SQLITE_CREATE_TEMP_VIEW:
            case SQLITE_DROP_VIEW:
            case SQLITE_DROP_TEMP_VIEW:
            case SQLITE_CREATE_VTABLE:
            case SQLITE_DROP_VTABLE:
                if (reserved(a3)) return table(a3);
                if (reserved(a4)) return table(a4);
                return SQLITE_OK;
            case SQLITE_ALTER_TABLE:  // a3: the database, a4: the table
                return reserved(a4) ? table(a4) : SQLITE_OK;
            case SQLITE_INSERT:
            case SQLITE_UPDATE:
            case SQLITE_DELETE:
                return reserved(a3) ? table(a3) : SQLITE_OK;
            case SQLITE_PRAGMA:  // a3: its name, a4: the value set (null: a read)
                if (a3 && same_name(a3, "writable_schema"))
                    return deny("PRAGMA writable_schema", "PRAGMA writable_schema is refused");
                if (program && a3 && a4)
                    for (const char* setting : {"query_only", "synchronous", "journal_mode", "locking_mode",
                                                "schema_version", "wal_autocheckpoint", "temp_store"})
                        if (same_name(a3, setting))
                            return deny("PRAGMA " + std::string(a3) + "=" + a4, "it changes the node's connection");
                return SQLITE_OK;
            case SQLITE_TRANSACTION:  // a3: BEGIN, COMMIT or ROLLBACK
                return program ? deny(a3 ? a3 : "a transaction statement", transaction_why) : SQLITE_OK;
            case SQLITE_SAVEPOINT:  // a3: BEGIN, RELEASE or ROLLBACK; a4: the name
                if (program && a3 && starts_with_name(a4, "steadfast_")) {
                    const std::string_view op(a3);
                    return deny(std::string(op == "BEGIN"     ? "SAVEPOINT "
                                            : op == "RELEASE" ? "RELEASE "
                                                              : "ROLLBACK TO ") +
                                    a4,
                                transaction_why);
                }
                return SQLITE_OK;
            default:
                return SQLITE_OK;
        }
    } catch (...) {
        return SQLITE_DENY;  // out of memory naming it: refused all the same
    }
}
}  // namespace

void database::exec_schema(std::string_view sql, const std::vector<std::string_view>& reserved,
                           std::string_view setting) {
    auto refused = [&](const std::string& why) {
        std::string names;
        for (const auto r : reserved) names += (names.empty() ? "" : ", ") + std::string(r);
        return std::invalid_argument(std::string(setting) + ": " + why + " (reserved: " + names +
                                     "); give the application's tables other names");
    };
    // All of it or none: it runs in a savepoint (so no BEGIN or COMMIT of
    // its own), under the authorizer's schema watch, which refuses what
    // names a reserved table, and what it changed among them is compared
    // after (a rename to one, a virtual table of that name).
    const std::string before = reserved_objects(db_, reserved);
    exec("SAVEPOINT steadfast_schema");
    struct undo {
        database& d;
        bool done = false;
        ~undo() {
            d.watch_.what = sql_watch::mode::off;
            if (done) return;
            sqlite3_exec(d.handle(), "ROLLBACK TO steadfast_schema", nullptr, nullptr, nullptr);
            sqlite3_exec(d.handle(), "RELEASE steadfast_schema", nullptr, nullptr, nullptr);
        }
    } u{*this};
    watch_.start(sql_watch::mode::schema, reserved);
    try {
        exec(sql);
    } catch (const db_error& e) {
        if (!watch_.why.empty()) throw refused(watch_.why);
        // The SQL's own failure (a syntax error, a name taken, a constraint)
        // is a bad setting; anything else (the storage, a lock held too
        // long, an interrupt) stays the database's error.
        switch (e.code().value() & 0xff) {
            case SQLITE_ERROR:
            case SQLITE_CONSTRAINT:
            case SQLITE_MISMATCH:
            case SQLITE_RANGE:
            case SQLITE_TOOBIG:
            case SQLITE_AUTH:
            case SQLITE_ABORT:
                throw std::invalid_argument(std::string(setting) + ": " + e.what());
            default:
                throw;
        }
    }
    watch_.what = sql_watch::mode::off;
    if (const std::string after = reserved_objects(db_, reserved); after != before) {
        // Name what appeared or changed (else what went).
        std::string line;
        for (std::size_t at = 0; at < after.size();) {
            const auto end = after.find('\n', at);
            std::string l = after.substr(at, end - at + 1);
            if (before.find(l) == std::string::npos) {
                line = l;
                break;
            }
            at = end + 1;
        }
        if (line.empty()) line = before.substr(0, before.find('\n'));
        const auto name_at = line.find('\t') + 1;
        throw refused("\"" + line.substr(name_at, line.find('\t', name_at) - name_at) +
                      "\" is one of the node's own tables (the schema made or changed it)");
    }
    exec("RELEASE steadfast_schema");
    u.done = true;
}

void database::exec(statement& s, std::string_view sql) {
    std::string msg;
    if (const int rc = s.run(msg); rc != SQLITE_DONE)
        throw db_error("\"" + std::string(sql) + "\" failed on \"" + path_ + "\": " + msg, rc);
}

}  // namespace steadfast::app
