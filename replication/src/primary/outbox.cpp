#include "outbox.hpp"

#include "../common/log.hpp"
#include "../common/random_id.hpp"

#include <steadfast/replication/envelope.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace steadfast::primary {

namespace {
// Whether `table` has `column` (an outbox of an older version may lack it).
// The statement is finalized on return: one left open would lock the schema
// against the ALTER TABLE that may follow.
bool has_column(app::database& db, std::string_view table, std::string_view column) {
    auto q = db.prepare("SELECT count(*) FROM pragma_table_info(?) WHERE name=?");
    q.bind(1, table).bind(2, column);
    return q.step() && q.column_int(0) != 0;
}
}  // namespace

// The outbox's tables, made or brought up to date (idempotent).
void outbox::prepare_tables(app::database& db) {
    db.exec(
        "CREATE TABLE IF NOT EXISTS streams(stream TEXT PRIMARY KEY, next_seq INTEGER NOT NULL, "
        "acked_seq INTEGER NOT NULL)");
    db.exec(
        "CREATE TABLE IF NOT EXISTS outbox(stream TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, "
        "payload TEXT NOT NULL, at_ms INTEGER NOT NULL, PRIMARY KEY(stream, seq)) WITHOUT ROWID");
    // The newest small messages in arrival order, until folded into outbox
    // (outbox.hpp). No index: it stays small, and a read scans it.
    db.exec(
        "CREATE TABLE IF NOT EXISTS outbox_tail(n INTEGER PRIMARY KEY, stream TEXT NOT NULL, seq INTEGER NOT NULL, "
        "id TEXT NOT NULL, payload TEXT NOT NULL, at_ms INTEGER NOT NULL)");
    // When messages were acknowledged, for --retain: one mark per stream and
    // second ("everything up to `upto` was acknowledged by `at_ms`; the mark
    // was started at `from_ms`"), not a time on every row, so that
    // acknowledging writes one small row instead of rewriting every message
    // (and an index entry for each).
    db.exec(
        "CREATE TABLE IF NOT EXISTS acks(stream TEXT NOT NULL, upto INTEGER NOT NULL, from_ms INTEGER NOT NULL, "
        "at_ms INTEGER NOT NULL, PRIMARY KEY(stream, upto)) WITHOUT ROWID");
    {
        // An outbox written before the marks kept a time on every
        // acknowledged row (column acked_ms, index outbox_acked): one mark a
        // stream keeps them for --retain from the latest of those times.
        bool old_layout = false;
        {
            auto idx = db.prepare(
                "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='outbox_acked' AND "
                "tbl_name='outbox'");
            old_layout = idx.step() && idx.column_int(0) != 0;
        }  // finalized: a statement still open would lock the schema against DROP INDEX
        if (old_layout) {
            db.exec("SAVEPOINT migrate_acks");
            db.exec(
                "INSERT OR REPLACE INTO acks(stream, upto, from_ms, at_ms) SELECT stream, max(seq), max(acked_ms), "
                "max(acked_ms) "
                "FROM outbox WHERE acked_ms IS NOT NULL GROUP BY stream");
            db.exec("DROP INDEX outbox_acked");
            db.exec("RELEASE migrate_acks");
        }
    }
    db.exec(
        "CREATE TABLE IF NOT EXISTS schedule(stream TEXT PRIMARY KEY, attempts INTEGER NOT NULL, "
        "next_at_ms INTEGER NOT NULL, head_seq INTEGER NOT NULL DEFAULT 0)");
    // A schedule of a version that did not record its head: such a row
    // (head_seq 0) ends at the stream's next acknowledgement, as it did then.
    if (!has_column(db, "schedule", "head_seq"))
        db.exec("ALTER TABLE schedule ADD COLUMN head_seq INTEGER NOT NULL DEFAULT 0");
    db.exec(
        "CREATE TABLE IF NOT EXISTS dead_letter(n INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, "
        "seq INTEGER NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, reason TEXT NOT NULL, at_ms INTEGER NOT NULL, "
        "requeued_seq INTEGER, requeued_ms INTEGER)");
    {
        // Dead letters of a version without requeue: add its columns.
        if (!has_column(db, "dead_letter", "requeued_seq")) {
            db.exec("ALTER TABLE dead_letter ADD COLUMN requeued_seq INTEGER");
            db.exec("ALTER TABLE dead_letter ADD COLUMN requeued_ms INTEGER");
        }
    }
    db.exec(
        "CREATE TABLE IF NOT EXISTS blocked(stream TEXT PRIMARY KEY, reason TEXT NOT NULL, at_ms INTEGER NOT NULL)");
    // Publishers' Idempotency-Keys (publish_once), with a digest of the
    // stream and payload they were first used for; purged with their
    // messages (by stream and seq: publish_keys_stream).
    db.exec(
        "CREATE TABLE IF NOT EXISTS publish_keys(key TEXT PRIMARY KEY, stream TEXT NOT NULL, seq INTEGER NOT NULL, "
        "id TEXT NOT NULL, digest INTEGER NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID");
    db.exec("CREATE INDEX IF NOT EXISTS publish_keys_at ON publish_keys(at_ms)");
    db.exec("CREATE INDEX IF NOT EXISTS publish_keys_stream ON publish_keys(stream, seq)");
}

