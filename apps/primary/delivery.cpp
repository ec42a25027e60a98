// The per-stream delivery processor: reads ahead from the outbox, sends one
// batch at a time through the shared connection pool (so streams deliver
// concurrently and independently), retries quickly through the engine, and
// carries out what decide() says of the answer: acknowledge, isolate,
// dead-letter, schedule the next ladder step, rewind, block or demote.
// A processor exists while its stream has messages; an idle one retires.
#include "node.hpp"
#include "recheck.hpp"
#include "window.hpp"

#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/envelope.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <malloc.h>

#include <algorithm>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

namespace {
// How long an idle processor waits for new messages before it retires.
constexpr auto idle_grace = 5s;
// How long to wait before trying again after the outbox itself failed.
constexpr auto storage_pause = 1s;

std::string_view hint_for(const decision& d) {
    const std::string& link_error = d.link_error;
    if (link_error == "auth") return "check --token-file against the secondary's";
    if (d.not_a_secondary)
        return "is --secondary the address of a steadfast-secondary? (its answer is not one a secondary gives)";
    if (link_error == "transport")
        return "is the secondary running and reachable? (if it serves HTTPS, --secondary must be https://)";
    if (link_error == "jetstream_unavailable")
        return "are the NATS servers of --secondary running, with JetStream on, and does the stream have a leader?";
    if (link_error == "jetstream_refused")
        return "JetStream refused the publish: check the account's permissions and limits and the stream's configuration";
    if (link_error == "tls")
        return "check --tls-ca (the CA that signed the secondary's certificate), --tls-server-name, "
               "--tls-cert/--tls-key if the secondary asks for a certificate, and that the secondary serves HTTPS";
    return "the secondary is failing; messages are kept and sent again";
}
}  // namespace

void node::start_processor(const std::string& stream, bool retry_at_once) {
    auto& s = streams_[stream];
    s.wake = make_flag(ioc_.get_executor(), "pending-" + stream, true);
    s.retry_now = make_flag(ioc_.get_executor(), "retry-now-" + stream, retry_at_once);
    streams_gauge_.Set(static_cast<double>(streams_.size()));
    // Shutdown and demotion end it through stop_: its send stops (the retry's
    // stop-when) and so do its waits.
    asio::co_spawn(ioc_, deliver(stream), [this, stream](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                app::log(level::error, "processor_failed", {{"stream", stream}, {"error", ex.what()}});
            }
        }
        // Retired once the coroutine is gone; after a failure, a second
        // later, so that a processor that fails at once cannot spin.
        if (!e) {
            asio::post(ioc_, [this, stream] { retire(stream); });
        } else {
            auto t = std::make_shared<asio::steady_timer>(ioc_, 1s);
            t->async_wait([this, stream, t](const boost::system::error_code&) { retire(stream); });
        }
    });
}

void node::retry_now(const char* why) {
    // Every stream: one that failed a moment ago has not written its ladder
    // step yet (its wait is not known), and the flag only skips the next
    // ladder wait; a stream that sends before one clears it.
    std::size_t waiting = 0;
    for (auto& [name, st] : streams_) {
        if (!st.retry_now) continue;
        if (st.sched.next_at_ms > now_ms()) ++waiting;
        st.retry_now->set();
    }
    app::log(level::info, "retry_now", {{"why", why}, {"streams_waiting", waiting}});
}

// A secondary restored from an older copy says so only when it is sent
// something (a 409 gap below what it had acknowledged), and a quiet stream
// sends nothing: its lost messages would stay lost while every metric looks
// healthy. So when the secondary is first seen, comes back or restarts, the
// primary asks it what it holds (GET /api/streams, a page of 1,000 streams a
// request) and each stream acknowledged within --retain that the secondary
// holds less of resends its last acknowledged message: the gap rewinds the
// stream from retention, or blocks it beyond retention, as at any send.
// Nothing starts for a stream the secondary is level with (a drained stream
// costs nothing at a reconnect). A secondary without that route (an older
// version: 404) is rechecked the old way, every quiet stream resending. At
// most one every 5 s (a later request waits for the next slot): a secondary
// behind a balancer may show a new instance at every probe.
void node::recheck_streams() {
    if (js_ || stopping_) return;
    using clock = std::chrono::steady_clock;
    constexpr auto every = 5s;
    // One under way compares with pages some of which may come from the
    // secondary before this news (a restart onto a restored copy): another
    // follows it. One queued covers this one.
    if (rechecking_) {
        recheck_again_ = true;
        return;
    }
    if (recheck_timer_armed_) return;
    if (const auto since = clock::now() - last_recheck_; last_recheck_ != clock::time_point{} && since < every) {
        recheck_timer_armed_ = true;
        auto t = std::make_shared<asio::steady_timer>(ioc_, every - since);
        t->async_wait([this, t](const boost::system::error_code&) {
            recheck_timer_armed_ = false;
            recheck_streams();
        });
        return;
    }
    rechecking_ = true;
    last_recheck_ = clock::now();
    asio::co_spawn(ioc_, recheck(), [this](std::exception_ptr e) {
        rechecking_ = false;
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                recheck_failed({{"error", ex.what()}});
            }
        }
        // The secondary could not be asked, or changed meanwhile: again in
        // the next slot (5 s after this one began).
        if (std::exchange(recheck_again_, false) && !stopping_) recheck_streams();
    });
}

