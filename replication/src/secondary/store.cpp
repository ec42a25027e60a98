#include "store.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace steadfast::secondary {

store::store(app::database& db) : db_(db) {
    db.exec(
        "CREATE TABLE IF NOT EXISTS streams(stream TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, "
        "max_epoch INTEGER NOT NULL)");
    db.exec(
        "CREATE TABLE IF NOT EXISTS applied(n INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, "
        "seq INTEGER NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, UNIQUE(stream, seq))");
    // One fence for the whole secondary. A store of the first version kept an
    // epoch per stream: the highest of them becomes the fence.
    db.exec(
        "INSERT OR IGNORE INTO meta(key, value) "
        "SELECT 'epoch_fence', CAST(coalesce(max(max_epoch), 0) AS TEXT) FROM streams");
}

app::statement& store::stmt(std::optional<app::statement>& s, std::string_view sql) {
    if (!s) s.emplace(db_.handle(), sql);
    s->reset();
    return *s;
}

store::position& store::position_of(positions& ps, std::string_view stream) {
    auto it = ps.find(stream);
    if (it != ps.end()) return it->second;
    auto& sel = stmt(sel_stream_, "SELECT last_seq, max_epoch FROM streams WHERE stream=?");
    sel.bind(1, stream);
    position p;
    if (sel.step()) p = {static_cast<std::uint64_t>(sel.column_int(0)), static_cast<std::uint64_t>(sel.column_int(1))};
    sel.reset();
    return ps.emplace(stream, p).first->second;
}

// The application's handler on `m`, once: throws db_error when it fails
// (db_apply_failed: its own failure, or a statement of its refused or
// ending the transaction; SQLite's code: the storage's).
void store::run_handler(const envelope::message& m) {
    // (Built only when something failed: not on every message's path.)
    auto where = [&] {
        return "the application's apply handler on stream " + m.stream + " seq " + std::to_string(m.seq);
    };
    // Its COMMIT, ROLLBACK or RELEASE of the node's savepoint is
    // refused when prepared, and fails the message (retried).
    const app::program_code_guard guard(db_, own_tables);
    // The failure as the handler's own: it ended the transaction, or a
    // statement of its was refused (`storage_ok`: and the storage did not
    // fail under it). `detail`: what it threw.
    auto program_fault = [&](const std::string& detail, bool storage_ok) {
        std::optional<app::db_error> f;
        if (app::ended_by_program(db_.handle()))
            f.emplace(where() + " " + app::transaction_ended_text + detail + "; nothing of the request is applied",
                      app::db_apply_failed);
        else if (!guard.refused().empty() && storage_ok)
            f.emplace(where() + " " + guard.refusal() + detail + "; nothing of the request is applied",
                      app::db_apply_failed);
        return f;
    };
    try {
        apply_(db_.handle(), m);
    } catch (const app::db_error& e) {
        if (auto f =
                program_fault(std::string(" (it threw: ") + e.what() + ")", !app::storage_failed_under(db_.handle())))
            throw *f;
        throw;  // SQLite's own failure (a full disk): its code stays
    } catch (const std::exception& e) {
        const bool storage_failed = app::storage_failed_under(db_.handle());
        if (auto f = program_fault(std::string(" (it threw: ") + e.what() + ")", !storage_failed)) throw *f;
        // The storage under the handler (a full disk in its own
        // INSERT) is the storage's failure, with SQLite's code.
        const int code = storage_failed ? sqlite3_extended_errcode(db_.handle()) : app::db_apply_failed;
        throw app::db_error("the application's apply handler failed on stream " + m.stream + " seq " +
                                std::to_string(m.seq) + ": " + e.what(),
                            code == SQLITE_OK ? SQLITE_ABORT : code);
    } catch (...) {
        throw app::db_error("the application's apply handler failed on stream " + m.stream + " seq " +
                                std::to_string(m.seq) + " (it threw something not a std::exception)",
                            app::db_apply_failed);
    }
    // Returned as if nothing happened, with the transaction gone:
    // what this request applied before it went too.
    if (auto f = program_fault("", true)) throw *f;
}

