// The per-stream delivery processor: a short loop that carries out what the
// stream's machine decides (stream_fsm.hpp: read the window, wait, send a
// batch, acknowledge, isolate, dead-letter, the ladder's next step, rewind,
// block, demote) and tells it what it saw. Batches go through the shared
// connection pool (so streams deliver concurrently and independently), with
// quick retries through the engine; decide() says what an answer means.
// A processor exists while its stream has messages; an idle one retires.
#include "replicator.hpp"

#include "../common/log.hpp"

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/classify.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

replicator::replicator(const replicator_env& env, replicator_hooks hooks)
    : env_(env),
      hooks_(std::move(hooks)),
      delivery_{env.o.batch_max, std::min(env.o.batch_bytes, envelope::limits{}.max_body_bytes), env.o.epoch},
      ladder_(env.o.ladder.empty() ? backoff::rocketmq() : backoff::schedule(env.o.ladder)),
      acks_(env.ex, env.out, env.worker),
      procs_(env.ex),
      demoted_(make_demoted(env.ex, env.o.epoch)),
      stop_(procs_.stopped() || cond(demoted_)),
      table_(delivery_, env.m),
      retention_(env.ex, env.out, env.worker, env.o.retain) {
    // The one place that knows which link --secondary names.
    link_ = make_link(link_env{env.o, env.ex, env.out, env.worker, stop_, demoted_, env.tokens, env.m}, *this);
    delivery_.reads_log = link_->reads_log();
    probe_options po;
    po.interval = 1s;
    po.failing_backoff = link_->probe_backoff();
    po.check_timeout = 1s;
    po.failures_to_offline = 2;
    po.initially_online = link_->initially_online();
    online_ = make_secondary_online(
        env.ex, [this] { return link_->probe(); }, po);
    online_->subscribe(online_sub_, [this](bool v) {
        env_.m.online.Set(v ? 1 : 0);
        nlohmann::json fields{{"secondary", env_.o.secondary}};
        if (auto why = link_->offline_error(); !v && !why.empty()) fields["error"] = std::move(why);
        app::log(v ? level::info : level::warn, v ? "secondary_online" : "secondary_offline", std::move(fields));
        if (v) link_->came_online();
    });
    // As the probe stands (a JetStream link is offline until its first check).
    env_.m.online.Set(online_->value() ? 1 : 0);
    demoted_->subscribe(demoted_sub_, [this](bool v) {
        if (!v) return;
        app::log(
            level::error, "demoted",
            {{"epoch", env_.o.epoch}, {"newer_epoch", demoted_->newest_seen()}, {"reason", link_->demoted_reason()}});
        if (hooks_.demoted) hooks_.demoted();
    });
}

replicator::~replicator() = default;

void replicator::start() {
    // A restart tries blocked streams again; each is blocked anew if the
    // reason still holds.
    env_.out.clear_blocked();
    std::uint64_t pending = 0;
    for (auto& [name, s] : env_.out.status()) {
        if (s.pending == 0) continue;
        pending += s.pending;
        table_.add(name, s.acked_seq, s.acked_seq, s.pending);
    }
    table_.committed(pending);
    // A stream waiting for a ladder step tries once at once: a restart is how
    // an operator says "the configuration is fixed" (the step is kept).
    for (auto& [name, s] : table_.streams()) start_processor(name, true);
    retention_.start();
}

void replicator::stop() {
    if (!procs_.stop()) return;  // stop_: the processors' sends and waits end
    online_->stop();
    retention_.stop();
    acks_.flush();
}

// After a commit of `n` messages on `stream` (on the event loop).
void replicator::committed(const std::string& stream, std::size_t n, pending_message* one) {
    env_.m.published.Increment(static_cast<double>(n));
    table_.committed(n);
    if (table_.committed_while_blocked(stream, n)) return;  // kept, not delivered: the stream is blocked
    if (auto* st = table_.find(stream)) {
        st->fsm.committed(n, one, online_->value());
        st->wake->set();
    } else {
        // A stream seen before starts after what it acknowledged; the
        // processor reads that position from the outbox.
        table_.add(stream, stream_positions::unknown, stream_positions::unknown, n);
        start_processor(stream);
    }
}