outbox::outbox(app::database& db) : db_(db) {
    if (db.read_only()) {
        // status and dead-letters beside a running primary: read what is there.
        auto get = db.prepare("SELECT value FROM meta WHERE key='instance'");
        if (get.step()) instance_ = std::string(get.column_text(0));
        requeue_columns_ = has_column(db, "dead_letter", "requeued_seq");
        auto t = db.prepare("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='outbox_tail'");
        has_tail_ = t.step() && t.column_int(0) != 0;
        return;
    }
    prepare_tables(db);
    requeue_columns_ = true;
    has_tail_ = true;
    {
        auto t = db.prepare("SELECT count(*), coalesce(sum(length(CAST(payload AS BLOB))), 0) FROM outbox_tail");
        if (t.step()) {
            tail_rows_ = static_cast<std::size_t>(t.column_int(0));
            tail_bytes_ = static_cast<std::size_t>(t.column_int(1));
        }
    }
    auto get = db.prepare("SELECT value FROM meta WHERE key='instance'");
    if (get.step()) {
        instance_ = std::string(get.column_text(0));
    } else {
        instance_ = app::random_hex(12);
        auto put = db.prepare("INSERT INTO meta(key, value) VALUES('instance', ?)");
        put.bind(1, instance_);
        put.step();
    }
}

std::string to_json(const dead_letter_row& d) {
    nlohmann::json j = {{"n", d.n},   {"stream", d.stream}, {"seq", d.seq},
                        {"id", d.id}, {"reason", d.reason}, {"at_ms", d.at_ms}};
    if (d.requeued_seq) {
        j["requeued_seq"] = *d.requeued_seq;
        j["requeued_ms"] = d.requeued_ms;
    }
    // Reasons may hold any bytes a secondary sent: never fail on them.
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line.pop_back();
    line += ",\"payload\":";
    const std::size_t at = line.size();
    line += d.payload;
    // Raw line breaks in a JSON text are whitespace between tokens (inside a
    // string they are escaped): spaces keep it one line and the same JSON.
    for (std::size_t i = at; i < line.size(); ++i)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line += '}';
    return line;
}

std::string outbox::make_id(std::string_view instance, std::string_view stream, std::uint64_t seq) {
    std::string id;
    id.reserve(instance.size() + stream.size() + 22);
    id += instance;
    id += '-';
    id += stream;
    id += '-';
    id += std::to_string(seq);
    return id;
}

app::statement& outbox::stmt(std::optional<app::statement>& s, std::string_view sql) {
    if (!s) s.emplace(db_.handle(), sql);
    s->reset();
    return *s;
}