std::optional<envelope::rejection> store::apply_one(const envelope::message& m, std::uint64_t& fence,
                                                    envelope::apply_status& status, positions& ps) {
    using kind = envelope::rejection::kind;
    if (abandoned_.load(std::memory_order_relaxed))
        throw app::db_error("the secondary is stopping: the request was given up at stream " + m.stream + " seq " +
                                std::to_string(m.seq),
                            app::db_abandoned);
    if (m.epoch < fence) return envelope::rejection{kind::stale_epoch, {}, fence, 0, 0};

    position& pos = position_of(ps, m.stream);
    if (m.seq <= pos.last_seq) {
        auto& id = stmt(sel_id_, "SELECT id FROM applied WHERE stream=? AND seq=?");
        id.bind(1, m.stream).bind(2, static_cast<std::int64_t>(m.seq));
        const bool same = id.step() && id.column_text(0) == m.id;
        id.reset();
        if (!same) return envelope::rejection{kind::conflict, m.stream, 0, m.seq, 0};
        status = envelope::apply_status::duplicate;
    } else if (m.seq != pos.last_seq + 1) {
        return envelope::rejection{kind::gap, m.stream, 0, 0, pos.last_seq + 1};
    } else {
        auto& ins = stmt(ins_, "INSERT INTO applied(stream, seq, id, payload) VALUES(?,?,?,?)");
        ins.bind(1, m.stream).bind(2, static_cast<std::int64_t>(m.seq)).bind(3, m.id).bind(4, m.payload);
        ins.step();
        if (apply_) {
            // A handler that fails (a lock timeout, a hiccup downstream) is
            // tried again at once, its writes undone, up to apply_attempts
            // times before the request fails: one transient failure in a
            // request of thousands would otherwise send all of it again.
            for (std::uint32_t attempt = 1;; ++attempt) {
                auto& begin = stmt(sp_begin_, "SAVEPOINT steadfast_apply");
                begin.reset();
                begin.step();
                try {
                    run_handler(m);
                } catch (const app::db_error& e) {
                    const bool whole = !sqlite3_get_autocommit(db_.handle());
                    if (whole) {
                        db_.exec("ROLLBACK TO steadfast_apply");
                        db_.exec("RELEASE steadfast_apply");
                    }
                    // Only the handler's own failure, the transaction whole
                    // (not the storage's, not a stop).
                    if (whole && e.code() == app::make_db_error_code(app::db_apply_failed)) {
                        if (attempt < apply_attempts_) continue;
                        if (attempt > 1)
                            throw app::db_error(std::string(e.what()) + " (tried " + std::to_string(attempt) +
                                                    " times in this request)",
                                                e.code());
                    }
                    throw;
                }
                auto& release = stmt(sp_release_, "RELEASE steadfast_apply");
                release.reset();
                release.step();
                break;
            }
        }
        pos.last_seq = m.seq;
        pos.max_epoch = std::max(pos.max_epoch, m.epoch);
        pos.changed = true;
        status = envelope::apply_status::applied;
    }
    // A newer primary fences the older one on every stream, from now on.
    fence = std::max(fence, m.epoch);
    return std::nullopt;
}

std::uint64_t store::fence() {
    auto& gf = stmt(get_fence_, "SELECT value FROM meta WHERE key='epoch_fence'");
    const std::uint64_t f = gf.step() ? std::stoull(std::string(gf.column_text(0))) : 0;
    gf.reset();
    return f;
}

void store::set_fence(std::uint64_t epoch) {
    auto& pf = stmt(put_fence_, "UPDATE meta SET value=? WHERE key='epoch_fence'");
    pf.bind(1, std::to_string(epoch));
    pf.step();
    // The streams' own highest epochs only seed the fence of an old store;
    // kept no higher than the fence so that nothing brings the old one back.
    // Compared here as the unsigned values they are (SQLite's are signed).
    std::vector<std::string> higher;
    auto sel = db_.prepare("SELECT stream, max_epoch FROM streams");
    while (sel.step())
        if (static_cast<std::uint64_t>(sel.column_int(1)) > epoch) higher.emplace_back(sel.column_text(0));
    auto lower = db_.prepare("UPDATE streams SET max_epoch=? WHERE stream=?");
    for (const auto& s : higher) {
        lower.reset();
        lower.bind(1, static_cast<std::int64_t>(epoch)).bind(2, s);
        lower.step();
    }
}

void store::raise_fence(std::uint64_t epoch) {
    const std::uint64_t before = fence();
    if (epoch <= before) return;
    auto& pf = stmt(put_fence_, "UPDATE meta SET value=? WHERE key='epoch_fence'");
    pf.bind(1, std::to_string(epoch));
    pf.step();
}