void replicator::refresh_metrics() {
    table_.refresh_metrics(now_ms());
    link_->refresh_metrics();
}

void replicator::start_processor(const std::string& stream, bool retry_at_once) {
    auto& s = table_.at(stream);
    s.wake = make_flag(env_.ex, "pending-" + stream, true);
    s.retry_now = make_flag(env_.ex, "retry-now-" + stream, retry_at_once);
    procs_.started();
    // Shutdown and demotion end it through stop_: its send stops (the retry's
    // stop-when) and so do its waits.
    asio::co_spawn(env_.ex, deliver(stream), [this, stream](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                app::log(level::error, "processor_failed", {{"stream", stream}, {"error", ex.what()}});
            } catch (...) {  // an embedding program's handler threw something else
                app::log(level::error, "processor_failed", {{"stream", stream}, {"error", "not a std::exception"}});
            }
        }
        // Retired once the coroutine is gone; after a failure, a second
        // later, so that a processor that fails at once cannot spin.
        if (!e) {
            asio::post(env_.ex, [this, stream] { retire(stream); });
        } else {
            auto t = std::make_shared<asio::steady_timer>(env_.ex, 1s);
            t->async_wait([this, stream, t](const boost::system::error_code&) { retire(stream); });
        }
    });
}

void replicator::retry_now(const char* why) {
    // Every stream: one that failed a moment ago has not written its ladder
    // step yet (its wait is not known), and the flag only skips the next
    // ladder wait; a stream that sends before one clears it.
    std::size_t waiting = 0;
    for (auto& [name, st] : table_.streams()) {
        if (!st.retry_now) continue;
        if (st.fsm.sched().next_at_ms > now_ms()) ++waiting;
        st.retry_now->set();
    }
    app::log(level::info, "retry_now", {{"why", why}, {"streams_waiting", waiting}});
}

std::optional<std::uint64_t> replicator::acked_max(const std::string& stream) const {
    const auto* st = table_.find(stream);
    if (!st || st->fsm.acked_max() == stream_positions::unknown) return std::nullopt;
    return st->fsm.acked_max();
}

std::optional<std::string> replicator::blocked(const std::string& stream) const {
    return table_.blocked(stream);
}

// The recheck (http_link.cpp) found `stream` held for less than `upto`.
void replicator::outbox_read_failed(const std::string& stream, const std::string& error) {
    app::log_limited(read_failures_, level::error, "outbox_read_failed", {{"stream", stream}, {"error", error}});
}

bool replicator::resend_last(const std::string& stream, std::uint64_t upto) {
    if (table_.is_blocked(stream)) return false;
    if (auto* st = table_.find(stream)) {
        // A processor with messages to send finds out at its next send; an
        // idle one (waiting to retire) is sent back one (not again while a
        // recheck's resend is on its way: acked < acked_max).
        if (!st->fsm.resend_last()) return false;
        st->wake->set();
        return true;
    }
    // Sends the last acknowledged message again, which is not counted as
    // delivered again.
    table_.add(stream, upto - 1, upto, 0);
    start_processor(stream);
    return true;
}

// The processor has ended: forget the stream, unless messages arrived in the
// meantime (then a new processor takes over).
void replicator::retire(const std::string& stream) {
    auto* st = table_.find(stream);
    if (!st) {
        procs_.ended();
        return;
    }
    // Also when it ended with messages pending (a failure, a failed read of
    // the JetStream log): they stay in the outbox and need a processor.
    const auto& fsm = st->fsm;
    const bool more =
        (st->wake->value() || fsm.pending() > 0) && !procs_.stopping() && !stop_->value() && !table_.is_blocked(stream);
    const std::uint64_t pending = fsm.pending(), acked = fsm.acked(), acked_max = fsm.acked_max();
    table_.erase(stream);
    if (more) {
        // Positions carry over: the outbox's copy may lag behind them.
        link_->restarted(stream);
        table_.add(stream, acked, acked_max, pending);
        start_processor(stream);
    } else {
        link_->forget(stream);
        acks_.forget(stream);
    }
    retention_.retired();
    procs_.ended();
}