std::vector<published> outbox::publish(const std::vector<std::pair<std::string, std::string>>& items,
                                       std::int64_t now_ms, bool each_alone) {
    std::vector<published> out;
    out.reserve(items.size());
    // Next seqs are read in this transaction and written back in it: when the
    // commit fails, no seq was taken.
    std::map<std::string, std::uint64_t, std::less<>> next;
    for (const auto& [stream, payload] : items) {
        auto it = next.find(stream);
        if (it == next.end()) {
            auto& g = stmt(get_next_, "SELECT next_seq FROM streams WHERE stream=?");
            g.bind(1, stream);
            const std::uint64_t n = g.step() ? static_cast<std::uint64_t>(g.column_int(0)) : 1;
            g.reset();
            it = next.emplace(stream, n).first;
        }
        const std::uint64_t seq = it->second;
        published p{stream, seq, make_id(instance_, stream, seq)};
        const bool to_tail = (each_alone || items.size() <= tail_batch_max) && payload.size() <= tail_payload_max;
        auto& ins =
            to_tail ? stmt(insert_tail_, "INSERT INTO outbox_tail(stream, seq, id, payload, at_ms) VALUES(?,?,?,?,?)")
                    : stmt(insert_, "INSERT INTO outbox(stream, seq, id, payload, at_ms) VALUES(?,?,?,?,?)");
        ins.bind(1, stream).bind(2, static_cast<std::int64_t>(seq)).bind(3, p.id).bind(4, payload).bind(5, now_ms);
        ins.step();
        if (to_tail) {
            ++tail_rows_;
            tail_bytes_ += payload.size();
        }
        it->second = seq + 1;
        out.push_back(std::move(p));
    }
    auto& up = stmt(put_stream_,
                    "INSERT INTO streams(stream, next_seq, acked_seq) VALUES(?,?,0) "
                    "ON CONFLICT(stream) DO UPDATE SET next_seq=excluded.next_seq");
    for (const auto& [stream, n] : next) {
        up.reset();
        up.bind(1, stream).bind(2, static_cast<std::int64_t>(n));
        up.step();
    }
    if (tail_rows_ >= fold_at_rows_ || tail_bytes_ >= fold_at_bytes_) fold();
    return out;
}

std::optional<std::uint64_t> outbox::fold() {
    if (!has_tail_) return 0;
    std::uint64_t moved = 0;
    db_.exec("SAVEPOINT fold");
    try {
        auto& m = stmt(fold_move_,
                       "INSERT INTO outbox(stream, seq, id, payload, at_ms) "
                       "SELECT stream, seq, id, payload, at_ms FROM outbox_tail ORDER BY n");
        m.step();
        moved = static_cast<std::uint64_t>(sqlite3_changes(db_.handle()));
        auto& c = stmt(fold_clear_, "DELETE FROM outbox_tail");
        c.step();
        db_.exec("RELEASE fold");
    } catch (const app::db_error& e) {
        // Tried again after as many messages (or bytes) more, not at every
        // publish (nor at every purge: see purge()); logged each time.
        fold_failures_.fetch_add(1, std::memory_order_relaxed);
        fold_at_rows_ = tail_rows_ + fold_rows;
        fold_at_bytes_ = tail_bytes_ + fold_bytes;
        purges_since_failure_ = 0;
        failing_ = true;
        app::log(app::level::error, "fold_failed",
                 {{"error", e.what()},
                  {"tail", tail_rows_},
                  {"note",
                   "the outbox's newest messages stay in its tail (read and delivered as usual), and "
                   "nothing is purged; the fold is tried again after 2,048 messages or 256 KiB more, at every "
                   "tenth purge, and at a stop"}});
        // SQLite may have rolled back the whole transaction (a full disk or
        // temporary directory can): no savepoint is left, and the failure is
        // the transaction's, with SQLite's own code.
        if (sqlite3_get_autocommit(db_.handle())) throw;
        db_.exec("ROLLBACK TO fold");
        db_.exec("RELEASE fold");
        return std::nullopt;
    }
    tail_rows_ = tail_bytes_ = 0;
    fold_at_rows_ = fold_rows;
    fold_at_bytes_ = fold_bytes;
    failing_ = false;
    return moved;
}