envelope::positions_page store::positions_after(std::string_view after, std::size_t limit) {
    // The primary key's index gives the order (BINARY collation: byte order).
    auto& q = stmt(sel_page_, "SELECT stream, last_seq FROM streams WHERE stream > ? ORDER BY stream LIMIT ?");
    q.bind(1, after).bind(2, static_cast<std::int64_t>(limit) + 1);
    envelope::positions_page p;
    while (q.step()) {
        if (p.streams.size() == limit) {
            p.more = true;
            break;
        }
        p.streams.push_back({std::string(q.column_text(0)), static_cast<std::uint64_t>(q.column_int(1))});
    }
    q.reset();
    return p;
}

std::vector<std::pair<std::string, std::uint64_t>> store::last_applied() {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    auto s = db_.prepare("SELECT stream, last_seq FROM streams");
    while (s.step()) out.emplace_back(std::string(s.column_text(0)), static_cast<std::uint64_t>(s.column_int(1)));
    return out;
}

store::answer store::apply(const envelope::decoded& d, bool& keep) {
    const std::uint64_t before = this->fence();
    std::uint64_t fence = before;
    // An epoch far above the fence is a mistake or an attack, not a failover
    // (which adds one): applied, it would demote every primary for good.
    if (max_epoch_step_ > 0) {
        const std::uint64_t bound = before > UINT64_MAX - max_epoch_step_ ? UINT64_MAX : before + max_epoch_step_;
        auto too_high = [&](const envelope::message& m) { return m.epoch > bound; };
        const envelope::message* bad = nullptr;
        if (auto* m = std::get_if<envelope::message>(&d)) {
            if (too_high(*m)) bad = m;
        } else {
            for (const auto& msg : std::get<envelope::batch>(d).messages)
                if (too_high(msg)) {
                    bad = &msg;
                    break;
                }
        }
        if (bad) {
            keep = false;
            return answer{400, envelope::encode_epoch_step_refusal(bad->epoch, max_epoch_step_, before),
                          "epoch_too_high", 0, 0};
        }
    }

    answer a;
    auto reject = [&](const envelope::rejection& r) {
        keep = false;
        static constexpr const char* reasons[] = {"stale_epoch", "conflict", "gap", "unknown"};
        return answer{409, envelope::encode(r), reasons[static_cast<int>(r.what)], 0, 0};
    };
    auto count = [&](envelope::apply_status status) {
        ++(status == envelope::apply_status::applied ? a.applied : a.duplicates);
    };

    positions ps;  // keys view the messages' stream names, which outlive it
    if (auto* m = std::get_if<envelope::message>(&d)) {
        envelope::apply_status status{};
        if (auto r = apply_one(*m, fence, status, ps)) return reject(*r);
        count(status);
        a.body = envelope::encode_applied(status, m->seq);
    } else {
        const auto& msgs = std::get<envelope::batch>(d).messages;
        std::vector<envelope::result_item> results;
        results.reserve(msgs.size());
        // The contract's order across the batch: a stale epoch anywhere, then
        // the first conflict, then the first gap (a stream with a gap is not
        // applied further, but the other streams are still checked for conflicts).
        for (const auto& msg : msgs)
            if (msg.epoch < fence) return reject({envelope::rejection::kind::stale_epoch, {}, fence, 0, 0});
        std::optional<envelope::rejection> first_gap;
        for (const auto& msg : msgs) {
            if (first_gap && first_gap->stream == msg.stream) continue;
            envelope::apply_status status{};
            if (auto r = apply_one(msg, fence, status, ps)) {
                if (r->what != envelope::rejection::kind::gap) return reject(*r);
                if (!first_gap) first_gap = std::move(r);
                continue;
            }
            count(status);
            results.push_back({msg.seq, status});
        }
        if (first_gap) return reject(*first_gap);
        a.body = envelope::encode_results(results);
    }
    auto& up = stmt(up_stream_,
                    "INSERT INTO streams(stream, last_seq, max_epoch) VALUES(?,?,?) "
                    "ON CONFLICT(stream) DO UPDATE SET last_seq=excluded.last_seq, "
                    "max_epoch=max(max_epoch, excluded.max_epoch)");
    for (const auto& [stream, pos] : ps) {
        if (!pos.changed) continue;
        up.reset();
        up.bind(1, stream)
            .bind(2, static_cast<std::int64_t>(pos.last_seq))
            .bind(3, static_cast<std::int64_t>(pos.max_epoch));
        up.step();
    }
    if (fence != before) {
        auto& pf = stmt(put_fence_, "UPDATE meta SET value=? WHERE key='epoch_fence'");
        pf.bind(1, std::to_string(fence));
        pf.step();
    }
    return a;
}

}  // namespace steadfast::secondary