// A wait of the stream's machine: until its delay passes or something it
// names happens (stop always does), without polling.
asio::awaitable<void> replicator::wait_for(const stream_action& a, const stream_state& st) {
    using w = stream_action;
    cond c = stop_;
    if (a.wake_on & w::on_commit) c = c || cond(st.wake);
    if (a.wake_on & w::on_online) c = c || cond(online_);
    if (a.wake_on & w::on_offline) c = c || !cond(online_);
    if (a.wake_on & w::on_retry_now) c = c || cond(st.retry_now);
    if (a.wake_on & w::on_read_ahead) c = c || cond(st.read_done);
    const auto deadline =
        a.delay ? std::chrono::steady_clock::now() + *a.delay : std::chrono::steady_clock::time_point::max();
    co_await wait_until(env_.ex, deadline, std::move(c));
}

namespace {
struct loaded {
    std::uint64_t acked = 0;
    std::vector<pending_message> batch;
    schedule sched;
};
struct rewind_facts {
    std::uint64_t oldest = 0, next_seq = 1;
};
}  // namespace

// The processor: carries out what the stream's machine (stream_fsm.hpp)
// decides, and tells it what it saw.
asio::awaitable<void> replicator::deliver(std::string stream) {
    stream_state& st = table_.at(stream);  // stable: erased only by retire(), after this ends
    stream_fsm& fsm = st.fsm;
    // The client's connect/write/read timeouts bound an attempt; shutdown or
    // demotion (stop_) ends the quick retries at once, cancelling the send in
    // flight; no attempt starts while the secondary's probe fails.
    auto quick = retry_policy{}
                     .with_backoff(backoff::exponential(100ms, 2.0, env_.o.max_backoff).with_jitter(jitter::full))
                     // A Retry-After up to the ladder's first step is waited here; a
                     // longer one ends the quick retries (pushback) and the ladder
                     // waits it out durably (next_step).
                     .with_max_delay(std::max<std::chrono::nanoseconds>(env_.o.max_backoff, ladder_.base_delay(1, {})))
                     .with_stop(stop::max_attempts(env_.o.quick_retries))
                     .with_stop_when(stop_)
                     .with_attempt_when(online_)
                     .with_hooks({.before_attempt = [this](const attempt_context& c) {
                         env_.m.attempts.Increment();
                         if (c.number > 1) env_.m.retries.Increment();
                     }});
    quick = link_->quick(std::move(quick));  // JetStream: an attempt timeout of its own
    stream_event ev;
    for (;;) {
        ev.stop = stop_->value();
        ev.online = online_->value();
        ev.retry_now = st.retry_now->value();
        ev.commit = st.wake->value();
        ev.now_ms = now_ms();
        const stream_action a = fsm.resume(ev);
        ev = stream_event{};
        if (a.clear_commit) st.wake->clear();
        if (a.clear_retry_now) st.retry_now->clear();
        if (a.check_drained) hooks_.progress();
        using t = stream_action::type;
        switch (a.what) {
            case t::read: {
                env_.m.outbox_reads.Increment();
                // A position read from the outbox, no lower than what the
                // acknowledger holds for the stream and has not stored yet
                // (its write failed: the secondary has those messages).
                auto read = [this, &stream, from = a.from, position = a.from_position,
                             held = a.from_position ? acks_.held(stream) : 0](app::database&, bool&) {
                    loaded l;
                    l.acked = position ? std::max(env_.out.position(stream).acked_seq, held) : from;
                    l.batch = read_window(stream, l.acked);
                    l.sched = env_.out.get_schedule(stream);
                    return l;
                };
                auto got = co_await env_.worker.run<loaded>(env_.ex, std::move(read));
                if (auto e = app::failed(got)) {
                    ev.error = std::move(*e);
                } else {
                    auto& l = *got;
                    ev.position = l.acked;
                    ev.rows = std::move(l.batch);
                    ev.sched = l.sched;
                }
                break;
            }
            case t::wait:
                co_await wait_for(a, st);
                break;
            case t::start_read_ahead:
                start_read_ahead(stream, st);
                break;
            case t::sync_log:
                ev.d = co_await link_->sync(stream, fsm.acked(), quick);
                break;
            case t::send:
                ev.d = co_await link_->send(stream, fsm.batch(), quick, ev.server_wait);
                break;
            case t::rewind_facts: {
                auto facts = [this, &stream](app::database&, bool&) {
                    rewind_facts f;
                    f.oldest = env_.out.oldest_seq(stream).value_or(0);
                    f.next_seq = env_.out.position(stream).next_seq;
                    return f;
                };
                auto got = co_await env_.worker.run<rewind_facts>(env_.ex, std::move(facts));
                if (auto e = app::failed(got)) {
                    ev.error = std::move(*e);
                } else {
                    ev.oldest = got->oldest;
                    ev.next_seq = got->next_seq;
                }
                break;
            }
            case t::acknowledged: {
                const auto now = now_ms();
                for (const auto& m : fsm.batch())
                    if (m.seq >= a.first_fresh && m.seq <= a.upto)
                        env_.m.latency.Observe(static_cast<double>(now - m.at_ms) / 1000.0);
                acknowledged(stream, a);
                break;
            }
            case t::link_recovered:
                app::log(
                    level::info, "link_recovered",
                    {{"stream", stream}, {"seq", a.seq}, {"ladder_steps", a.ladder_steps}, {"pending", fsm.pending()}});
                env_.worker.post(
                    [this, stream](app::database&) {
                        env_.out.clear_schedule(stream);
                        return true;
                    },
                    [stream](const app::db_failure* err) {
                        if (err) app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", err->what}});
                    });
                break;
            case t::next_step:
                ev.ok = co_await next_step(stream, a.seq, fsm.current(), a.server_wait);
                break;
            case t::dead_letter:
                ev.ok = co_await dead_letter(stream, fsm.batch().front(), fsm.current().reason);
                break;
            case t::rewound:
                env_.m.rewinds.Increment();
                app::log(level::warn, "rewind", {{"stream", stream}, {"from_seq", a.seq}, {"detail", a.detail}});
                break;
            case t::block:
                co_await block(stream, a.reason, a.detail);
                break;
            case t::demote:
                demoted_->observe(a.epoch);
                break;
            case t::storage_failed: {
                outbox_read_failed(stream, a.detail);
                co_await wait_for(a, st);
                break;
            }
            case t::done:
                co_return;
        }
    }
}