namespace {
// FNV-1a, 64 bits: the same on every run and machine (a key outlives the process).
std::int64_t digest(std::string_view stream, std::string_view payload) {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::string_view bytes) {
        for (unsigned char c : bytes) {
            h ^= c;
            h *= 1099511628211ull;
        }
    };
    mix(stream);
    mix(std::string_view("\0", 1));  // "ab"+"c" and "a"+"bc" differ
    mix(payload);
    return static_cast<std::int64_t>(h);
}
}  // namespace

keyed_publish outbox::publish_once(const std::string& key, const std::string& stream, const std::string& payload,
                                   std::int64_t now_ms) {
    keyed_publish r;
    const std::int64_t d = digest(stream, payload);
    {
        auto& g = stmt(get_key_, "SELECT stream, seq, id, digest FROM publish_keys WHERE key=?");
        g.bind(1, key);
        if (g.step()) {
            r.p = {std::string(g.column_text(0)), static_cast<std::uint64_t>(g.column_int(1)),
                   std::string(g.column_text(2))};
            r.what = g.column_int(3) == d ? keyed_publish::status::replayed : keyed_publish::status::conflict;
            g.reset();
            return r;
        }
        g.reset();
    }
    r.p = publish({{stream, payload}}, now_ms).front();
    auto& k = stmt(put_key_, "INSERT INTO publish_keys(key, stream, seq, id, digest, at_ms) VALUES(?,?,?,?,?,?)");
    k.bind(1, key)
        .bind(2, stream)
        .bind(3, static_cast<std::int64_t>(r.p.seq))
        .bind(4, r.p.id)
        .bind(5, d)
        .bind(6, now_ms);
    k.step();
    return r;
}

std::vector<pending_message> outbox::pending(const std::string& stream, std::uint64_t after, std::size_t max_count,
                                             std::size_t max_bytes) {
    // Both tables in seq order, merged: a stream's messages may be in either.
    auto& a = stmt(select_, "SELECT seq, id, payload, at_ms FROM outbox WHERE stream=? AND seq>? ORDER BY seq LIMIT ?");
    a.bind(1, stream).bind(2, static_cast<std::int64_t>(after)).bind(3, static_cast<std::int64_t>(max_count));
    app::statement* b = nullptr;
    if (has_tail_) {
        b = &stmt(select_tail_,
                  "SELECT seq, id, payload, at_ms FROM outbox_tail WHERE stream=? AND seq>? ORDER BY seq LIMIT ?");
        b->bind(1, stream).bind(2, static_cast<std::int64_t>(after)).bind(3, static_cast<std::int64_t>(max_count));
    }
    bool in_a = a.step(), in_b = b && b->step();
    std::vector<pending_message> out;
    std::size_t bytes = 0;
    while ((in_a || in_b) && out.size() < max_count) {
        const bool from_a = in_a && (!in_b || a.column_int(0) <= b->column_int(0));
        app::statement& s = from_a ? a : *b;
        pending_message m{static_cast<std::uint64_t>(s.column_int(0)), std::string(s.column_text(1)),
                          std::string(s.column_text(2)), s.column_int(3)};
        bytes += m.payload.size() + m.id.size() + 64;
        if (!out.empty() && bytes > max_bytes) break;
        if (from_a && in_b && b->column_int(0) == a.column_int(0)) in_b = b->step();  // never twice
        out.push_back(std::move(m));
        if (from_a)
            in_a = a.step();
        else
            in_b = b->step();
    }
    a.reset();
    if (b) b->reset();
    return out;
}