// Logged, and counted (a recheck that keeps failing shows on /metrics).
void node::recheck_failed(nlohmann::json fields) {
    recheck_failures_.Increment();
    app::log(level::warn, "recheck_failed", std::move(fields));
}

asio::awaitable<std::optional<std::vector<std::pair<std::string, std::uint64_t>>>> node::streams_behind(
    const std::map<std::string, std::uint64_t>& acked, std::size_t& pages) {
    recheck_merge merge(acked);  // recheck.hpp: the comparison, as plain code
    for (;;) {
        const std::string& after = merge.after();
        http::request req{"GET", "/api/streams?limit=1000" + (after.empty() ? std::string() : "&after=" + after), {}, {}};
        if (!tokens_.empty()) req.set("Authorization", "Bearer " + tokens_.front());
        const auto o = co_await recheck_client_->send(req);
        ++pages;
        if (stopping_) co_return std::nullopt;
        if (!o.has_response()) {
            recheck_failed({{"error", std::string(to_string(o.error().phase)) + ": " + o.error().ec.message()},
                            {"note", "tried again in 5 s"}});
            co_return std::nullopt;
        }
        if (o.res().status == 404 || o.res().status == 405) {
            // A secondary before GET /api/streams: every quiet stream resends.
            co_return std::vector<std::pair<std::string, std::uint64_t>>(acked.begin(), acked.end());
        }
        auto page = o.res().status == 200 ? envelope::decode_positions(o.res().body) : std::nullopt;
        if (!page) {
            recheck_failed({{"error", "GET /api/streams answered " + std::to_string(o.res().status)}, {"note", "tried again in 5 s"}});
            co_return std::nullopt;
        }
        const std::string before = merge.after();
        if (!merge.add(*page) || (page->more && (page->streams.empty() || merge.after() == before))) {
            // A page that does not move on would be asked for forever.
            recheck_failed({{"error", "GET /api/streams answered a page that does not move past \"" + before + "\""},
                            {"note", "tried again in 5 s"}});
            co_return std::nullopt;
        }
        if (!page->more) break;
        if (!envelope::valid_stream_name(merge.after())) {
            recheck_failed({{"error", "GET /api/streams named a stream no primary could have made"}});
            co_return std::nullopt;
        }
    }
    co_return merge.finish();
}

asio::awaitable<void> node::recheck() {
    auto read = [this](app::database&, bool&) { return out_.recently_acknowledged(); };
    auto got = co_await worker_.run<std::map<std::string, std::uint64_t>>(ioc_.get_executor(), std::move(read));
    if (auto* e = std::get_if<std::string>(&got)) {
        recheck_failed({{"error", *e}});
        recheck_again_ = true;
        co_return;
    }
    auto& acked = std::get<0>(got);
    std::erase_if(acked, [this](const auto& kv) { return kv.second == 0 || blocked_.count(kv.first) > 0; });
    if (acked.empty() || stopping_) co_return;
    std::size_t pages = 0;
    auto behind = co_await streams_behind(acked, pages);
    if (!behind) recheck_again_ = true;
    if (!behind || stopping_) co_return;
    std::size_t n = 0;
    for (const auto& [name, upto] : *behind) {
        if (blocked_.count(name)) continue;
        if (auto it = streams_.find(name); it != streams_.end()) {
            // A processor with messages to send finds out at its next
            // send; an idle one (waiting to retire) is sent back one
            // (not again while a recheck's resend is on its way:
            // acked < acked_max).
            auto& st = it->second;
            if (st.pending != 0 || st.acked == 0 || st.acked == UINT64_MAX || st.acked != st.acked_max) continue;
            st.acked -= 1;
            forget_window(st);
            st.wake->set();
        } else {
            auto& st = streams_[name];
            st.acked = upto - 1;   // sends the last acknowledged message again
            st.acked_max = upto;   // which is not counted as delivered again
            start_processor(name);
        }
        ++n;
    }
    app::log(level::info, "recheck",
             {{"streams", n}, {"checked", acked.size()}, {"requests", pages},
              {"why", "the secondary was first seen, came back or restarted: each stream it holds less of than was "
                      "acknowledged resends its last acknowledged message, in case it was restored from an older copy"}});
}