// The rows a window holds after `after`: at least a batch, at least 1,000,
// within the larger of a batch's bytes and 4 MiB (on the database thread).
std::vector<pending_message> replicator::read_window(const std::string& stream, std::uint64_t after) {
    return env_.out.pending(stream, after, std::max<std::size_t>(env_.o.batch_max, 1000),
                            std::max<std::size_t>(env_.o.batch_bytes, 4 << 20));
}

// Reads the rows after the window on the database thread, into the
// machine's read-ahead (which it has set up), and says when they are there.
void replicator::start_read_ahead(const std::string& stream, stream_state& st) {
    auto ra = st.fsm.read_ahead_slot();
    if (!st.read_done) st.read_done = make_flag(env_.ex, "read-ahead-" + stream, false);
    st.read_done->clear();
    env_.m.outbox_reads.Increment();
    env_.worker.post(
        [this, stream, ra](app::database&) {
            ra->rows = read_window(stream, ra->after);
            return true;
        },
        [this, ra, done = st.read_done](const app::db_failure* err) {
            asio::post(env_.ex, [ra, done, failed = err != nullptr] {
                ra->failed = failed;
                ra->running = false;
                done->set();
            });
        });
}

// The secondary applied up to `upto`: sending goes on at once; the outbox is
// marked soon after (acknowledger.hpp).
void replicator::acknowledged(const std::string& stream, const stream_action& a) {
    acks_.acknowledged(stream, a.upto);
    env_.m.delivered.Increment(static_cast<double>(a.delivered));
    table_.delivered(a.delivered);
    hooks_.progress();
}