void outbox::acknowledge(const std::string& stream, std::uint64_t seq, std::uint64_t head_acked, std::int64_t now_ms) {
    auto& a = stmt(ack_, "UPDATE streams SET acked_seq=?1 WHERE stream=?2 AND acked_seq<?1");
    a.bind(1, static_cast<std::int64_t>(seq)).bind(2, stream);
    a.step();
    if (sqlite3_changes(db_.handle()) != 0) {
        // New acknowledgements: move forward the stream's mark started in
        // the last second (its time too, so that nothing goes before
        // --retain), or start a new mark.
        auto& m = stmt(ack_move_,
                       "UPDATE acks SET upto=?1, at_ms=?3 WHERE stream=?2 AND from_ms>?3-1000 AND "
                       "upto=(SELECT max(upto) FROM acks WHERE stream=?2)");
        m.bind(1, static_cast<std::int64_t>(seq)).bind(2, stream).bind(3, now_ms);
        m.step();
        if (sqlite3_changes(db_.handle()) == 0) {
            auto& i = stmt(ack_mark_, "INSERT OR REPLACE INTO acks(stream, upto, from_ms, at_ms) VALUES(?1,?2,?3,?3)");
            i.bind(1, stream).bind(2, static_cast<std::int64_t>(seq)).bind(3, now_ms);
            i.step();
        }
    }
    // Only a schedule of a head this acknowledgement covers: one written
    // since, for the next head, is that head's ladder.
    auto& c = stmt(del_sched_acked_, "DELETE FROM schedule WHERE stream=? AND head_seq<=?");
    c.bind(1, stream).bind(2, static_cast<std::int64_t>(head_acked));
    c.step();
}

std::uint64_t outbox::purge(std::int64_t cutoff_ms) {
    // Per stream, everything up to its newest mark at or before the cutoff.
    std::vector<std::pair<std::string, std::int64_t>> upto;
    {
        auto& q = stmt(purge_marks_, "SELECT stream, max(upto) FROM acks WHERE at_ms<=? GROUP BY stream");
        q.bind(1, cutoff_ms);
        while (q.step()) upto.emplace_back(std::string(q.column_text(0)), q.column_int(1));
        q.reset();
    }
    // The tail first: what it holds is then in outbox, where a stream's
    // messages are deleted by range. If it cannot fold, nothing goes this
    // time: deleting the outbox's range alone would leave retained messages
    // with holes (a stream's messages may be in both tables). After a failed
    // fold, only every tenth purge tries again: a fold SQLite gives up with
    // its whole transaction (a full temporary directory) fails the
    // publishes grouped with it, which a short --retain would do every
    // 100 ms.
    if (failing_ && ++purges_since_failure_ % 10 != 0) return 0;
    if (!fold()) return 0;
    std::uint64_t n = 0;
    auto& d = stmt(purge_, "DELETE FROM outbox WHERE stream=? AND seq<=?");
    // A key goes with its message: a publisher retrying through a long
    // outage of the secondary still finds the first message, not a second
    // copy. (Only rows that go are read.)
    auto& k = stmt(purge_keys_, "DELETE FROM publish_keys WHERE stream=? AND seq<=?");
    for (const auto& [stream, seq] : upto) {
        d.reset();
        d.bind(1, stream).bind(2, seq);
        d.step();
        n += static_cast<std::uint64_t>(sqlite3_changes(db_.handle()));
        k.reset();
        k.bind(1, stream).bind(2, seq);
        k.step();
    }
    auto& m = stmt(purge_done_, "DELETE FROM acks WHERE at_ms<=?");
    m.bind(1, cutoff_ms);
    m.step();
    return n;
}

std::map<std::string, std::uint64_t> outbox::recently_acknowledged() {
    std::map<std::string, std::uint64_t> out;
    auto q = db_.prepare("SELECT stream, max(upto) FROM acks GROUP BY stream");
    while (q.step()) out[std::string(q.column_text(0))] = static_cast<std::uint64_t>(q.column_int(1));
    return out;
}