// The processor has ended: forget the stream, unless messages arrived in the
// meantime (then a new processor takes over).
void node::retire(const std::string& stream) {
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    // Also when it ended with messages pending (a failure, a failed read of
    // the JetStream log): they stay in the outbox and need a processor.
    const bool more = (it->second.wake->value() || it->second.pending > 0) && !stopping_ && !stop_->value() &&
                      !blocked_.count(stream);
    const std::uint64_t pending = it->second.pending, acked = it->second.acked, acked_max = it->second.acked_max;
    streams_.erase(it);
    if (more) {
        // Positions carry over: the outbox's copy may lag behind them.
        auto& st = streams_[stream];
        st.acked = acked;
        st.acked_max = acked_max;
        st.pending = pending;
        start_processor(stream);
    } else {
        if (combined_) combined_->forget(stream);
        if (auto t = trims_.find(stream); t != trims_.end()) {
            // A last mark of what was acknowledged; then nothing of the stream
            // stays in memory.
            if (!t->second->scheduled) trim(stream, t->second);
            trims_.erase(t);
        }
    }
    ++retired_since_trim_;
    streams_gauge_.Set(static_cast<double>(streams_.size()));
}

void node::purge_retained() {
    // The allocator keeps what retired streams freed; give it back to the
    // system now and then (glibc keeps freed memory in its arenas otherwise).
    if (retired_since_trim_ >= 100) {
        retired_since_trim_ = 0;
        ::malloc_trim(0);
    }
    const std::int64_t cutoff = now_ms() - o_.retain.count();
    worker_.post([this, cutoff](app::database&) {
        out_.purge(cutoff);
        return true;
    }, [](const std::string& err) {
        if (!err.empty()) app::log(level::error, "purge_failed", {{"error", err}});
    });
}

// Waits until `c` holds or `deadline` passes: the conditions library's
// deadline condition or'ed with `c`, awaited without polling.
asio::awaitable<void> node::wait_until(std::chrono::steady_clock::time_point deadline, cond c) {
    if (c.value()) co_return;
    cond until_woken = c;
    if (deadline != std::chrono::steady_clock::time_point::max())
        until_woken = c || cond(make_deadline(ioc_.get_executor(), "deadline", deadline));
    co_await until_woken->async_wait_until(true, asio::as_tuple(asio::use_awaitable));
}

// A stream with nothing to send: says so to --exit-when-drained, then waits
// up to idle_grace for a commit (or a stop). True when one came.
asio::awaitable<bool> node::more_within_grace(stream_state& st) {
    check_drained();
    const cond more_or_stop = cond(st.wake) || stop_;  // named: g++ 12 and temporaries in co_await
    co_await wait_until(std::chrono::steady_clock::now() + idle_grace, more_or_stop);
    co_return st.wake->value();
}

// A batch's envelopes, comma-joined: one stream's part of a request.
std::string node::encode_list(const std::string& stream, const std::vector<pending_message>& batch) const {
    std::size_t n = 0;
    for (const auto& m : batch) n += envelope::encoded_size(m.id, stream, m.seq, o_.epoch, m.payload.size()) + 1;
    std::string list;
    list.reserve(n);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        if (i) list += ',';
        envelope::encode_to(list, batch[i].id, stream, batch[i].seq, o_.epoch, batch[i].payload);
    }
    return list;
}

// One envelope, or a batch of them: the data of a JetStream message (and, put
// together by the combiner, the body of an HTTP request).
std::string node::encode_body(const std::string& stream, const std::vector<pending_message>& batch) const {
    return envelope::encode_body({encode_list(stream, batch)}, batch.size());
}

// The Idempotency-Key (HTTP) and Nats-Msg-Id (JetStream) of a request: the
// message's id, or the first id and the last seq of a batch.
std::string node::batch_key(const std::vector<pending_message>& batch) {
    if (batch.size() == 1) return batch.front().id;
    return batch.front().id + ".." + std::to_string(batch.back().seq);
}

http::request node::make_request(std::string body, std::string key) const {
    http::request req{"POST", "/api/messages", {{"Content-Type", "application/json"}}, std::move(body)};
    req.set("Idempotency-Key", std::move(key));
    if (!tokens_.empty()) req.set("Authorization", "Bearer " + tokens_.front());
    return req;
}

