// A SQLite VFS over the platform's own that writes each transaction's WAL
// frames with one write instead of two a page.
//
// SQLite appends a commit to the WAL one frame at a time (a 24-byte header and
// then the page, two pwrite calls each) and then syncs it. A group commit of
// 16 publishes over 16 streams dirties a leaf page a stream: about 27 writes,
// each a system call that costs 8-15 us on these virtual machines, against one
// fdatasync. This VFS gathers a WAL file's consecutive writes in memory and
// hands them to the real file in one write (in pieces of 124 KiB, the most
// the Unix VFS takes at once) before anything depends on them: before a sync,
// a read, a truncate, a size query or a close of that file.
//
// Why that keeps SQLite's guarantees, with synchronous=FULL (the only mode the
// apps open it in): SQLite writes a commit's frames, syncs the WAL, and only
// then publishes the new last frame in the shared index that readers use; the
// sync flushes first, so no reader (status and dump, in other processes) is
// told of a frame the file lacks, and the on-disk order is SQLite's own (all
// frames, then the sync). A process killed mid-flush leaves a torn tail
// without a commit frame, which recovery ignores as it ignores SQLite's own
// torn writes. A failed flush (a full disk) at the sync fails the commit
// (the caller rolls back: db_worker does); anywhere else it is an
// SQLITE_IOERR_WRITE, which makes SQLite roll the whole transaction back.
// Either way the gathered frames are dropped with the transaction. After a
// ROLLBACK TO, the frames SQLite undid are cut from what is gathered, never
// written. It assumes one writing connection per database (the apps' data
// directory lock makes sure): gathered frames are not visible to another.
// Other files (the database, its shared-memory index) pass straight through.
//
// Deferred syncs (wal_sync_deferral, for db_worker): on a thread that has
// installed one, a WAL sync (a commit's) writes the gathered frames as usual
// but leaves the fdatasync to the deferral's owner, who flushes the file on
// another thread while the next transaction runs, and answers nobody about
// the commit before that flush returns. SQLite then publishes the commit to
// readers before it is on disk; the process's own answers still wait for it.
// Crash safety stays SQLite's own: before anything is written to a database
// file on that thread (only a checkpoint does, copying WAL frames into it),
// the deferred syncs are done there and then (once), so no frame reaches the
// database file before it is on disk in the WAL. Two syncs are never
// deferred: a WAL's first (the platform VFS also syncs the directory then,
// which makes the file's name durable) and the one after a header written
// anew (a log restarted after a checkpoint: SQLite makes the new salts
// durable before new frames overwrite old ones).
#pragma once

#include <atomic>
#include <cstdint>

namespace steadfast::app {

/// The VFS's name, registered (not as the default) on the first call; give
/// it to sqlite3_open_v2. Thread-safe.
const char* coalescing_wal_vfs();

/// Process-wide counts, for tests and benchmarks: writes SQLite asked for on
/// WAL files of this VFS, and writes that reached the files.
struct wal_vfs_stats {
    std::uint64_t writes_asked = 0;
    std::uint64_t writes_issued = 0;
    std::uint64_t syncs_deferred = 0;  // WAL syncs left to a deferral's owner
    std::uint64_t syncs_done = 0;      // WAL syncs done at once (SQLite's own)
    std::uint64_t settles = 0;         // deferred syncs done before a database file write
};
wal_vfs_stats coalescing_wal_vfs_stats();

/// The errno of the last read, write, truncate or sync through this VFS that
/// failed on this thread (0: none since the last call), and forgets it: the
/// cause SQLite's "disk I/O error" does not name (a file-size limit, EIO).
int take_last_io_errno() noexcept;

/// fdatasync(2), again after EINTR: 0, or the errno of its failure.
int fdatasync_errno(int fd) noexcept;

/// While installed on a thread, WAL syncs made on that thread (through this
/// VFS) are written but not flushed: the deferral keeps a descriptor of the
/// WAL file and `owed` says a flush is due. One WAL file per deferral: a sync
/// of another file is done at once, as without one.
class wal_sync_deferral {
public:
    wal_sync_deferral() = default;
    ~wal_sync_deferral();  // closes the descriptor
    wal_sync_deferral(const wal_sync_deferral&) = delete;
    wal_sync_deferral& operator=(const wal_sync_deferral&) = delete;

    /// Installs this deferral on the calling thread (nullptr: none), returning
    /// the one it replaces.
    static wal_sync_deferral* install(wal_sync_deferral* d) noexcept;
    /// True when a sync was deferred since the last take_owed().
    bool owed() const noexcept { return owed_; }
    /// Clears owed() and answers whether it was set.
    bool take_owed() noexcept {
        const bool o = owed_;
        owed_ = false;
        return o;
    }
    /// The WAL file's descriptor to flush (fdatasync), -1 before the first
    /// deferred sync. Any thread may flush it; the deferral keeps it open.
    int fd() const noexcept { return fd_; }
    /// Not 0 once a flush done before a database file write failed (its
    /// errno): from then on every such write fails, and the owner must treat
    /// what was committed since its last good flush as lost.
    int failed_errno() const noexcept { return failed_errno_.load(std::memory_order_relaxed); }
    /// Records a failed flush of the owner's own (the first errno stays):
    /// the flushes before database writes refuse from then on.
    void fail(int err) noexcept;

private:
    friend struct wal_sync_access;
    int fd_ = -1;                      // the owner's (flusher's)
    int settle_fd_ = -1;               // the installing thread's, for flushes before database writes
    std::uint64_t dev_ = 0, ino_ = 0;  // the WAL file whose syncs it takes (set with fd_)
    bool owed_ = false;                // a sync deferred since take_owed()
    bool unsettled_ = false;           // a sync deferred since the last settle
    std::atomic<int> failed_errno_{0};
};

}  // namespace steadfast::app
