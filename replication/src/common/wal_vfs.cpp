#include "wal_vfs.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace steadfast::app {

namespace {
// The counts of wal_vfs_stats beyond writes.
std::atomic<std::uint64_t> syncs_deferred{0}, syncs_done{0}, settles{0};
}  // namespace

// Takes a WAL file's sync for the deferral: false when it belongs to another
// file or no descriptor can be had (then the sync is done at once).
struct wal_sync_access {
    static int open_same(const char* name, std::uint64_t dev, std::uint64_t ino) {
        // A descriptor of its own (its own open file description): Linux
        // reports a write-back error once to each description, so the
        // flusher's and the settle's each hear of it.
        // Read-only: fdatasync needs no more, and should it land on 0-2 (a
        // process started without them), a stray write to stderr fails
        // rather than overwrite the log.
        const int fd = ::open(name, O_RDONLY | O_CLOEXEC);
        struct stat st {};
        if (fd >= 0 && (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != dev ||
                        static_cast<std::uint64_t>(st.st_ino) != ino)) {
            ::close(fd);
            return -1;
        }
        return fd;
    }
    static bool take(wal_sync_deferral& d, const char* name, std::uint64_t dev, std::uint64_t ino) {
        if (d.fd_ >= 0 && (d.dev_ != dev || d.ino_ != ino)) return false;
        if (d.fd_ < 0) {
            const int a = open_same(name, dev, ino);
            const int b = a < 0 ? -1 : open_same(name, dev, ino);
            if (b < 0) {
                if (a >= 0) ::close(a);
                return false;
            }
            d.fd_ = a;
            d.settle_fd_ = b;
            d.dev_ = dev;
            d.ino_ = ino;
        }
        d.owed_ = true;
        d.unsettled_ = true;
        syncs_deferred.fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    // Before anything reaches a database file (a checkpoint copying frames
    // into it): the WAL's deferred syncs, done for real, once. 0, or SQLite's
    // error; a failure stays (failed_errno()), since a later flush could
    // succeed over the pages this one lost.
    static int settle(wal_sync_deferral* d) {
        if (d == nullptr) return 0;
        if (d->failed_errno_.load(std::memory_order_relaxed) != 0) return SQLITE_IOERR_FSYNC;
        if (!d->unsettled_ || d->settle_fd_ < 0) return 0;
        settles.fetch_add(1, std::memory_order_relaxed);
        if (const int err = fdatasync_errno(d->settle_fd_); err != 0) {
            d->failed_errno_.store(err, std::memory_order_relaxed);
            return SQLITE_IOERR_FSYNC;
        }
        d->unsettled_ = false;
        return 0;
    }
};

namespace {

constexpr const char* vfs_name = "steadfast-wal";
// Past this, gathered frames are written out (a very large transaction's
// frames do not all wait in memory for its commit).
constexpr std::size_t max_gathered = std::size_t{4} << 20;
// The most one xWrite of the platform's VFS takes: the Unix VFS keeps only the
// low 17 bits of a write's length (its writes are at most a page and a frame
// header, 64 KiB + 24 B), so a longer one would come back short, as
// SQLITE_FULL. Gathered bytes go out in pieces of 124 KiB.
constexpr std::size_t max_write = 0x1ffff & ~std::size_t{4095};
// SQLite writes a WAL frame as its 24-byte header, then the page.
constexpr int frame_header = 24;

std::atomic<std::uint64_t> writes_asked{0}, writes_issued{0};
sqlite3_vfs* base_vfs = nullptr;  // the platform's VFS, set once at registration
thread_local wal_sync_deferral* deferral = nullptr;

// The file SQLite holds: ours first, then the real VFS's file in the same block.
struct file {
    sqlite3_file base;       // base.pMethods: ours
    sqlite3_file* real;      // the platform VFS's file, right after this struct
    bool wal;                // gather writes (a WAL file) or pass through
    std::string gathered;    // consecutive bytes not yet written ...
    sqlite3_int64 at = 0;    // ... starting at this offset
    const char* name;        // a WAL's path (SQLite keeps it valid until xClose); nullptr: no deferral
    std::uint64_t dev, ino;  // the file's identity (a deferral serves one file)
    bool synced;             // a WAL synced once for real (its directory entry too)
    bool header;             // its header was written since the last sync (a new or restarted log)
    bool main_db;            // a main database file (what a checkpoint writes)
};

sqlite3_vfs* real_vfs() {
    return base_vfs;
}
file* self(sqlite3_file* f) {
    return reinterpret_cast<file*>(f);
}
sqlite3_file* real(sqlite3_file* f) {
    return self(f)->real;
}
const sqlite3_io_methods* rm(sqlite3_file* f) {
    return real(f)->pMethods;
}

// The errno of this thread's last failed read, write, truncate or sync of
// the platform's VFS, read right after it returned (SQLite's own
// sqlite3_system_errno() is 0 for a write past a file-size limit).
thread_local int last_io_errno = 0;
int noted(int rc) {
    if (rc != SQLITE_OK && errno != 0) last_io_errno = errno;
    return rc;
}

// Writes what was gathered; whatever the outcome, forgets it (after a
// failure SQLite rewrites its frames, at the same offsets).
int flush(sqlite3_file* f) {
    file* p = self(f);
    int rc = SQLITE_OK;
    for (std::size_t done = 0; done < p->gathered.size() && rc == SQLITE_OK; done += max_write) {
        const std::size_t n = std::min(max_write, p->gathered.size() - done);
        writes_issued.fetch_add(1, std::memory_order_relaxed);
        rc = noted(rm(f)->xWrite(p->real, p->gathered.data() + done, static_cast<int>(n),
                                 p->at + static_cast<sqlite3_int64>(done)));
    }
    p->gathered.clear();
    if (p->gathered.capacity() > max_gathered) std::string().swap(p->gathered);
    return rc;
}

int x_close(sqlite3_file* f) {
    const int frc = flush(f);
    const int rc = rm(f)->xClose(real(f));
    self(f)->gathered.~basic_string();
    return frc != SQLITE_OK ? frc : rc;
}
// A flush anywhere but at the sync fails with an I/O error whatever the
// cause: SQLite then rolls the whole transaction back, which it might not do
// for SQLITE_FULL (a statement rollback would leave it believing in frames of
// earlier statements that were dropped with the failed flush).
int flush_mid(sqlite3_file* f) {
    const int rc = flush(f);
    return rc == SQLITE_OK ? rc : SQLITE_IOERR_WRITE;
}

int x_read(sqlite3_file* f, void* out, int n, sqlite3_int64 off) {
    if (const int rc = flush_mid(f); rc != SQLITE_OK) return rc;
    const int rc = rm(f)->xRead(real(f), out, n, off);
    return rc == SQLITE_IOERR_SHORT_READ ? rc : noted(rc);  // a short read is no failure
}
int x_write(sqlite3_file* f, const void* data, int n, sqlite3_int64 off) {
    file* p = self(f);
    if (!p->wal) {
        // Only a checkpoint writes a database file in WAL mode: the frames it
        // copies must be on disk first, even when their sync was deferred.
        // (Temporary files, a statement journal that spills, pass as is.)
        if (p->main_db) {
            if (const int rc = wal_sync_access::settle(deferral); rc != 0) return rc;
        }
        return noted(rm(f)->xWrite(p->real, data, n, off));
    }
    writes_asked.fetch_add(1, std::memory_order_relaxed);
    if (off == 0) p->header = true;  // the log's header: a new or restarted WAL
    const auto* bytes = static_cast<const char*>(data);
    const auto len = static_cast<std::size_t>(n);
    const sqlite3_int64 end = p->at + static_cast<sqlite3_int64>(p->gathered.size());
    if (n == frame_header && !p->gathered.empty() && off >= p->at && off < end) {
        // A frame header inside what is gathered: SQLite went back (a
        // ROLLBACK TO undid frames of this transaction) and writes anew from
        // here. What follows is void: it must never reach the file (a commit
        // frame written before stale bytes that then fail to be written
        // would make a failed commit durable).
        p->gathered.resize(static_cast<std::size_t>(off - p->at));
    } else if (!p->gathered.empty() && off >= p->at && off + n <= end) {
        // A page rewritten in place within this transaction's frames.
        std::memcpy(p->gathered.data() + (off - p->at), bytes, len);
        return SQLITE_OK;
    }
    const sqlite3_int64 now_end = p->at + static_cast<sqlite3_int64>(p->gathered.size());
    if (!p->gathered.empty() && off != now_end) {
        if (const int rc = flush_mid(f); rc != SQLITE_OK) return rc;
    }
    if (p->gathered.empty()) p->at = off;
    p->gathered.append(bytes, len);
    return p->gathered.size() >= max_gathered ? flush_mid(f) : SQLITE_OK;
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
    if (self(f)->main_db) {
        if (const int rc = wal_sync_access::settle(deferral); rc != 0) return rc;
    }
    if (const int rc = flush_mid(f); rc != SQLITE_OK) return rc;
    return noted(rm(f)->xTruncate(real(f), size));
}
int x_sync(sqlite3_file* f, int flags) {
    if (const int rc = flush(f); rc != SQLITE_OK) return rc;
    file* p = self(f);
    // Never deferred: the first sync of a WAL (the platform VFS then syncs
    // the directory, which makes the file's name durable) and the sync of a
    // header written anew (a restarted log: SQLite makes the new salts
    // durable before new frames overwrite old ones, or recovery could replay
    // old frames over newer pages of the database file).
    if (p->wal && p->synced && !p->header && p->name != nullptr && deferral != nullptr &&
        wal_sync_access::take(*deferral, p->name, p->dev, p->ino))
        return SQLITE_OK;  // written; the deferral's owner flushes it
    const int rc = noted(rm(f)->xSync(real(f), flags));
    if (rc == SQLITE_OK) {
        p->synced = true;
        p->header = false;
        syncs_done.fetch_add(1, std::memory_order_relaxed);
    }
    return rc;
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
    if (const int rc = flush_mid(f); rc != SQLITE_OK) return rc;
    return rm(f)->xFileSize(real(f), size);
}
int x_lock(sqlite3_file* f, int l) {
    return rm(f)->xLock(real(f), l);
}
int x_unlock(sqlite3_file* f, int l) {
    return rm(f)->xUnlock(real(f), l);
}
int x_check_reserved(sqlite3_file* f, int* out) {
    return rm(f)->xCheckReservedLock(real(f), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
    return rm(f)->xFileControl(real(f), op, arg);
}
int x_sector_size(sqlite3_file* f) {
    return rm(f)->xSectorSize(real(f));
}
int x_device(sqlite3_file* f) {
    return rm(f)->xDeviceCharacteristics(real(f));
}
int x_shm_map(sqlite3_file* f, int pg, int size, int extend, void volatile** out) {
    return rm(f)->iVersion >= 2 ? rm(f)->xShmMap(real(f), pg, size, extend, out) : SQLITE_IOERR_SHMMAP;
}
int x_shm_lock(sqlite3_file* f, int off, int n, int flags) {
    return rm(f)->iVersion >= 2 ? rm(f)->xShmLock(real(f), off, n, flags) : SQLITE_IOERR_SHMLOCK;
}
void x_shm_barrier(sqlite3_file* f) {
    if (rm(f)->iVersion >= 2) rm(f)->xShmBarrier(real(f));
}
int x_shm_unmap(sqlite3_file* f, int del) {
    return rm(f)->iVersion >= 2 ? rm(f)->xShmUnmap(real(f), del) : SQLITE_OK;
}
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
    if (rm(f)->iVersion < 3) {
        *out = nullptr;
        return SQLITE_OK;
    }
    return rm(f)->xFetch(real(f), off, n, out);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
    return rm(f)->iVersion >= 3 ? rm(f)->xUnfetch(real(f), off, p) : SQLITE_OK;
}

const sqlite3_io_methods methods = {
    3,          x_close,       x_read,           x_write,        x_truncate,    x_sync,   x_file_size,
    x_lock,     x_unlock,      x_check_reserved, x_file_control, x_sector_size, x_device, x_shm_map,
    x_shm_lock, x_shm_barrier, x_shm_unmap,      x_fetch,        x_unfetch,
};

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
    file* p = self(f);
    p->base.pMethods = nullptr;  // until the real file is open: SQLite then calls no xClose
    p->real = reinterpret_cast<sqlite3_file*>(p + 1);
    p->wal = (flags & SQLITE_OPEN_WAL) != 0;
    new (&p->gathered) std::string();
    p->at = 0;
    p->name = nullptr;
    p->dev = p->ino = 0;
    p->synced = false;
    p->header = false;
    p->main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    const int rc = real_vfs()->xOpen(real_vfs(), name, p->real, flags, out_flags);
    if (rc != SQLITE_OK || p->real->pMethods == nullptr) {
        // A real file that failed may still need closing (SQLite's own rule).
        if (p->real->pMethods) p->real->pMethods->xClose(p->real);
        p->gathered.~basic_string();
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    // A WAL's path and identity, for the deferral to open descriptors of its
    // own (fdatasync flushes the file, whichever descriptor wrote it).
    // Without them, its syncs are never deferred.
    if (p->wal && name != nullptr) {
        struct stat st {};
        if (::stat(name, &st) == 0) {
            p->name = name;
            p->dev = static_cast<std::uint64_t>(st.st_dev);
            p->ino = static_cast<std::uint64_t>(st.st_ino);
        }
    }
    p->base.pMethods = &methods;
    return SQLITE_OK;
}

int x_delete(sqlite3_vfs*, const char* name, int sync) {
    return real_vfs()->xDelete(real_vfs(), name, sync);
}
int x_access(sqlite3_vfs*, const char* name, int flags, int* out) {
    return real_vfs()->xAccess(real_vfs(), name, flags, out);
}
int x_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
    return real_vfs()->xFullPathname(real_vfs(), name, n, out);
}
void* x_dl_open(sqlite3_vfs*, const char* name) {
    return real_vfs()->xDlOpen(real_vfs(), name);
}
void x_dl_error(sqlite3_vfs*, int n, char* out) {
    real_vfs()->xDlError(real_vfs(), n, out);
}
void (*x_dl_sym(sqlite3_vfs*, void* h, const char* sym))(void) {
    return real_vfs()->xDlSym(real_vfs(), h, sym);
}
void x_dl_close(sqlite3_vfs*, void* h) {
    real_vfs()->xDlClose(real_vfs(), h);
}
int x_randomness(sqlite3_vfs*, int n, char* out) {
    return real_vfs()->xRandomness(real_vfs(), n, out);
}
int x_sleep(sqlite3_vfs*, int us) {
    return real_vfs()->xSleep(real_vfs(), us);
}
int x_current_time(sqlite3_vfs*, double* out) {
    return real_vfs()->xCurrentTime(real_vfs(), out);
}
int x_last_error(sqlite3_vfs*, int n, char* out) {
    return real_vfs()->xGetLastError(real_vfs(), n, out);
}
int x_current_time64(sqlite3_vfs*, sqlite3_int64* out) {
    if (real_vfs()->iVersion >= 2 && real_vfs()->xCurrentTimeInt64)
        return real_vfs()->xCurrentTimeInt64(real_vfs(), out);
    double d = 0;
    const int rc = real_vfs()->xCurrentTime(real_vfs(), &d);
    *out = static_cast<sqlite3_int64>(d * 86400000.0);
    return rc;
}

}  // namespace