// One batch over HTTP (sharing a request with other streams' batches when
// several are ready at once), retried quickly; what the answer means (decide()).
asio::awaitable<decision> node::send_http(const std::string& stream, const std::vector<pending_message>& batch,
                                          const retry_policy& quick, std::chrono::nanoseconds& server_wait) {
    const std::string list = encode_list(stream, batch), key = batch_key(batch);
    // What the classifier looks at: a POST with an Idempotency-Key (the
    // secondary deduplicates), so a send cut short may be repeated.
    http::request shape{"POST", "/api/messages", {}, {}};
    shape.set("Idempotency-Key", key);
    // Named first: g++ 12 mishandles non-trivial temporaries inside a co_await expression.
    auto attempt = classified([this, &stream, &list, &key, n = batch.size()](const attempt_context&) {
                                  return combined_->send(stream, list, n, key);
                              },
                              http::make_classifier(shape));
    auto r = co_await steadfast::retry(quick, std::move(attempt));

    delivery_outcome outcome;
    if (r.reason() == stop_reason::condition || r.reason() == stop_reason::cancelled || stop_->value()) {
        outcome.what = delivery_outcome::kind::stopped;
    } else if (r.has_value() && r.value().has_response()) {
        outcome.status = r.value().res().status;
        outcome.body = r.value().res().body;
        if (auto ra = r.value().res().get("Retry-After"))
            server_wait = http::parse_retry_after(*ra, std::chrono::system_clock::now()).value_or(server_wait);
    } else {
        // TLS's fault (a certificate, a name, not TLS; with TLS 1.3 a
        // refused client certificate shows after the handshake): an error
        // of OpenSSL's, not a reset, a timeout or a truncated stream.
        const bool handshake = r.has_value() && http::is_tls_error(r.value().error().ec);
        outcome.what = handshake ? delivery_outcome::kind::tls : delivery_outcome::kind::transport;
        outcome.detail = std::string(to_string(r.reason())) + ": " + r.last_error().message();
    }
    co_return decide(sent_batch{batch.front().seq, batch.back().seq}, outcome);
}