// Quick retries are used up on a failure of the link or the secondary: the
// next ladder step goes to the outbox, so that a restart keeps the schedule.
// The last step repeats for as long as it takes; nothing is dead-lettered.
asio::awaitable<bool> replicator::next_step(const std::string& stream, std::uint64_t head_seq, const decision& d,
                                            std::chrono::nanoseconds server_wait) {
    env_.m.link_errors.Add({{"reason", d.link_error.label()}}).Increment();
    env_.m.redeliveries.Increment();
    auto read = [this, &stream](app::database&, bool&) { return env_.out.get_schedule(stream); };
    auto got = co_await env_.worker.run<schedule>(env_.ex, std::move(read));
    if (auto e = app::failed(got)) {
        app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", *e}});
        co_return false;
    }
    // The ladder's arithmetic (ladder.hpp): the step, the Retry-After, the bound.
    const ladder_plan plan = plan_next_step(*got, head_seq, ladder_, server_wait, now_ms());
    if (plan.retry_after_bounded)
        app::log(level::warn, "retry_after_bounded",
                 {{"stream", stream},
                  {"retry_after_ms", std::chrono::duration_cast<std::chrono::milliseconds>(server_wait).count()},
                  {"waiting_ms", plan.delay.count()},
                  {"note", "the secondary asked for more than the ladder's last step"}});
    const schedule s = plan.next;
    const auto delay = plan.delay;
    auto write = [this, &stream, s](app::database&, bool&) {
        env_.out.set_schedule(stream, s);
        return true;
    };
    auto w = co_await env_.worker.run<bool>(env_.ex, std::move(write));
    if (auto e = app::failed(w)) {
        app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", *e}});
        co_return false;
    }
    app::log(level::warn, "link_error",
             {{"stream", stream},
              {"seq", head_seq},
              {"reason", d.link_error.label()},
              {"detail", d.reason.substr(0, 300)},
              {"secondary", env_.o.secondary},
              {"hint", hint_for(d)},
              {"ladder_step", s.attempts},
              {"next_attempt_in_ms", delay.count()},
              {"pending", table_.pending()}});
    co_return true;
}

asio::awaitable<bool> replicator::dead_letter(const std::string& stream, const pending_message& m,
                                              const std::string& why) {
    auto job = [this, &stream, m, why](app::database&, bool&) {
        env_.out.dead_letter(stream, m, why, now_ms());
        return true;
    };
    auto r = co_await env_.worker.run<bool>(env_.ex, std::move(job));
    if (auto e = app::failed(r)) {
        app::log(level::error, "dead_letter_failed",
                 {{"stream", stream}, {"seq", m.seq}, {"error", *e}, {"note", "the message is kept and sent again"}});
        co_return false;
    }
    env_.m.dead_letters.Increment();
    app::log(level::error, "dead_letter",
             {{"stream", stream},
              {"seq", m.seq},
              {"id", m.id},
              {"reason", why},
              {"note", "a tombstone takes its place so the stream goes on"}});
    co_return true;
}

// Stops the stream: its messages stay in the outbox, new ones are still
// accepted; `status` and the metric report it until a restart tries again.
asio::awaitable<void> replicator::block(const std::string& stream, const std::string& reason,
                                        const std::string& detail) {
    auto job = [this, &stream, &reason](app::database&, bool&) {
        env_.out.set_blocked(stream, reason, now_ms());
        return true;
    };
    auto r = co_await env_.worker.run<bool>(env_.ex, std::move(job));
    table_.block(stream, reason);
    const auto& fsm = table_.at(stream).fsm;
    app::log(level::error, "blocked",
             {{"stream", stream},
              {"reason", reason},
              {"detail", detail},
              {"pending", fsm.pending()},
              {"recorded", r.has_value()},
              {"hint", "nothing was acknowledged or dead-lettered; a restart tries the stream again"}});
    hooks_.progress();
}

}  // namespace steadfast::primary