std::optional<std::uint64_t> outbox::oldest_seq(const std::string& stream) {
    // The lower of the two tables' (a stream's messages may be in either).
    std::optional<std::uint64_t> r;
    auto lowest = [&](std::optional<app::statement>& q, std::string_view sql) {
        auto& o = stmt(q, sql);
        o.bind(1, stream);
        if (o.step() && !o.column_null(0))
            r = std::min(r.value_or(UINT64_MAX), static_cast<std::uint64_t>(o.column_int(0)));
        o.reset();
    };
    lowest(oldest_, "SELECT min(seq) FROM outbox WHERE stream=?");
    if (has_tail_) lowest(oldest_tail_, "SELECT min(seq) FROM outbox_tail WHERE stream=?");
    return r;
}

void outbox::dead_letter(const std::string& stream, const pending_message& m, const std::string& reason,
                         std::int64_t now_ms) {
    auto& i = stmt(dl_insert_, "INSERT INTO dead_letter(stream, seq, id, payload, reason, at_ms) VALUES(?,?,?,?,?,?)");
    i.bind(1, stream)
        .bind(2, static_cast<std::int64_t>(m.seq))
        .bind(3, m.id)
        .bind(4, m.payload)
        .bind(5, reason)
        .bind(6, now_ms);
    i.step();
    // In whichever table holds it.
    const std::string tombstone = envelope::encode_tombstone(m.id, reason);
    auto bury = [&](std::optional<app::statement>& q, std::string_view sql) {
        stmt(q, sql).bind(1, tombstone).bind(2, stream).bind(3, static_cast<std::int64_t>(m.seq)).step();
    };
    bury(tombstone_, "UPDATE outbox SET payload=? WHERE stream=? AND seq=?");
    if (has_tail_) bury(tombstone_tail_, "UPDATE outbox_tail SET payload=? WHERE stream=? AND seq=?");
    auto& c = stmt(del_sched_, "DELETE FROM schedule WHERE stream=?");
    c.bind(1, stream);
    c.step();
}

void outbox::clear_schedule(const std::string& stream) {
    auto& c = stmt(del_sched_, "DELETE FROM schedule WHERE stream=?");
    c.bind(1, stream);
    c.step();
}

schedule outbox::get_schedule(const std::string& stream) {
    auto& g = stmt(get_sched_, "SELECT attempts, next_at_ms, head_seq FROM schedule WHERE stream=?");
    g.bind(1, stream);
    schedule s;
    if (g.step())
        s = {static_cast<std::uint32_t>(g.column_int(0)), g.column_int(1), static_cast<std::uint64_t>(g.column_int(2))};
    g.reset();
    return s;
}

void outbox::set_schedule(const std::string& stream, const schedule& s) {
    auto& p = stmt(put_sched_,
                   "INSERT INTO schedule(stream, attempts, next_at_ms, head_seq) VALUES(?,?,?,?) "
                   "ON CONFLICT(stream) DO UPDATE SET attempts=excluded.attempts, next_at_ms=excluded.next_at_ms, "
                   "head_seq=excluded.head_seq");
    p.bind(1, stream)
        .bind(2, static_cast<std::int64_t>(s.attempts))
        .bind(3, s.next_at_ms)
        .bind(4, static_cast<std::int64_t>(s.head_seq));
    p.step();
}

void outbox::set_blocked(const std::string& stream, const std::string& reason, std::int64_t now_ms) {
    auto& p = stmt(put_blocked_, "INSERT OR REPLACE INTO blocked(stream, reason, at_ms) VALUES(?,?,?)");
    p.bind(1, stream).bind(2, reason).bind(3, now_ms);
    p.step();
}

void outbox::clear_blocked() {
    db_.exec("DELETE FROM blocked");
}

stream_status outbox::position(const std::string& stream) {
    auto& p = stmt(position_, "SELECT next_seq, acked_seq FROM streams WHERE stream=?");
    p.bind(1, stream);
    stream_status s;
    if (p.step()) s = {static_cast<std::uint64_t>(p.column_int(0)), static_cast<std::uint64_t>(p.column_int(1)), 0};
    p.reset();
    return s;
}