// A read of the outbox failed: say so, and pause before the processor tries again.
asio::awaitable<void> node::outbox_failed(const std::string& stream, const std::string& error) {
    app::log(level::error, "outbox_read_failed", {{"stream", stream}, {"error", error}});
    co_await wait_until(std::chrono::steady_clock::now() + storage_pause, stop_);
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

asio::awaitable<void> node::deliver(std::string stream) {
    stream_state& st = streams_.at(stream);  // map nodes are stable; erased only by retire(), after this ends
    // The client's connect/write/read timeouts bound an attempt; shutdown or
    // demotion (stop_) ends the quick retries at once, cancelling the send in
    // flight; no attempt starts while the secondary's probe fails.
    auto quick = retry_policy{}
                           .with_backoff(backoff::exponential(100ms, 2.0, o_.max_backoff).with_jitter(jitter::full))
                           // A Retry-After up to the ladder's first step is waited here; a
                           // longer one ends the quick retries (pushback) and the ladder
                           // waits it out durably (next_step).
                           .with_max_delay(std::max<std::chrono::nanoseconds>(o_.max_backoff, ladder_.base_delay(1, {})))
                           .with_stop(stop::max_attempts(o_.quick_retries))
                           .with_stop_when(stop_)
                           .with_attempt_when(online_)
                           .with_hooks({.before_attempt = [this](const attempt_context& c) {
                               attempts_.Increment();
                               if (c.number > 1) retries_.Increment();
                           }});
    // A JetStream request has no timeout of its own (an HTTP attempt has the
    // client's): the engine's attempt timeout bounds it.
    if (js_) quick = std::move(quick).with_attempt_timeout(o_.attempt_timeout);
    const std::size_t body_limit = std::min(o_.batch_bytes, envelope::limits{}.max_body_bytes);
    bool woken_by_recovery = false;
    bool retire_after_read = false;  // the window ran dry and its wait for more ended: one read, then retire
    while (!stop_->value()) {
        if (st.window.empty() && st.next && !st.next->done->value()) {
            // The read-ahead is still running: wait for it rather than read twice.
            const cond read_or_stop = cond(st.next->done) || stop_;  // named: g++ 12 and temporaries in co_await
            co_await wait_until(std::chrono::steady_clock::time_point::max(), read_or_stop);
            if (stop_->value()) break;
        }
        if (st.window.size() < o_.batch_max) take_read_ahead(st);
        if (st.window.empty()) {
            st.wake->clear();
            if (st.window_end != 0 && !st.more_maybe && st.acked != UINT64_MAX && st.acked >= st.window_end) {
                // Everything committed was sent and acknowledged, and the
                // outbox holds nothing the window lacks (what was committed
                // since either joined it or set more_maybe): no read. Wait a
                // little for more, then retire.
                if (co_await more_within_grace(st)) continue;
                // Before retiring, one read: the stream ends only when the
                // outbox says that nothing is left.
                st.more_maybe = true;
                retire_after_read = true;
                continue;
            }
            // Nothing joins the window while it is read (a commit answered
            // meanwhile is in the read), and a window forgotten meanwhile (a
            // recheck lowers the position) is read again.
            st.window_end = 0;
            const std::uint64_t gen = st.window_gen;
            outbox_reads_.Increment();
            const bool read_position = st.acked == UINT64_MAX;
            auto read = [this, &stream, from = st.acked, read_position](app::database&, bool&) {
                loaded l;
                l.acked = read_position ? out_.position(stream).acked_seq : from;
                l.batch = read_window(stream, l.acked);
                l.sched = out_.get_schedule(stream);
                return l;
            };
            auto got = co_await worker_.run<loaded>(ioc_.get_executor(), std::move(read));
            if (auto* e = std::get_if<std::string>(&got)) {
                co_await outbox_failed(stream, *e);
                continue;
            }
            if (st.window_gen != gen) continue;
            auto& l = std::get<loaded>(got);
            if (read_position) st.acked = st.acked_max = l.acked;
            st.window_end = l.batch.empty() ? l.acked : l.batch.back().seq;
            st.more_maybe = !l.batch.empty();
            if (l.batch.empty()) {
                // Nothing to send: wait a little for more, then retire.
                if (retire_after_read && !st.wake->value()) {
                    check_drained();
                    break;  // waited already
                }
                if (co_await more_within_grace(st)) {
                    retire_after_read = false;
                    continue;
                }
                break;
            }
            retire_after_read = false;
            st.window.assign(std::make_move_iterator(l.batch.begin()), std::make_move_iterator(l.batch.end()));
            st.head_at_ms = st.window.front().at_ms;  // read from the acknowledged seq: the oldest pending
            st.sched = l.sched.is_for(st.window.front().seq) ? l.sched : schedule{};
        }
        // Durable redelivery: not before the scheduled time, unless the
        // secondary just came back, or the operator asked (start, SIGHUP):
        // then at once. The ladder's step is kept: another failure waits
        // the next one.
        if (st.sched.next_at_ms > now_ms() && !woken_by_recovery && !st.retry_now->value()) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(st.sched.next_at_ms - now_ms());
            const cond asked = cond(st.retry_now);
            if (online_->value()) {
                const cond lost = stop_ || !cond(online_) || asked;
                co_await wait_until(until, lost);
                if (!online_->value() && !stop_->value() && !st.retry_now->value()) {
                    const cond back = stop_ || cond(online_) || asked;
                    co_await wait_until(std::chrono::steady_clock::time_point::max(), back);
                    woken_by_recovery = true;
                }
            } else {
                const cond back = stop_ || cond(online_) || asked;
                co_await wait_until(until, back);
                woken_by_recovery = online_->value();
            }
            if (!woken_by_recovery && !st.retry_now->value() && st.sched.next_at_ms > now_ms()) continue;
        }
        woken_by_recovery = false;
        if (st.retry_now->value()) st.retry_now->clear();

        if (js_ && !st.js_last) {
            // JetStream: where does the log stand? (at start, after a wrong
            // expected sequence, after a rewind.)
            decision d = co_await sync_log(stream, st, quick);
            forget_window(st);
            st.sched = {};
            switch (d.what) {
                case verdict::ack:
                    if (d.upto > st.acked) acknowledge(stream, st, d.upto);
                    continue;
                case verdict::rewind:
                    if (!co_await rewind(stream, st, d)) co_return;
                    continue;
                case verdict::demote:
                    demoted_->observe(std::max(d.epoch, o_.epoch + 1));
                    co_return;
                case verdict::block:
                    co_await block(stream, d.reason, d.detail);
                    co_return;
                case verdict::redeliver: {
                    // Named: g++ 12 frees a temporary in a co_await expression twice.
                    const pending_message head{st.acked + 1, {}, {}, 0};
                    if (!co_await next_step(stream, head, d, {}))
                        co_await wait_until(std::chrono::steady_clock::now() + storage_pause, stop_);
                    continue;
                }
                default: co_return;  // stop
            }
        }

        // The batch: the head of the window, within the count limit and the
        // request body limit by exact encoded size. A message too big to share
        // a request goes alone. Moved out of the window: on failure the window
        // is read again anyway.
        const std::size_t max = st.single_until > st.acked ? 1 : o_.batch_max;
        std::vector<pending_message> batch = window::take_batch(st.window, max, body_limit, stream, o_.epoch);
        st.head_at_ms = batch.front().at_ms;
        // Fewer than a batch left: read the next rows while this batch is in
        // flight, if there may be any (the last read was full, or messages
        // were committed since).
        if (max > 1 && st.window.size() < max && !(st.next && !st.next->done->value())) start_read_ahead(stream, st);

        std::chrono::nanoseconds server_wait{};  // a Retry-After: the next ladder step waits at least this
        // Not one conditional expression with two co_awaits: g++ 12 destroys its result twice.
        decision d;
        if (js_)
            d = co_await send_js(stream, st, batch, quick);
        else
            d = co_await send_http(stream, batch, quick, server_wait);
        if (d.what != verdict::ack) {
            forget_window(st);  // read again: the schedule or a tombstone may change what comes next
            st.sched = {};
        }

        if (d.what == verdict::rewind) {
            auto facts = [this, &stream](app::database&, bool&) {
                rewind_facts f;
                f.oldest = out_.oldest_seq(stream).value_or(0);
                f.next_seq = out_.position(stream).next_seq;
                return f;
            };
            auto got = co_await worker_.run<rewind_facts>(ioc_.get_executor(), std::move(facts));
            if (auto* e = std::get_if<std::string>(&got)) {
                co_await outbox_failed(stream, *e);
                continue;
            }
            const auto& f = std::get<rewind_facts>(got);
            const std::string seen = d.detail;
            d = decide_rewind(d.upto + 1, f.oldest, f.next_seq);
            d.detail = seen + (d.detail.empty() ? std::string{} : "; " + d.detail);
        }

        switch (d.what) {
            case verdict::stop: co_return;
            case verdict::ack: {
                const auto now = now_ms();
                for (auto& m : batch)
                    if (m.seq > st.acked_max && m.seq <= d.upto)
                        latency_.Observe(static_cast<double>(now - m.at_ms) / 1000.0);
                acknowledge(stream, st, d.upto);
                if (d.upto > st.rewound_to) st.rewound_to = UINT64_MAX;  // progress past a rewind
                if (d.upto < batch.back().seq) forget_window(st);  // a partial ack: the rest is read again
                if (st.sched.attempts > 0) {
                    // The ladder's wait is over: say so (the last line was a
                    // link_error), and drop the schedule now, before the next
                    // read of the window could load it again (the
                    // acknowledgement mark that also drops it comes later).
                    app::log(level::info, "link_recovered", {{"stream", stream}, {"seq", d.upto}, {"ladder_steps", st.sched.attempts},
                                                              {"pending", st.pending}});
                    worker_.post([this, stream](app::database&) {
                        out_.clear_schedule(stream);
                        return true;
                    }, [stream](const std::string& err) {
                        if (!err.empty()) app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", err}});
                    });
                }
                st.sched = {};
                break;
            }
            case verdict::demote:
                demoted_->observe(std::max(d.epoch, o_.epoch + 1));
                co_return;
            case verdict::isolate:
                st.single_until = batch.back().seq;  // find the message it rejects
                break;
            case verdict::dead_letter:
                if (envelope::is_tombstone(batch.front().payload)) {
                    // Even the tombstone is refused: the request, not the
                    // message, is at fault (a header the secondary cannot
                    // parse, a proxy in the way). Dead-lettering again would
                    // loop; stop the stream and say so.
                    co_await block(stream, "tombstone_refused",
                                   "the secondary refused the tombstone of seq " + std::to_string(batch.front().seq) +
                                       " too: " + d.reason);
                    co_return;
                }
                if (!co_await dead_letter(stream, batch.front(), d.reason))
                    co_await wait_until(std::chrono::steady_clock::now() + storage_pause, stop_);
                break;
            case verdict::redeliver:
                if (!co_await next_step(stream, batch.front(), d, server_wait))
                    co_await wait_until(std::chrono::steady_clock::now() + storage_pause, stop_);
                break;
            case verdict::rewind:
                if (!co_await rewind(stream, st, d)) co_return;
                break;
            case verdict::block:
                co_await block(stream, d.reason, d.detail);
                co_return;
            case verdict::resync:
                st.js_last.reset();  // read the log's last message before anything else is sent
                break;
        }
    }
}