int take_last_io_errno() noexcept {
    return std::exchange(last_io_errno, 0);
}

int fdatasync_errno(int fd) noexcept {
    while (::fdatasync(fd) != 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}

wal_sync_deferral::~wal_sync_deferral() {
    if (fd_ >= 0) ::close(fd_);
    if (settle_fd_ >= 0) ::close(settle_fd_);
}

void wal_sync_deferral::fail(int err) noexcept {
    int none = 0;
    failed_errno_.compare_exchange_strong(none, err, std::memory_order_relaxed);
}

wal_sync_deferral* wal_sync_deferral::install(wal_sync_deferral* d) noexcept {
    wal_sync_deferral* was = deferral;
    deferral = d;
    return was;
}

const char* coalescing_wal_vfs() {
    static std::once_flag once;
    std::call_once(once, [] {
        static sqlite3_vfs vfs{};
        sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
        if (base == nullptr) throw std::runtime_error("SQLite has no default VFS");
        base_vfs = base;
        vfs.iVersion = 2;
        vfs.szOsFile = static_cast<int>(sizeof(file)) + base->szOsFile;
        vfs.mxPathname = base->mxPathname;
        vfs.zName = vfs_name;
        vfs.pAppData = base;
        vfs.xOpen = x_open;
        vfs.xDelete = x_delete;
        vfs.xAccess = x_access;
        vfs.xFullPathname = x_full_pathname;
        vfs.xDlOpen = x_dl_open;
        vfs.xDlError = x_dl_error;
        vfs.xDlSym = x_dl_sym;
        vfs.xDlClose = x_dl_close;
        vfs.xRandomness = x_randomness;
        vfs.xSleep = x_sleep;
        vfs.xCurrentTime = x_current_time;
        vfs.xGetLastError = x_last_error;
        vfs.xCurrentTimeInt64 = x_current_time64;
        if (const int rc = sqlite3_vfs_register(&vfs, 0); rc != SQLITE_OK)
            throw std::runtime_error(std::string("cannot register SQLite VFS ") + vfs_name + ": " + sqlite3_errstr(rc));
    });
    return vfs_name;
}

wal_vfs_stats coalescing_wal_vfs_stats() {
    wal_vfs_stats s;
    s.writes_asked = writes_asked.load(std::memory_order_relaxed);
    s.writes_issued = writes_issued.load(std::memory_order_relaxed);
    s.syncs_deferred = syncs_deferred.load(std::memory_order_relaxed);
    s.syncs_done = syncs_done.load(std::memory_order_relaxed);
    s.settles = settles.load(std::memory_order_relaxed);
    return s;
}

}  // namespace steadfast::app
