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
#pragma once

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
};
wal_vfs_stats coalescing_wal_vfs_stats();

}  // namespace steadfast::app