// Resends from `d.upto` + 1 (the secondary, or the log, lost what it had
// acknowledged). The same rewind again without progress means that what is
// retained has a hole (a purge after a clock step): resending would loop, so
// the stream is blocked instead (false).
asio::awaitable<bool> node::rewind(const std::string& stream, stream_state& st, const decision& d) {
    if (st.rewound_to == d.upto) {
        const std::string why =
            d.detail + "; the retained messages from seq " + std::to_string(d.upto + 1) + " are not contiguous";
        co_await block(stream, "beyond_retention", why);
        co_return false;
    }
    st.rewound_to = d.upto;
    rewinds_.Increment();
    app::log(level::warn, "rewind", {{"stream", stream}, {"from_seq", d.upto + 1}, {"detail", d.detail}});
    st.acked = d.upto;
    st.single_until = 0;
    co_return true;
}

// Per-stream pending counts and oldest ages, from what is in memory: the
// streams with messages and the blocked ones. Streams gone since the last
// scrape lose their series.
void node::refresh_stream_metrics() {
    const auto now = now_ms();
    std::set<std::string> now_exposed;
    double oldest = 0;
    auto expose = [&](const std::string& stream, std::uint64_t pending, std::int64_t head_at_ms) {
        if (pending == 0) return;
        stream_pending_.Add({{"stream", stream}}).Set(static_cast<double>(pending));
        const double age = head_at_ms > 0 ? static_cast<double>(std::max<std::int64_t>(now - head_at_ms, 0)) / 1000.0 : 0.0;
        stream_age_.Add({{"stream", stream}}).Set(age);
        oldest = std::max(oldest, age);
        now_exposed.insert(stream);
    };
    for (const auto& [stream, st] : streams_) expose(stream, st.pending, st.head_at_ms);
    for (const auto& [stream, b] : blocked_) expose(stream, b.pending, b.head_at_ms);
    for (const auto& stream : exposed_streams_)
        if (!now_exposed.count(stream)) {
            stream_pending_.Remove(&stream_pending_.Add({{"stream", stream}}));
            stream_age_.Remove(&stream_age_.Add({{"stream", stream}}));
        }
    exposed_streams_ = std::move(now_exposed);
    oldest_age_.Set(oldest);
}

