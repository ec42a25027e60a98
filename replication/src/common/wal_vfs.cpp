#include "wal_vfs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

namespace steadfast::app {
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

// The file SQLite holds: ours first, then the real VFS's file in the same block.
struct file {
    sqlite3_file base;     // base.pMethods: ours
    sqlite3_file* real;    // the platform VFS's file, right after this struct
    bool wal;              // gather writes (a WAL file) or pass through
    std::string gathered;  // consecutive bytes not yet written ...
    sqlite3_int64 at = 0;  // ... starting at this offset
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

// Writes what was gathered; whatever the outcome, forgets it (after a
// failure SQLite rewrites its frames, at the same offsets).
int flush(sqlite3_file* f) {
    file* p = self(f);
    int rc = SQLITE_OK;
    for (std::size_t done = 0; done < p->gathered.size() && rc == SQLITE_OK; done += max_write) {
        const std::size_t n = std::min(max_write, p->gathered.size() - done);
        writes_issued.fetch_add(1, std::memory_order_relaxed);
        rc = rm(f)->xWrite(p->real, p->gathered.data() + done, static_cast<int>(n),
                           p->at + static_cast<sqlite3_int64>(done));
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
    return rm(f)->xRead(real(f), out, n, off);
}
int x_write(sqlite3_file* f, const void* data, int n, sqlite3_int64 off) {
    file* p = self(f);
    if (!p->wal) return rm(f)->xWrite(p->real, data, n, off);
    writes_asked.fetch_add(1, std::memory_order_relaxed);
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
    if (const int rc = flush_mid(f); rc != SQLITE_OK) return rc;
    return rm(f)->xTruncate(real(f), size);
}
int x_sync(sqlite3_file* f, int flags) {
    if (const int rc = flush(f); rc != SQLITE_OK) return rc;
    return rm(f)->xSync(real(f), flags);
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
    const int rc = real_vfs()->xOpen(real_vfs(), name, p->real, flags, out_flags);
    if (rc != SQLITE_OK || p->real->pMethods == nullptr) {
        // A real file that failed may still need closing (SQLite's own rule).
        if (p->real->pMethods) p->real->pMethods->xClose(p->real);
        p->gathered.~basic_string();
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
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
    return {writes_asked.load(std::memory_order_relaxed), writes_issued.load(std::memory_order_relaxed)};
}

}  // namespace steadfast::app