std::map<std::string, stream_status> outbox::status() {
    std::map<std::string, stream_status> out;
    auto s = db_.prepare("SELECT stream, next_seq, acked_seq FROM streams");
    while (s.step())
        out[std::string(s.column_text(0))] = {static_cast<std::uint64_t>(s.column_int(1)),
                                              static_cast<std::uint64_t>(s.column_int(2)), 0};
    for (std::string_view table : {"outbox", "outbox_tail"}) {
        if (table == "outbox_tail" && !has_tail_) break;
        auto p = db_.prepare("SELECT o.stream, count(*) FROM " + std::string(table) +
                             " o JOIN streams s ON s.stream=o.stream WHERE o.seq>s.acked_seq GROUP BY o.stream");
        while (p.step()) out[std::string(p.column_text(0))].pending += static_cast<std::uint64_t>(p.column_int(1));
    }
    return out;
}

std::map<std::string, std::string> outbox::blocked() {
    std::map<std::string, std::string> out;
    auto s = db_.prepare("SELECT stream, reason FROM blocked");
    while (s.step()) out[std::string(s.column_text(0))] = std::string(s.column_text(1));
    return out;
}

std::uint64_t outbox::dead_letter_count() {
    auto s = db_.prepare("SELECT count(*) FROM dead_letter");
    s.step();
    return static_cast<std::uint64_t>(s.column_int(0));
}

std::vector<dead_letter_row> outbox::dead_letters() {
    return dead_letters(0, SIZE_MAX, SIZE_MAX).rows;
}

dead_letter_page outbox::dead_letters(std::int64_t after, std::size_t limit, std::size_t max_bytes) {
    dead_letter_page page;
    auto& out = page.rows;
    std::size_t bytes = 0;
    auto s = db_.prepare(requeue_columns_ ? "SELECT n, stream, seq, id, payload, reason, at_ms, requeued_seq, "
                                            "requeued_ms FROM dead_letter WHERE n>? ORDER BY n"
                                          : "SELECT n, stream, seq, id, payload, reason, at_ms, NULL, NULL FROM "
                                            "dead_letter WHERE n>? ORDER BY n");
    s.bind(1, after);
    while (s.step()) {
        if (out.size() >= limit || bytes >= max_bytes) {
            page.more = true;
            break;
        }
        dead_letter_row r;
        r.n = s.column_int(0);
        r.stream = std::string(s.column_text(1));
        r.seq = static_cast<std::uint64_t>(s.column_int(2));
        r.id = std::string(s.column_text(3));
        r.payload = std::string(s.column_text(4));
        r.reason = std::string(s.column_text(5));
        r.at_ms = s.column_int(6);
        if (!s.column_null(7)) {
            r.requeued_seq = static_cast<std::uint64_t>(s.column_int(7));
            r.requeued_ms = s.column_int(8);
        }
        bytes += r.payload.size() + r.reason.size();
        out.push_back(std::move(r));
    }
    return page;
}

requeue_result outbox::requeue(std::int64_t n, std::int64_t now_ms) {
    requeue_result r;
    std::string stream, payload;
    {
        auto s = db_.prepare("SELECT stream, payload, requeued_seq FROM dead_letter WHERE n=?");
        s.bind(1, n);
        if (!s.step()) {
            r.what = requeue_result::status::not_found;
            return r;
        }
        if (!s.column_null(2)) {
            r.what = requeue_result::status::already;
            r.p = {std::string(s.column_text(0)), static_cast<std::uint64_t>(s.column_int(2)), {}};
            return r;
        }
        stream = std::string(s.column_text(0));
        payload = std::string(s.column_text(1));
    }
    // A new message at the end of its stream (a new seq and id), in this
    // transaction together with the mark, so that it happens once.
    r.p = publish({{stream, payload}}, now_ms).front();
    auto u = db_.prepare("UPDATE dead_letter SET requeued_seq=?, requeued_ms=? WHERE n=?");
    u.bind(1, static_cast<std::int64_t>(r.p.seq)).bind(2, now_ms).bind(3, n);
    u.step();
    r.what = requeue_result::status::requeued;
    return r;
}

}  // namespace steadfast::primary