// The rows a window holds after `after`: at least a batch, at least 1,000,
// within the larger of a batch's bytes and 4 MiB (on the database thread).
std::vector<pending_message> node::read_window(const std::string& stream, std::uint64_t after) {
    return out_.pending(stream, after, std::max<std::size_t>(o_.batch_max, 1000),
                        std::max<std::size_t>(o_.batch_bytes, 4 << 20));
}

void node::forget_window(stream_state& st) {
    st.window.clear();
    st.window_end = 0;
    ++st.window_gen;  // a read-ahead still running is for the old window
}

// Reads the rows after the window on the database thread, into st.next, if
// there may be any.
void node::start_read_ahead(const std::string& stream, stream_state& st) {
    if (!st.window_end || !st.more_maybe) return;
    if (!st.next) {
        st.next = std::make_shared<read_ahead>();
        st.next->done = make_flag(ioc_.get_executor(), "read-ahead-" + stream, true);
    }
    auto ra = st.next;
    ra->done->clear();
    ra->gen = st.window_gen;
    ra->after = st.window_end;
    ra->rows.clear();
    ra->failed = false;
    // The read sees every commit answered before it ends; a later one joins
    // the window in memory or sets more_maybe again.
    st.more_maybe = false;
    outbox_reads_.Increment();
    worker_.post([this, stream, ra](app::database&) {
        ra->rows = read_window(stream, ra->after);
        return true;
    }, [this, ra](const std::string& err) {
        asio::post(ioc_, [ra, failed = !err.empty()] {
            ra->failed = failed;
            ra->done->set();
        });
    });
}

// Appends a finished read-ahead to the window, if it continues it (the
// window was not forgotten meanwhile), without the rows that joined the
// window in memory while it ran (window::fresh_rows). A failed one is
// dropped: the next read of the window tries again and reports the error.
void node::take_read_ahead(stream_state& st) {
    auto& ra = st.next;
    if (!ra || !ra->done->value()) return;
    if (ra->gen == st.window_gen && st.window_end) {
        // A failed read is read again (and reported by that read).
        const auto f = ra->failed ? window::fresh{ra->rows.size(), true} : window::fresh_rows(st.window_end, ra->after, ra->rows);
        if (f.read_again) st.more_maybe = true;
        if (f.from < ra->rows.size()) {
            st.window_end = ra->rows.back().seq;
            const auto from = ra->rows.begin() + static_cast<std::ptrdiff_t>(f.from);
            st.window.insert(st.window.end(), std::make_move_iterator(from), std::make_move_iterator(ra->rows.end()));
        }
    }
    ra->rows.clear();
    ra->failed = false;
    ra->gen = ~std::uint64_t{0};  // taken
}

// The secondary applied up to `upto`: sending goes on at once, and the outbox
// is marked on the database thread soon after, without waiting for it (queued
// jobs are finished before exit; a mark lost to a crash only means that the
// secondary answers "duplicate" after the restart).
void node::acknowledge(const std::string& stream, stream_state& st, std::uint64_t upto) {
    auto& t = trims_[stream];
    if (!t) t = std::make_shared<ack_trim>();
    if (upto > t->target.load(std::memory_order_relaxed)) t->target.store(upto, std::memory_order_relaxed);
    t->last.store(upto, std::memory_order_relaxed);
    schedule_trim(stream);
    // Only messages never acknowledged before count (a rewind resends some).
    const std::uint64_t fresh = upto > st.acked_max ? upto - st.acked_max : 0;
    st.acked = upto;
    st.acked_max = std::max(st.acked_max, upto);
    const std::uint64_t n = std::min<std::uint64_t>(fresh, st.pending);
    st.pending -= n;
    if (st.pending == 0) st.head_at_ms = 0;
    delivered_.Increment(static_cast<double>(n));
    pending_total_ -= std::min<std::uint64_t>(pending_total_, n);
    depth_.Set(static_cast<double>(pending_total_));
    check_drained();
}

