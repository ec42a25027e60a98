// primary_node: the primary's core (primary/core.hpp) in an embedding
// program's event loop, with publish as an asynchronous operation.
#include <common/event_loop.hpp>
#include <common/log.hpp>
#include <common/metrics.hpp>
#include <common/names.hpp>
#include <common/sqlite.hpp>
#include <common/thread_name.hpp>
#include <common/token.hpp>
#include <primary/core.hpp>
#include <primary/ladder.hpp>
#include <primary/outbox_health.hpp>

#include <steadfast/replication/envelope.hpp>
#include <steadfast/replication/primary_node.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <prometheus/registry.h>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace asio = boost::asio;
using boost::system::error_code;

namespace steadfast::replication {

namespace {

struct category final : boost::system::error_category {
    const char* name() const noexcept override { return "steadfast.replication"; }
    std::string message(int ev) const override {
        switch (static_cast<publish_error>(ev)) {
            case publish_error::invalid_stream:
                return "the stream's name is not 1 to 128 characters of A-Z a-z 0-9 . _ - (or, over JetStream, "
                       "begins or ends with a dot, or holds two in a row)";
            case publish_error::invalid_payload:
                return "the payload is not one JSON value a secondary can read (or is empty, nests deeper than "
                       "the envelope allows: 63 levels in the payload, holds a number beyond a double's range "
                       "such as 1e400, or begins as a dead letter's tombstone does)";
            case publish_error::too_large:
                return "the message is larger than an envelope may be (1 MiB with the envelope), or than the "
                       "secondary's max_body";
            case publish_error::stopped:
                return "the primary node is stopped (or was demoted): nothing stored";
            case publish_error::disk_low:
                return "free space on the outbox's disk is under min_free_bytes: nothing stored";
            case publish_error::writes_failed:
                return "the application's writes threw: nothing stored";
            case publish_error::invalid_key:
                return "the idempotency key is not 1 to 255 visible ASCII characters";
            case publish_error::key_conflict:
                return "the idempotency key was first used for another stream or payload: nothing stored";
            case publish_error::no_dead_letter:
                return "no dead letter has that number";
            case publish_error::already_requeued:
                return "the dead letter was requeued already";
        }
        return "unknown replication error";
    }
};

// The settings an embedding program may get wrong, named by field.
void check(primary_config& c) {
    auto bad = [](const std::string& what) { throw std::invalid_argument("primary_config: " + what); };
    if (c.data.empty()) bad("data (the outbox's directory) is empty");
    if (c.secondary.empty()) bad("secondary is empty: give http://HOST:PORT, https://HOST:PORT or nats://HOST:PORT");
    if (c.batch_max == 0 || c.batch_max > envelope::limits{}.max_batch)
        bad("batch_max must be 1 to " + std::to_string(envelope::limits{}.max_batch));
    if (c.batch_bytes < 1024) bad("batch_bytes must be at least 1024");
    if (c.quick_retries == 0) bad("quick_retries must be at least 1");
    if (c.connections == 0 || c.connections > 1024) bad("connections must be 1 to 1024");
    if (c.attempt_timeout < std::chrono::milliseconds(10)) bad("attempt_timeout must be at least 10ms");
    if (c.max_backoff < std::chrono::milliseconds(100)) bad("max_backoff must be at least 100ms");
    if (c.linger < std::chrono::milliseconds(0) || c.linger > std::chrono::milliseconds(10))
        bad("linger must be from 0ms to 10ms");
    if (c.retain < std::chrono::milliseconds(0)) bad("retain must be 0 or more");
    app::check_tokens(c.tokens, "primary_config: tokens");
    if (!c.ladder.empty())
        if (auto why = primary::ladder_problem(c.ladder)) bad("ladder: " + *why);
    if (c.jetstream()) {
        (void)jetstream::parse_servers(c.secondary);
        if (!app::valid_nats_name(c.js_stream)) bad("js_stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        if (c.js_prefix.empty()) c.js_prefix = c.js_stream;
        if (!app::valid_nats_name(c.js_prefix)) bad("js_prefix must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        if (c.js_replicas < 1 || c.js_replicas > 5) bad("js_replicas must be 1 to 5");
        if (c.secondary_tls) bad("secondary_tls is for an https:// secondary");
        jetstream::check_security(c.nats);
    } else {
        if (c.nats.any_tls() || !c.nats.user.empty() || !c.nats.token.empty() || !c.nats.creds_file.empty())
            bad("nats is for NATS servers (a nats:// or tls:// secondary)");
        (void)http::client::from_url(c.secondary);
        if (c.secondary.starts_with("https://") && !c.secondary_tls) c.secondary_tls.emplace();
        if (c.secondary_tls) http::check_tls(*c.secondary_tls);
    }
}

// Where a cancelled operation completes: the node's loop, while it runs.
// Shared with the operations' cancellation handlers, which may outlive the
// node (a slot emitted after it is gone finds the gate closed).
struct completion_gate : std::enable_shared_from_this<completion_gate> {
    explicit completion_gate(asio::io_context::executor_type e) : loop(std::move(e)) {}
    std::mutex m;
    std::optional<asio::io_context::executor_type> loop;  // reset as the node ends
    std::atomic<int> held{0};                             // completions promised: the loop waits for them
    /// Promises a completion (false: the node is ending). The node's loop
    /// does not end before it is posted and run (impl::leave).
    bool hold() {
        std::lock_guard l(m);
        if (!loop) return false;
        ++held;
        return true;
    }
    void release() { --held; }
    /// Posts the completion promised by hold().
    template <class F>
    void post(F f) {
        std::lock_guard l(m);
        if (!loop) return release();  // (cannot happen while held: the loop waits)
        asio::post(*loop, [g = shared_from_this(), f = std::move(f)]() mutable {
            f();
            g->release();
        });
    }
    void close() {
        std::lock_guard l(m);
        loop.reset();
    }
};

}  // namespace

const boost::system::error_category& replication_category() noexcept {
    static const category c;
    return c;
}

error_code make_error_code(publish_error e) noexcept {
    return {static_cast<int>(e), replication_category()};
}

bool primary_config::jetstream() const {
    return jetstream::is_nats_url(secondary);
}

namespace {
template <class Signature>
struct pending_op;
}  // namespace

struct primary_node::impl {
    impl(asio::any_io_executor e, primary_config c)
        : ex(std::move(e)),
          cfg((check(c), std::move(c))),
          db(cfg.data, "primary.db", "steadfast-primary", cfg.fsync ? app::sync_mode::full : app::sync_mode::off),
          schema_run((cfg.schema.empty() ? void()
                                         : (primary::outbox::prepare_tables(db),
                                            db.exec_schema(cfg.schema, primary::own_tables, "primary_config::schema")),
                      true)),
          core(cfg, loop.get_executor(), db,
               {.progress = [] {},
                .demoted =
                    [this] {
                        demoted = true;
                        core.rep.stop();  // the probe too: nothing more to send
                    }}),
          health(
              loop.get_executor(), cfg.data, cfg.min_free_bytes, core.m,
              {"completed with the error, nothing stored", "publishes complete with disk_low until space is freed"}) {
        app::register_build_info(*core.m.registry, "steadfast-primary");
        core.rep.start();  // reads the outbox here, before the database thread runs a job
        health.start();
        arm_refresh();
        thread = std::thread([this] {
            app::name_this_thread("sf-primary");
            loop.run_logged("primary_node_failed");
        });
    }
    ~impl() {
        asio::post(loop, [this] {
            stopped = true;
            refresh_timer.cancel();
            core.rep.stop();
            health.stop();
            leave();
        });
        thread.join();
        // Queued database jobs finish (their completions reach the callers);
        // then what is left suspended is destroyed while it still exists.
        core.close();
        gate->close();
        loop.shutdown();
    }

    // The series a scrape reads (the daemon refreshes them at /metrics):
    // each second, on the node's thread.
    void arm_refresh() {
        refresh_timer.expires_after(std::chrono::seconds(1));
        refresh_timer.async_wait([this](const error_code& ec) {
            if (ec || stopped) return;
            core.m.db.sync(core.worker.get_stats());
            health.storage().check_disk();
            core.m.free_bytes.Set(static_cast<double>(health.storage().available()));
            core.refresh_metrics();
            arm_refresh();
        });
    }

    // Processors end at once (stop-when): give them a moment to leave, and
    // every operation under way its completion; then the loop ends.
    void leave() {
        exit_timer.expires_after(std::chrono::milliseconds(50));
        exit_timer.async_wait([this](const error_code&) {
            if (in_flight > 0 || gate->held > 0) return leave();
            work.reset();
            loop.stop();
        });
    }

    // A read of the database for `op` (status, dead letters): on the
    // database thread after what was started before it, completed once with
    // `read()`'s value or the database's error.
    template <class R, class Read>
    void read_for(std::shared_ptr<pending_op<void(error_code, R)>> op, Read read);

    // A publish's write for `op`, on the node's loop once refuse() let it
    // through: `write(db, keep) -> R` on the database thread (nothing, if a
    // cancellation withdrew `op` first), then `stored(R)` once committed,
    // which completes `op`; before it, when `wrote(R)` says the outbox was
    // written, the storage is marked working (a commit that wrote nothing,
    // such as writes that threw or a replayed key, proves nothing of the
    // disk). A failed commit completes it with the database's code: the
    // storage's failure, counted against `stream`, or the application's
    // code in its group ended the transaction (logged).
    template <class R, class Signature, class Write, class Wrote, class Stored>
    void write_for(std::shared_ptr<pending_op<Signature>> op, const std::string& stream, Write write, Wrote wrote,
                   Stored stored);

    // A publish without the application's writes, on the node's loop once
    // refuse() let it through: grouped with the others made meanwhile
    // (publish_batcher.hpp), taken from `op` on the database thread before
    // anything is written (nothing, if a cancellation withdrew it first).
    template <class Op>
    void publish_alone(std::shared_ptr<Op> op, std::string stream, std::string payload, std::int64_t at_ms);

    // A publish's commit failed (`subject`: its stream): the storage's
    // failure, counted and logged, unless the application's code in its
    // group ended the transaction (then false: the caller says so).
    bool commit_failed(const std::string& subject, const app::db_failure& f) {
        if (app::application_failed(f.code)) return false;
        health.publish_failed(subject, f.what);
        return true;
    }

    // A publish's write failed: the storage's failure counted against
    // `stream`, or the application's (another job of its group ended the
    // transaction) logged; `op` completes with its code.
    template <class Op>
    void publish_failed(Op& op, const std::string& stream, const app::db_failure& f) {
        if (!commit_failed(stream, f))
            app::log(app::level::warn, "publish_writes_failed",
                     {{"stream", stream}, {"error", f.what}, {"note", "nothing stored"}});
        op.fail(f.code);
    }

    // On the node's thread: why `payload` may not be stored in `stream`;
    // else `payload` becomes what is stored (without surrounding blanks, as
    // the daemon stores it).
    std::optional<publish_error> refuse(const std::string& stream, std::string& payload) {
        if (stopped || demoted) return publish_error::stopped;
        if (!envelope::valid_stream_name(stream) || core.rep.secondary().refuse_stream(stream))
            return publish_error::invalid_stream;
        const std::size_t overhead = core.envelope_overhead(stream, cfg.epoch);
        auto checked = envelope::check_payload(payload, overhead);
        if (auto* e = std::get_if<envelope::payload_error>(&checked))
            return e->status == 413 ? publish_error::too_large : publish_error::invalid_payload;
        const auto body = std::get<std::string_view>(checked);
        if (core.rep.secondary().too_large(overhead + body.size())) return publish_error::too_large;
        if (health.storage().disk_low_now()) return publish_error::disk_low;
        if (body.size() != payload.size()) payload = std::string(body);
        return std::nullopt;
    }

    asio::any_io_executor ex;  // the caller's: completions go there
    primary_config cfg;
    app::event_loop loop{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{loop.get_executor()};
    asio::steady_timer exit_timer{loop}, refresh_timer{loop};
    app::database db;
    bool schema_run;  // cfg.schema, before the outbox's statements are prepared
    primary::core core;
    primary::outbox_health health;
    std::atomic<bool> stopped{false}, demoted{false};
    std::atomic<int> in_flight{0};  // operations on the database thread, not completed yet
    std::shared_ptr<completion_gate> gate = std::make_shared<completion_gate>(loop.get_executor());
    std::thread thread;
};

namespace {

// An operation's handler and its cancellation. The slot (the caller's) is
// assigned on the initiating thread and cleared on the handler's executor
// just before the handler runs. The operation is `queued` until the
// database thread takes it (`take()`, before it writes anything) or a
// cancellation of any type withdraws it: then it completes at once with
// operation_aborted (through the node's loop, never inline), and its job,
// when reached, does nothing. One already taken completes as usual.
template <class... Args>
struct pending_op<void(error_code, Args...)> {
    using signature = void(error_code, Args...);
    enum : int { queued, taken, cancelled };
    // Constructed, never assigned: Boost 1.81's move assignment of an
    // any_completion_handler wraps it in itself until the stack overflows.
    explicit pending_op(asio::any_completion_handler<signature> h) : handler(std::move(h)) {}
    asio::any_completion_handler<signature> handler;
    asio::cancellation_slot slot;
    // The handler's executor (else the node's `ex`), with outstanding work
    // until the handler has run: the program's loop does not run out of work
    // while a publish is under way.
    asio::any_completion_executor work;
    std::atomic<int> state{queued};

    /// The operation is ours to complete, once (false: a cancellation took
    /// it, and has completed it). Called by the job before it writes, and by
    /// the completion (a job its failed group never ran is still queued).
    bool take() noexcept {
        int q = queued;
        return state.compare_exchange_strong(q, taken) || q == taken;
    }
    bool withdrawn() const noexcept { return state.load() == cancelled; }

    // Completes with `ec` and value-initialised results.
    void fail(error_code ec) { complete(ec, Args{}...); }
    // Refused before it was queued for the database: completed with `e`,
    // unless a cancellation took it first.
    void refuse(publish_error e) {
        if (take()) fail(make_error_code(e));
    }

    // Called on the node's own thread, never the caller's: not inline.
    void complete(error_code ec, Args... args) {
        auto w = std::move(work);
        w.execute([h = std::move(handler), slot = slot, ec, args...]() mutable {
            if (slot.is_connected()) slot.clear();
            std::move(h)(ec, std::move(args)...);
        });
    }
};

template <class... Args>
std::shared_ptr<pending_op<void(error_code, Args...)>> make_op(
    asio::any_completion_handler<void(error_code, Args...)> h, const asio::any_io_executor& ex,
    const std::shared_ptr<completion_gate>& gate) {
    using op_type = pending_op<void(error_code, Args...)>;
    auto slot = asio::get_associated_cancellation_slot(h);
    auto work = asio::prefer(asio::get_associated_executor(h, ex), asio::execution::outstanding_work.tracked);
    auto op = std::make_shared<op_type>(std::move(h));
    op->slot = slot;
    op->work = std::move(work);
    if (op->slot.is_connected())
        op->slot.assign([w = std::weak_ptr<op_type>(op), gate](asio::cancellation_type t) {
            if (t == asio::cancellation_type::none) return;
            auto o = w.lock();
            if (!o) return;
            // Promised before it is withdrawn: the node's loop cannot end
            // between the two (its job, reached, no longer counts).
            if (!gate->hold()) return;  // the node is ending
            int q = op_type::queued;
            if (!o->state.compare_exchange_strong(q, op_type::cancelled)) return gate->release();  // taken
            gate->post([o] { o->complete(asio::error::operation_aborted, Args{}...); });
        });
    return op;
}

}  // namespace

template <class R, class Read>
void primary_node::impl::read_for(std::shared_ptr<pending_op<void(error_code, R)>> op, Read read) {
    auto job = [op, read = std::move(read)](app::database&, bool&) -> R {
        if (!op->take()) return R{};  // cancelled (and completed)
        return read();
    };
    ++in_flight;
    auto done = [this, op](app::db_result<R> r) {
        --in_flight;
        if (!op->take()) return;  // cancelled (and completed); else ours to complete, once
        if (!r) return op->complete(r.error().code, R{});
        op->complete(error_code{}, std::move(*r));
    };
    asio::post(loop, [this, job = std::move(job), done = std::move(done)]() mutable {
        core.worker.async_run<R>(loop.get_executor(), std::move(job), std::move(done));
    });
}

template <class R, class Signature, class Write, class Wrote, class Stored>
void primary_node::impl::write_for(std::shared_ptr<pending_op<Signature>> op, const std::string& stream, Write write,
                                   Wrote wrote, Stored stored) {
    core.batch.seal();  // a publish made after this one is stored after it
    ++in_flight;
    auto job = [op, write = std::move(write)](app::database& d, bool& keep) -> R {
        if (!op->take()) {
            keep = false;
            return R{};  // cancelled (and completed): nothing written
        }
        return write(d, keep);
    };
    auto done = [this, op, stream, wrote = std::move(wrote), stored = std::move(stored)](app::db_result<R> r) mutable {
        --in_flight;
        if (!op->take()) return;  // cancelled (and completed); else ours to complete, once
        if (!r) return publish_failed(*op, stream, r.error());
        if (wrote(*r)) health.works();
        stored(std::move(*r));
    };
    core.worker.async_run<R>(loop.get_executor(), std::move(job), std::move(done));
}

template <class Op>
void primary_node::impl::publish_alone(std::shared_ptr<Op> op, std::string stream, std::string payload,
                                       std::int64_t at_ms) {
    ++in_flight;
    // Delivery learns of the stored message from the batcher (core.hpp).
    core.batch.async_publish(
        stream, std::move(payload), at_ms, [op] { return op->take(); },
        [this, op, stream](primary::publish_batcher::result r) {
            --in_flight;
            if (!op->take()) return;  // cancelled (and completed); else ours to complete, once
            if (!r) return publish_failed(*op, stream, r.error());
            health.works();
            op->complete(error_code{}, r->seq);
        });
}

namespace {

const error_code aborted = asio::error::operation_aborted;

// Runs the application's code inside the node's transaction, on the database
// thread. Its own failure (a throw, the storage sound) is returned as its
// error code (a system_error's, else writes_failed) and logged as
// `event` with its text, nothing of it kept; so is a statement of its that
// the node refused (program_code_guard: its own COMMIT, say). The storage
// failing under it (SQLite's code), or code that ended the node's
// transaction all the same (INSERT OR ROLLBACK: db_apply_failed), is
// thrown: the group fails.
error_code run_application(app::database& db, const primary_node::transaction_writes& fn, bool& keep,
                           const std::string& whose, const char* event, nlohmann::json fields) {
    auto ended = [&](const std::string& detail) {
        return app::db_error(whose + " " + app::transaction_ended_text + detail + "; nothing stored",
                             app::db_apply_failed);
    };
    auto failed = [&](const std::string& what, error_code code) {
        keep = false;
        fields["error"] = what;
        fields["note"] = "nothing stored";
        app::log(app::level::warn, event, std::move(fields));
        return code;
    };
    // Its COMMIT, ROLLBACK or RELEASE of the node's savepoint is refused:
    // it fails alone, not the publishes that share its group commit.
    const app::program_code_guard guard(db, primary::own_tables);
    try {
        fn(db.handle());
    } catch (const std::exception& e) {
        if (app::ended_by_program(db.handle())) throw ended(std::string(" (it threw: ") + e.what() + ")");
        // The storage failed under it (a full disk; SQLite may have rolled
        // the whole transaction back): the storage's failure, with SQLite's
        // code.
        if (app::storage_failed_under(db.handle())) {
            const int code = sqlite3_extended_errcode(db.handle());
            throw app::db_error(e.what(), code == SQLITE_OK ? SQLITE_ABORT : code);
        }
        if (!guard.refused().empty())
            return failed(guard.refusal() + " (it threw: " + e.what() + ")",
                          make_error_code(publish_error::writes_failed));
        // Its code, as thrown: a boost::system or a std::system_error's.
        if (const auto* se = dynamic_cast<const boost::system::system_error*>(&e); se && se->code())
            return failed(e.what(), se->code());
        if (const auto* se = dynamic_cast<const std::system_error*>(&e); se && se->code()) {
            // errno values keep their own category (comparable with errc);
            // any other category is wrapped (== still compares it).
            const std::error_code& c = se->code();
            if (c.category() == std::generic_category())
                return failed(e.what(), error_code(c.value(), boost::system::generic_category()));
            if (c.category() == std::system_category())
                return failed(e.what(), error_code(c.value(), boost::system::system_category()));
            return failed(e.what(), error_code(c));
        }
        return failed(e.what(), make_error_code(publish_error::writes_failed));
    } catch (...) {
        if (sqlite3_get_autocommit(db.handle())) throw;
        return failed("not a std::exception", make_error_code(publish_error::writes_failed));
    }
    if (app::ended_by_program(db.handle())) throw ended("");
    if (!guard.refused().empty()) return failed(guard.refusal(), make_error_code(publish_error::writes_failed));
    return {};
}

}  // namespace

primary_node::primary_node(asio::any_io_executor ex, primary_config cfg)
    : impl_(ex ? std::make_unique<impl>(std::move(ex), std::move(cfg))
               : throw std::invalid_argument("primary_node: the executor is empty (completions go there)")) {}

primary_node::~primary_node() = default;

asio::any_io_executor primary_node::get_executor() const {
    return impl_->ex;
}

void primary_node::start_publish(std::string stream, std::string payload, transaction_writes writes,
                                 asio::any_completion_handler<void(error_code, std::uint64_t)> handler) {
    auto op = make_op(std::move(handler), impl_->ex, impl_->gate);
    asio::post(impl_->loop, [&m = *impl_, op, stream = std::move(stream), payload = std::move(payload),
                             writes = std::move(writes)]() mutable {
        if (op->withdrawn()) return;
        if (auto refused = m.refuse(stream, payload)) return op->refuse(*refused);
        const std::int64_t at_ms = primary::now_ms();
        if (!writes) return m.publish_alone(op, std::move(stream), std::move(payload), at_ms);
        struct outcome {
            primary::published p;  // seq 0: nothing stored
            error_code writes;     // the application's writes threw (nothing stored)
        };
        auto write = [&m, stream, payload, writes = std::move(writes), at_ms](app::database& db,
                                                                              bool& keep) -> outcome {
            if (writes) {
                const auto ec = run_application(db, writes, keep, "the application's writes for stream " + stream,
                                                "publish_writes_failed", {{"stream", stream}});
                if (ec) return {{}, ec};
            }
            std::vector<std::pair<std::string, std::string>> items{{stream, payload}};
            return {m.core.out.publish(items, at_ms).front(), {}};
        };
        auto stored = [&m, op, payload = std::move(payload), at_ms](outcome r) mutable {
            if (r.writes) return op->fail(r.writes);
            primary::pending_message msg{r.p.seq, r.p.id, std::move(payload), at_ms};
            m.core.rep.committed(r.p.stream, 1, &msg);
            op->complete(error_code{}, r.p.seq);
        };
        auto wrote = [](const outcome& r) { return !r.writes; };
        m.write_for<outcome>(op, stream, std::move(write), wrote, std::move(stored));
    });
}

void primary_node::start_publish_once(std::string stream, std::string payload, std::string key,
                                      asio::any_completion_handler<void(error_code, published_once)> handler) {
    auto op = make_op(std::move(handler), impl_->ex, impl_->gate);
    asio::post(impl_->loop, [&m = *impl_, op, stream = std::move(stream), payload = std::move(payload),
                             key = std::move(key)]() mutable {
        if (op->withdrawn()) return;
        // The daemon's Idempotency-Key rule.
        if (key.empty() || key.size() > 255 ||
            std::any_of(key.begin(), key.end(), [](char c) { return c < 0x21 || c > 0x7e; }))
            return op->refuse(publish_error::invalid_key);
        if (auto refused = m.refuse(stream, payload)) return op->refuse(*refused);
        const std::int64_t at_ms = primary::now_ms();
        auto write = [&m, stream, payload, key, at_ms](app::database&, bool&) {
            return m.core.out.publish_once(key, stream, payload, at_ms);
        };
        auto stored = [&m, op, payload = std::move(payload), at_ms](primary::keyed_publish r) mutable {
            switch (r.what) {
                case primary::keyed_publish::status::stored: {
                    primary::pending_message msg{r.p.seq, r.p.id, std::move(payload), at_ms};
                    m.core.rep.committed(r.p.stream, 1, &msg);
                    return op->complete(error_code{}, published_once{r.p.seq, false});
                }
                case primary::keyed_publish::status::replayed:
                    return op->complete(error_code{}, published_once{r.p.seq, true});
                case primary::keyed_publish::status::conflict:
                    return op->complete(make_error_code(publish_error::key_conflict), published_once{r.p.seq, false});
            }
        };
        auto wrote = [](const primary::keyed_publish& r) { return r.what == primary::keyed_publish::status::stored; };
        m.write_for<primary::keyed_publish>(op, stream, std::move(write), wrote, std::move(stored));
    });
}

void primary_node::start_publish_batch(std::string stream, std::vector<std::string> payloads,
                                       asio::any_completion_handler<void(error_code, std::uint64_t)> handler) {
    auto op = make_op(std::move(handler), impl_->ex, impl_->gate);
    asio::post(impl_->loop, [&m = *impl_, op, stream = std::move(stream), payloads = std::move(payloads)]() mutable {
        if (op->withdrawn()) return;
        if (payloads.empty()) return op->refuse(publish_error::invalid_payload);
        auto items = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
        items->reserve(payloads.size());
        for (auto& p : payloads) {
            if (auto refused = m.refuse(stream, p)) return op->refuse(*refused);
            items->emplace_back(stream, std::move(p));
        }
        const std::int64_t at_ms = primary::now_ms();
        auto write = [&m, items, at_ms](app::database&, bool&) { return m.core.out.publish(*items, at_ms).back().seq; };
        auto stored = [&m, op, stream, n = items->size()](std::uint64_t last) {
            m.core.rep.committed(stream, n);
            op->complete(error_code{}, last);
        };
        auto wrote = [](std::uint64_t) { return true; };
        m.write_for<std::uint64_t>(op, stream, std::move(write), wrote, std::move(stored));
    });
}

void primary_node::start_transaction(transaction_writes fn, asio::any_completion_handler<void(error_code)> handler) {
    auto op = make_op(std::move(handler), impl_->ex, impl_->gate);
    auto& m = *impl_;
    auto job = [op, fn = std::move(fn)](app::database& db, bool& keep) -> error_code {
        if (!op->take()) {
            keep = false;
            return {};  // cancelled (and completed): nothing run
        }
        return run_application(db, fn, keep, "the application's transaction", "transaction_failed", {});
    };
    ++m.in_flight;
    auto done = [&m, op](app::db_result<error_code> r) {
        --m.in_flight;
        if (!op->take()) return;  // cancelled (and completed); else ours to complete, once
        if (!r) {
            app::log(app::level::warn, "transaction_failed", {{"error", r.error().what}, {"note", "nothing stored"}});
            return op->complete(r.error().code);
        }
        op->complete(*r);
    };
    // Through the node's loop, as publishes go: one started after a publish
    // runs after it, and a publish started after it is stored after it (the
    // open group of publishes is sealed).
    asio::post(m.loop, [&m, job = std::move(job), done = std::move(done)]() mutable {
        m.core.batch.seal();
        m.core.worker.async_run<error_code>(m.loop.get_executor(), std::move(job), std::move(done));
    });
}

void primary_node::stop() {
    impl_->stopped = true;
    asio::post(impl_->loop, [&m = *impl_] {
        m.core.rep.stop();
        m.health.stop();
    });
}

std::uint64_t primary_node::pending() const {
    return static_cast<std::uint64_t>(impl_->core.m.depth.Value());
}

bool primary_node::secondary_online() const {
    return impl_->core.m.online.Value() > 0;
}

bool primary_node::demoted() const {
    return impl_->demoted;
}

void primary_node::start_status(asio::any_completion_handler<void(error_code, std::vector<stream_status>)> handler) {
    auto& m = *impl_;
    m.read_for(make_op(std::move(handler), m.ex, m.gate), [&m] {
        std::vector<stream_status> v;
        auto blocked = m.core.out.blocked();
        for (auto& [name, s] : m.core.out.status()) {
            stream_status st{name, s.next_seq - 1, s.acked_seq, s.pending, {}};
            if (auto b = blocked.find(name); b != blocked.end()) st.blocked = b->second;
            v.push_back(std::move(st));
        }
        return v;
    });
}

void primary_node::start_dead_letters(
    asio::any_completion_handler<void(error_code, std::vector<dead_letter>)> handler) {
    auto& m = *impl_;
    m.read_for(make_op(std::move(handler), m.ex, m.gate), [&m] {
        std::vector<dead_letter> v;
        for (auto& d : m.core.out.dead_letters())
            v.push_back({d.n, std::move(d.stream), std::move(d.id), std::move(d.payload), std::move(d.reason), d.seq,
                         std::chrono::system_clock::time_point(std::chrono::milliseconds(d.at_ms)), d.requeued_seq});
        return v;
    });
}

void primary_node::start_requeue(std::int64_t n,
                                 asio::any_completion_handler<void(error_code, std::uint64_t)> handler) {
    auto op = make_op(std::move(handler), impl_->ex, impl_->gate);
    asio::post(impl_->loop, [&m = *impl_, op, n]() mutable {
        if (op->withdrawn()) return;
        if (m.stopped || m.demoted) return op->refuse(publish_error::stopped);
        using requeued = primary::requeue_result::status;
        auto write = [&m, n](app::database&, bool&) { return m.core.out.requeue(n, primary::now_ms()); };
        auto wrote = [](const primary::requeue_result& r) { return r.what == requeued::requeued; };
        auto stored = [&m, op, n](primary::requeue_result r) {
            switch (r.what) {
                case requeued::not_found:
                    return op->fail(make_error_code(publish_error::no_dead_letter));
                case requeued::already:
                    return op->complete(make_error_code(publish_error::already_requeued), r.p.seq);
                case requeued::requeued:
                    break;
            }
            app::log(app::level::info, "requeued",
                     {{"n", n}, {"stream", r.p.stream}, {"seq", r.p.seq}, {"id", r.p.id}});
            m.core.rep.committed(r.p.stream, 1);
            op->complete(error_code{}, r.p.seq);
        };
        // A requeue is a publish: its failed commit counts as one.
        m.write_for<primary::requeue_result>(op, "(dead letter " + std::to_string(n) + ")", std::move(write), wrote,
                                             std::move(stored));
    });
}

prometheus::Registry& primary_node::metrics() {
    return *impl_->core.m.registry;
}

}  // namespace steadfast::replication