// Marks the outbox at most every 10 ms per stream: a burst of
// acknowledgements costs one transaction, and the event loop is not woken per
// message. stop() queues a final one.
void node::schedule_trim(const std::string& stream) {
    auto t = trims_[stream];
    if (t->scheduled) return;
    t->scheduled = true;
    auto timer = std::make_shared<asio::steady_timer>(ioc_, 10ms);
    timer->async_wait([this, stream, t, timer](const boost::system::error_code&) {
        t->scheduled = false;
        trim(stream, t);  // also when retire() has forgotten the stream meanwhile
    });
}

void node::trim(const std::string& stream, const std::shared_ptr<ack_trim>& t) {
    worker_.post([this, stream, t](app::database&) {
        out_.acknowledge(stream, t->target.load(std::memory_order_relaxed), t->last.load(std::memory_order_relaxed), now_ms());
        return true;
    }, [stream](const std::string& err) {
        if (!err.empty()) app::log(level::error, "ack_failed", {{"stream", stream}, {"error", err}});
    });
}

// Quick retries are used up on a failure of the link or the secondary: the
// next ladder step goes to the outbox, so that a restart keeps the schedule.
// The last step repeats for as long as it takes; nothing is dead-lettered.
asio::awaitable<bool> node::next_step(const std::string& stream, const pending_message& head, const decision& d,
                                      std::chrono::nanoseconds server_wait) {
    link_errors_.Add({{"reason", d.link_error}}).Increment();
    redeliveries_.Increment();
    auto read = [this, &stream](app::database&, bool&) { return out_.get_schedule(stream); };
    auto got = co_await worker_.run<schedule>(ioc_.get_executor(), std::move(read));
    if (auto* e = std::get_if<std::string>(&got)) {
        app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", *e}});
        co_return false;
    }
    // The ladder's arithmetic (ladder.hpp): the step, the Retry-After, the bound.
    const ladder_plan plan = plan_next_step(std::get<schedule>(got), head.seq, ladder_, server_wait, now_ms());
    if (plan.retry_after_bounded)
        app::log(level::warn, "retry_after_bounded", {{"stream", stream}, {"retry_after_s", std::chrono::duration_cast<std::chrono::seconds>(server_wait).count()},
                                                      {"waiting_s", plan.delay.count() / 1000},
                                                      {"note", "the secondary asked for more than the ladder's last step"}});
    const schedule s = plan.next;
    const auto delay = plan.delay;
    auto write = [this, &stream, s](app::database&, bool&) {
        out_.set_schedule(stream, s);
        return true;
    };
    auto w = co_await worker_.run<bool>(ioc_.get_executor(), std::move(write));
    if (auto* e = std::get_if<std::string>(&w)) {
        app::log(level::error, "schedule_failed", {{"stream", stream}, {"error", *e}});
        co_return false;
    }
    app::log(level::warn, "link_error", {{"stream", stream}, {"seq", head.seq}, {"reason", d.link_error},
                                         {"detail", d.reason.substr(0, 300)}, {"secondary", o_.secondary},
                                         {"hint", hint_for(d)}, {"ladder_step", s.attempts},
                                         {"next_attempt_in_ms", delay.count()}, {"pending", pending_total_}});
    co_return true;
}

asio::awaitable<bool> node::dead_letter(const std::string& stream, const pending_message& m, const std::string& why) {
    auto job = [this, &stream, m, why](app::database&, bool&) {
        out_.dead_letter(stream, m, why, now_ms());
        return true;
    };
    auto r = co_await worker_.run<bool>(ioc_.get_executor(), std::move(job));
    if (auto* e = std::get_if<std::string>(&r)) {
        app::log(level::error, "dead_letter_failed", {{"stream", stream}, {"seq", m.seq}, {"error", *e},
                                                      {"note", "the message is kept and sent again"}});
        co_return false;
    }
    dead_.Increment();
    app::log(level::error, "dead_letter", {{"stream", stream}, {"seq", m.seq}, {"id", m.id}, {"reason", why},
                                           {"note", "a tombstone takes its place so the stream goes on"}});
    co_return true;
}

// Stops the stream: its messages stay in the outbox, new ones are still
// accepted; `status` and the metric report it until a restart tries again.
asio::awaitable<void> node::block(const std::string& stream, const std::string& reason, const std::string& detail) {
    auto job = [this, &stream, &reason](app::database&, bool&) {
        out_.set_blocked(stream, reason, now_ms());
        return true;
    };
    auto r = co_await worker_.run<bool>(ioc_.get_executor(), std::move(job));
    auto& st = streams_.at(stream);
    blocked_[stream] = {reason, st.pending, st.head_at_ms};
    blocks_.Increment();
    blocked_gauge_.Set(static_cast<double>(blocked_.size()));
    app::log(level::error, "blocked", {{"stream", stream}, {"reason", reason}, {"detail", detail}, {"pending", st.pending},
                                       {"recorded", !std::holds_alternative<std::string>(r)},
                                       {"hint", "nothing was acknowledged or dead-lettered; a restart tries the stream again"}});
    check_drained();
}

}  // namespace steadfast::primary
