// steadfast-primary: accepts messages durably (outbox), replicates them to the
// secondary in order, one active send per stream, retried through the engine,
// gated by the secondary's health, stopped by shutdown or demotion; quick
// retries first, then durable redelivery on a ladder, then dead letters.
// Contract: shared/CONTRACT.md.
#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "../common/sqlite.hpp"
#include "../common/token.hpp"
#include "outbox.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/envelope.hpp>
#include <steadfast/transport/health.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
namespace po = boost::program_options;
using namespace steadfast;
using namespace std::chrono_literals;
using app::level;

namespace {

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct options {
    std::string secondary, data, listen, token_file, stream = "default", ladder;
    bool from_stdin = false, exit_when_drained = false;
    app::sync_mode sync = app::sync_mode::full;
    std::uint64_t epoch = 0;
    std::size_t batch_max = 500, batch_bytes = 512 * 1024;
    std::uint32_t quick_retries = 5;
    std::chrono::milliseconds max_backoff{30'000}, attempt_timeout{10'000};
};

struct stream_state {
    std::shared_ptr<flag> wake;      // set when new messages were committed
    std::uint64_t acked = 0;         // highest seq the secondary acknowledged
    std::uint64_t single_until = 0;  // send one message at a time up to this seq (isolating a reject)
    // Read-ahead from the outbox, so that sending does not wait for a database
    // round trip per request. Cleared after any failure, so that the next read
    // sees the durable schedule and tombstones.
    std::deque<primary::pending_message> window;
    primary::schedule sched;
    // Acks are coalesced: the outbox is trimmed to the latest target every 10 ms.
    std::shared_ptr<std::atomic<std::uint64_t>> ack_target = std::make_shared<std::atomic<std::uint64_t>>(0);
    bool trim_scheduled = false;
};

class node {
public:
    node(const options& o, app::database& db)
        : o_(o),
          db_(db),
          out_(db),
          worker_(db),
          ladder_(o.ladder.empty() ? backoff::rocketmq() : backoff::schedule(o.ladder)),
          ladder_steps_(ladder_.steps()),
          client_(ioc_.get_executor(), client_options(o)),
          probe_client_(ioc_.get_executor(), http::client::from_url(o.secondary)),
          shutdown_(make_flag(ioc_.get_executor(), "shutdown-requested")),
          demoted_(make_demoted(ioc_.get_executor(), o.epoch)),
          stop_(cond(shutdown_) || cond(demoted_)),
          registry_(std::make_shared<prometheus::Registry>()),
          published_(counter("steadfast_primary_published_total", "Messages accepted into the outbox")),
          delivered_(counter("steadfast_primary_delivered_total", "Messages acknowledged by the secondary")),
          attempts_(counter("steadfast_primary_attempts_total", "Send attempts to the secondary")),
          retries_(counter("steadfast_primary_retries_total", "Send attempts that were retries")),
          dead_(counter("steadfast_primary_dead_letter_total", "Messages moved to the dead-letter table")),
          auth_failures_(counter("steadfast_primary_auth_failures_total", "Sends refused by the secondary with 401/403")),
          depth_(prometheus::BuildGauge().Name("steadfast_primary_outbox_depth").Help("Messages waiting in the outbox").Register(*registry_).Add({})),
          online_gauge_(prometheus::BuildGauge().Name("steadfast_primary_secondary_online").Help("1 when the secondary's health probe passes").Register(*registry_).Add({})),
          latency_(prometheus::BuildHistogram().Name("steadfast_primary_delivery_latency_seconds").Help("From acceptance to acknowledgement").Register(*registry_).Add({}, app::latency_buckets())) {
        if (!o.token_file.empty()) token_ = app::read_token_file(o.token_file);
        probe_options po;
        po.interval = 1s;
        po.failing_backoff = backoff::exponential(50ms, 1.5, 200ms);
        po.check_timeout = 1s;
        po.failures_to_offline = 2;
        po.initially_online = true;
        online_ = make_secondary_online(ioc_.get_executor(), [this] { return http::health_check(probe_client_); }, po);
        online_->subscribe(online_sub_, [this](bool v) {
            online_gauge_.Set(v ? 1 : 0);
            log(v ? level::info : level::warn, v ? "secondary_online" : "secondary_offline", {{"secondary", o_.secondary}});
        });
        online_gauge_.Set(1);
    }

    int run() {
        // Resume: every stream with messages waiting gets its processor.
        auto st = out_.status();
        for (auto& [name, s] : st) {
            pending_total_ += s.pending;
            streams_[name].acked = s.acked_seq;
        }
        depth_.Set(static_cast<double>(pending_total_));
        log(level::info, "started", {{"data", db_.path()}, {"pending", pending_total_}, {"secondary", o_.secondary},
                                     {"epoch", o_.epoch}, {"streams", st.size()}, {"dead_letter", out_.dead_letter_count()}});
        for (auto& [name, s] : streams_) start_processor(name);
        input_closed_ = !o_.from_stdin;

        std::optional<http::server> server;
        if (!o_.listen.empty()) {
            auto [host, port] = http::parse_listen_address(o_.listen);
            server.emplace(ioc_.get_executor(), routes());
            auto ep = server->listen(host, port);
            server->start();
            log(level::info, "listening", {{"address", ep.address().to_string()}, {"port", ep.port()}});
        }
        server_ = server ? &*server : nullptr;

        asio::signal_set signals(ioc_, SIGINT, SIGTERM);
        signals.async_wait([this](const boost::system::error_code& ec, int sig) {
            if (!ec) stop("signal " + std::to_string(sig));
        });
        demoted_->subscribe(demoted_sub_, [this](bool v) {
            if (v) {
                log(level::error, "demoted", {{"epoch", o_.epoch}, {"reason", "the secondary has seen a newer epoch"}});
                exit_code_ = 3;
                stop("demoted");
            }
        });

        std::thread reader;
        if (o_.from_stdin) reader = std::thread([this] { read_stdin(); });
        check_drained();
        ioc_.run();
        if (reader.joinable()) {
            stdin_stop_ = true;  // it notices within 100 ms
            reader.join();
        }
        log(level::info, "stopped", {{"pending", pending_total_}, {"exit_code", exit_code_}});
        return exit_code_;
    }

private:
    static http::client::options client_options(const options& o) {
        auto c = http::client::from_url(o.secondary);
        c.read_timeout = o.attempt_timeout;
        c.write_timeout = std::min<std::chrono::nanoseconds>(c.write_timeout, o.attempt_timeout);
        return c;
    }
    prometheus::Counter& counter(const char* name, const char* help) {
        return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
    }

    // ---- shutdown and drain ----
    void stop(const std::string& why) {
        if (stopping_) return;
        stopping_ = true;
        log(level::info, "shutting_down", {{"reason", why}, {"pending", pending_total_}});
        shutdown_->set();
        online_->stop();
        for (auto& sig : signals_) sig->emit(asio::cancellation_type::terminal);  // sends in flight
        for (auto& [name, st] : streams_)
            if (st.ack_target->load() > 0) trim(name, st);  // the db thread finishes it before exit
        asio::co_spawn(ioc_, [this]() -> asio::awaitable<void> {
            if (server_) co_await server_->shutdown();
            // Processors end at once (stop-when); give them a moment to leave.
            asio::steady_timer t(ioc_, 50ms);
            co_await t.async_wait(asio::use_awaitable);
            ioc_.stop();
        }, asio::detached);
    }
    void check_drained() {
        if (o_.exit_when_drained && input_closed_ && pending_total_ == 0 && publishing_ == 0 && !stopping_) {
            log(level::info, "drained");
            stop("drained");
        }
    }

    // ---- intake ----
    http::router routes() {
        http::router r;
        r.add("GET", "/health", [this](http::request&) -> asio::awaitable<http::response> {
            co_return http::response::json(200, std::string("{\"status\":\"ok\",\"secondary_online\":") +
                                                    (online_->value() ? "true" : "false") + "}");
        });
        r.add("GET", "/metrics", [this](http::request&) -> asio::awaitable<http::response> {
            http::response res;
            res.body = app::expose(*registry_);
            res.set("Content-Type", "text/plain; version=0.0.4");
            co_return res;
        });
        r.add("POST", "/publish", [this](http::request& req) -> asio::awaitable<http::response> {
            std::string stream = o_.stream;
            if (auto q = http::query_param(req.target, "stream")) stream = std::string(*q);
            if (!envelope::valid_stream_name(stream))
                co_return http::response::error(400, "stream must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
            std::string payload;
            if (auto err = normalize(req.body, payload); !err.empty()) co_return http::response::error(400, err);
            if (stopping_) co_return http::response::error(503, "shutting down");
            ++publishing_;
            auto items = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
            items->emplace_back(stream, std::move(payload));
            // Job lambdas are named before the co_await: g++ 12 released a
            // shared_ptr captured by a lambda temporary inside co_await twice (ASan).
            auto job1 = [this, items](app::database&, bool&) { return out_.publish(*items, now_ms()); };
            auto r2 = co_await worker_.run<std::vector<primary::published>>(
                ioc_.get_executor(), std::move(job1));
            --publishing_;
            if (auto* e = std::get_if<std::string>(&r2)) {
                log(level::error, "publish_failed", {{"error", *e}});
                co_return http::response::error(503, "storage failure: " + *e);
            }
            const auto& p = std::get<0>(r2).front();
            committed(p.stream, 1);
            co_return http::response::json(202, "{\"id\":\"" + http::json_escape(p.id) + "\",\"stream\":\"" +
                                                     http::json_escape(p.stream) + "\",\"seq\":" + std::to_string(p.seq) + "}");
        });
        return r;
    }

    // Checks that `body` is one JSON value and stores its compact form.
    static std::string normalize(std::string_view body, std::string& out) {
        auto parsed = envelope::parse_json(body, 64);
        if (auto* e = std::get_if<envelope::json_error>(&parsed)) return e->too_deep ? e->message : "body is not JSON: " + e->message;
        out = std::get<nlohmann::json>(parsed).dump();
        return {};
    }

    // After a commit of `n` messages on `stream` (on the io thread).
    void committed(const std::string& stream, std::size_t n) {
        published_.Increment(static_cast<double>(n));
        pending_total_ += n;
        depth_.Set(static_cast<double>(pending_total_));
        auto it = streams_.find(stream);
        if (it == streams_.end()) {
            streams_[stream];
            start_processor(stream);
        } else {
            it->second.wake->set();
        }
    }

    // The --stdin reader thread: one JSON payload a line; lines are committed in
    // groups (group commit) with a bounded number of groups in flight. It polls
    // with a timeout so that a shutdown never waits on an open pipe.
    void read_stdin() {
        std::vector<std::pair<std::string, std::string>> group;
        std::mutex m;
        std::condition_variable cv;
        int in_flight = 0;
        auto flush = [&] {
            if (group.empty()) return;
            auto items = std::make_shared<std::vector<std::pair<std::string, std::string>>>(std::move(group));
            group.clear();
            {
                std::unique_lock l(m);
                cv.wait(l, [&] { return in_flight < 4; });
                ++in_flight;
            }
            asio::post(ioc_, [this] { ++publishing_; });  // runs before this group's completion
            auto result = std::make_shared<std::vector<primary::published>>();
            worker_.post([this, items, result](app::database&) {
                *result = out_.publish(*items, now_ms());
                return true;
            }, [this, items, result, &m, &cv, &in_flight](const std::string& err) {
                if (!err.empty()) {
                    // Nothing of the group was committed: say so, and stop reading.
                    std::cerr << "steadfast-primary: storing " << items->size() << " stdin lines failed: " << err << "\n";
                    stdin_stop_ = true;
                }
                asio::post(ioc_, [this, result] {
                    std::map<std::string, std::size_t> per;
                    for (auto& p : *result) ++per[p.stream];
                    for (auto& [s, n] : per) committed(s, n);
                    --publishing_;
                    check_drained();
                });
                std::lock_guard l(m);
                --in_flight;
                cv.notify_all();
            });
        };
        std::uint64_t line_no = 0;
        std::string pending;  // a partial line
        std::vector<char> buf(1 << 20);
        auto take_line = [&](std::string_view line) {
            ++line_no;
            if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
            std::string payload;
            if (auto err = normalize(line, payload); !err.empty()) {
                std::cerr << "steadfast-primary: stdin line " << line_no << " skipped: " << err << "\n";
                return;
            }
            group.emplace_back(o_.stream, std::move(payload));
        };
        bool eof = false;
        while (!stdin_stop_ && !eof) {
            pollfd pfd{0, POLLIN, 0};
            const int pr = ::poll(&pfd, 1, 100);
            if (pr < 0 && errno != EINTR) break;
            if (pr <= 0) {
                flush();  // a pause in the input: commit what we have
                continue;
            }
            const ssize_t n = ::read(0, buf.data(), buf.size());
            if (n < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                std::cerr << "steadfast-primary: reading stdin failed: " << std::strerror(errno) << "\n";
                break;
            }
            if (n == 0) {
                eof = true;
                break;
            }
            std::string_view chunk(buf.data(), static_cast<std::size_t>(n));
            while (!chunk.empty()) {
                const auto nl = chunk.find('\n');
                if (nl == std::string_view::npos) {
                    pending.append(chunk);
                    break;
                }
                if (pending.empty()) {
                    take_line(chunk.substr(0, nl));
                } else {
                    pending.append(chunk.substr(0, nl));
                    take_line(pending);
                    pending.clear();
                }
                chunk.remove_prefix(nl + 1);
                if (group.size() >= 4000) flush();
            }
        }
        if (eof && !pending.empty()) take_line(pending);
        flush();
        std::unique_lock l(m);
        cv.wait(l, [&] { return in_flight == 0; });
        asio::post(ioc_, [this, line_no, eof] {
            log(level::info, "input_closed", {{"lines", line_no}, {"eof", eof}});
            input_closed_ = true;
            check_drained();
        });
    }

    // ---- delivery ----
    void start_processor(const std::string& stream) {
        auto& s = streams_[stream];
        s.wake = make_flag(ioc_.get_executor(), "pending-" + stream, true);
        auto& sig = signals_.emplace_back(std::make_unique<asio::cancellation_signal>());
        asio::co_spawn(ioc_, deliver(stream), asio::bind_cancellation_slot(sig->slot(), [this, stream](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                log(level::error, "processor_failed", {{"stream", stream}, {"error", ex.what()}});
            }
        }));
    }

    // Waits until `deadline`, or until `a` turns to `va`, or `b` to `vb`.
    // (Two plain pairs: g++ 12 rejects an initializer_list inside co_await.)
    asio::awaitable<void> wait(std::chrono::steady_clock::time_point deadline, condition* a, bool va,
                               condition* b = nullptr, bool vb = false) {
        if (a->value() == va || (b && b->value() == vb)) co_return;
        asio::steady_timer t(ioc_, deadline);
        watchable::subscription sa, sb;
        a->subscribe(sa, [&t, va](bool now) {
            if (now == va) t.cancel();
        });
        if (b)
            b->subscribe(sb, [&t, vb](bool now) {
                if (now == vb) t.cancel();
            });
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }

    std::string encode(const std::string& stream, const primary::pending_message& m) const {
        std::string s;
        s.reserve(m.payload.size() + m.id.size() + stream.size() + 80);
        s += "{\"id\":\"";
        s += http::json_escape(m.id);
        s += "\",\"stream\":\"";
        s += stream;
        s += "\",\"seq\":";
        s += std::to_string(m.seq);
        s += ",\"epoch\":";
        s += std::to_string(o_.epoch);
        s += ",\"payload\":";
        s += m.payload;
        s += '}';
        return s;
    }

    struct loaded {
        std::vector<primary::pending_message> batch;
        primary::schedule sched;
    };

    asio::awaitable<void> deliver(std::string stream) {
        auto& st = streams_[stream];
        // No engine-level attempt timeout or stop-when here: each would race
        // every attempt against a timer. The client's connect/write/read
        // timeouts bound an attempt, and shutdown or demotion cancels the send
        // in flight through this processor's cancellation signal (stop()).
        co_await asio::this_coro::throw_if_cancelled(false);
        const auto quick = retry_policy{}
                               .with_backoff(backoff::exponential(100ms, 2.0, o_.max_backoff).with_jitter(jitter::full))
                               .with_stop(stop::max_attempts(o_.quick_retries))
                               .with_attempt_when(online_)
                               .with_hooks({.before_attempt = [this](const attempt_context& c) {
                                   attempts_.Increment();
                                   if (c.number > 1) retries_.Increment();
                               }});
        bool woken_by_recovery = false;
        while (!stop_->value()) {
            st.wake->clear();
            const std::size_t max = st.single_until > st.acked ? 1 : o_.batch_max;
            if (st.window.empty()) {
                const std::size_t ahead = std::max<std::size_t>(o_.batch_max, 1000);
                auto job2 = [this, &stream, &st, ahead](app::database&, bool&) {
                    return loaded{out_.pending(stream, st.acked, ahead, std::max<std::size_t>(o_.batch_bytes, 4 << 20)),
                                  out_.get_schedule(stream)};
                };
                auto got = co_await worker_.run<loaded>(ioc_.get_executor(), std::move(job2));
                if (auto* e = std::get_if<std::string>(&got)) {
                    log(level::error, "outbox_read_failed", {{"stream", stream}, {"error", *e}});
                    co_await wait(std::chrono::steady_clock::now() + 1s, stop_.get().get(), true);
                    continue;
                }
                auto& l = std::get<loaded>(got);
                st.window.assign(std::make_move_iterator(l.batch.begin()), std::make_move_iterator(l.batch.end()));
                st.sched = l.sched;
            }
            // The batch: the head of the window, within the count and byte limits.
            // Moved out of the window: on failure the window is re-read anyway.
            std::vector<primary::pending_message> batch;
            std::size_t bytes = 0;
            while (!st.window.empty() && batch.size() < max) {
                bytes += st.window.front().payload.size() + st.window.front().id.size() + 64;
                if (!batch.empty() && bytes > o_.batch_bytes) break;
                batch.push_back(std::move(st.window.front()));
                st.window.pop_front();
            }
            const primary::schedule& sched = st.sched;
            if (batch.empty()) {
                check_drained();
                co_await wait(std::chrono::steady_clock::time_point::max(), st.wake.get(), true, stop_.get().get(), true);
                continue;
            }
            // Durable redelivery: not before the scheduled time, unless the
            // secondary just came back (then at once).
            if (sched.next_at_ms > now_ms() && !woken_by_recovery) {
                for (auto it = batch.rbegin(); it != batch.rend(); ++it) st.window.push_front(std::move(*it));
                const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(sched.next_at_ms - now_ms());
                if (online_->value()) {
                    co_await wait(until, stop_.get().get(), true, online_.get(), false);
                    if (!online_->value() && !stop_->value()) {
                        co_await wait(std::chrono::steady_clock::time_point::max(), stop_.get().get(), true, online_.get(), true);
                        woken_by_recovery = true;
                    }
                } else {
                    co_await wait(until, stop_.get().get(), true, online_.get(), true);
                    woken_by_recovery = online_->value();
                }
                continue;
            }
            woken_by_recovery = false;

            http::request req{"POST", "/api/messages", {{"Content-Type", "application/json"}}, {}};
            if (batch.size() == 1) {
                req.body = encode(stream, batch[0]);
                req.set("Idempotency-Key", batch[0].id);
            } else {
                std::vector<std::string> parts;
                parts.reserve(batch.size());
                for (const auto& m : batch) parts.push_back(encode(stream, m));
                std::vector<std::string_view> views(parts.begin(), parts.end());
                req.body = envelope::encode_batch_raw(views);
                req.set("Idempotency-Key", batch.front().id + ".." + std::to_string(batch.back().seq));
            }
            if (!token_.empty()) req.set("Authorization", "Bearer " + token_);
            // Named first: g++ 12 mishandles non-trivial temporaries inside a co_await expression.
            auto attempt = classified([this, &req](const attempt_context&) { return client_.send(req); },
                                      http::make_classifier(req));
            auto r = co_await steadfast::retry(quick, std::move(attempt));

            if (r.reason() == stop_reason::condition || r.reason() == stop_reason::cancelled || stop_->value()) break;
            if (r.ok()) {
                acknowledge(stream, st, batch, batch.back().seq);
                continue;
            }
            st.window.clear();  // re-read: the schedule or a tombstone may change what comes next
            const http::response* res = r.has_value() && r.value().has_response() ? &r.value().res() : nullptr;
            if (res && res->status == 409) {
                auto j = nlohmann::json::parse(res->body, nullptr, false);
                const std::string err = j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
                if (err == "stale_epoch") {
                    // A stale_epoch answer means a newer term exists, whatever
                    // epoch it names (and a malformed one must not throw here).
                    const std::uint64_t seen =
                        j.contains("epoch") && j["epoch"].is_number_unsigned() ? j["epoch"].get<std::uint64_t>() : 0;
                    demoted_->observe(std::max(seen, o_.epoch + 1));
                    break;
                }
                if (err == "gap" && j.contains("expected") && j["expected"].is_number_unsigned()) {
                    const auto expected = j["expected"].get<std::uint64_t>();
                    if (expected > batch.front().seq) {
                        // The secondary already has the start of this batch.
                        std::vector<primary::pending_message> done;
                        for (auto& m : batch)
                            if (m.seq < expected) done.push_back(m);
                        acknowledge(stream, st, done, expected - 1);
                        continue;
                    }
                    log(level::error, "secondary_behind", {{"stream", stream}, {"expected", expected}, {"first_pending", batch.front().seq},
                                                           {"hint", "the secondary lost acknowledged messages; they are no longer in the outbox"}});
                }
                co_await next_step(stream, batch.front(), "409 " + res->body, false);
                continue;
            }
            if (res && (res->status == 401 || res->status == 403)) {
                auth_failures_.Increment();
                log(level::error, "auth_failed", {{"stream", stream}, {"status", res->status}, {"secondary", o_.secondary},
                                                  {"hint", "check --token-file against the secondary's"}, {"pending", pending_total_}});
                co_await next_step(stream, batch.front(), "auth " + std::to_string(res->status), false);
                continue;
            }
            if (r.reason() == stop_reason::permanent && res && res->status >= 400 && res->status < 500) {
                if (batch.size() > 1) {
                    st.single_until = batch.back().seq;  // find the message it rejects
                    continue;
                }
                co_await dead_letter(stream, batch.front(), std::to_string(res->status) + " " + res->body);
                continue;
            }
            // Only an answer from the secondary can make a message a dead letter;
            // a transport failure (even a permanent one, such as a host that does
            // not resolve) is a problem of the link, and the messages wait.
            co_await next_step(stream, batch.front(),
                               std::string(to_string(r.reason())) + ": " + r.last_error().message(), res != nullptr);
        }
    }

    // The secondary applied up to `upto`: sending goes on at once, and the
    // outbox is trimmed on the database thread soon after, without waiting for
    // it (queued jobs are finished before exit; an ack lost to a crash only
    // means the secondary answers "duplicate" after the restart).
    void acknowledge(const std::string& stream, stream_state& st, const std::vector<primary::pending_message>& msgs,
                     std::uint64_t upto) {
        st.ack_target->store(upto, std::memory_order_relaxed);
        schedule_trim(stream, st);
        st.acked = upto;
        const auto now = now_ms();
        for (auto& m : msgs) latency_.Observe(static_cast<double>(now - m.at_ms) / 1000.0);
        delivered_.Increment(static_cast<double>(msgs.size()));
        pending_total_ -= std::min<std::uint64_t>(pending_total_, msgs.size());
        depth_.Set(static_cast<double>(pending_total_));
        check_drained();
    }

    // Trims the outbox to the acknowledged seq at most every 10 ms per stream:
    // a burst of acknowledgements costs one transaction, and the event loop is
    // not woken per message. stop() queues a final trim.
    void schedule_trim(const std::string& stream, stream_state& st) {
        if (st.trim_scheduled) return;
        st.trim_scheduled = true;
        auto t = std::make_shared<asio::steady_timer>(ioc_, 10ms);
        t->async_wait([this, stream, t](const boost::system::error_code&) {
            auto& s2 = streams_[stream];
            s2.trim_scheduled = false;
            trim(stream, s2);
        });
    }
    void trim(const std::string& stream, stream_state& st) {
        worker_.post([this, stream, target = st.ack_target](app::database&) {
            out_.acknowledge(stream, target->load(std::memory_order_relaxed));
            return true;
        }, [stream](const std::string& err) {
            if (!err.empty()) log(level::error, "ack_failed", {{"stream", stream}, {"error", err}});
        });
    }

    // Quick retries are used up: the next ladder step goes to the outbox, so a
    // restart keeps the schedule; past the last step, a dead letter.
    asio::awaitable<void> next_step(const std::string& stream, const primary::pending_message& head, const std::string& why,
                                    bool may_dead_letter) {
        auto job4 = [this, &stream](app::database&, bool&) {
            return out_.get_schedule(stream);
        };
        auto sched = co_await worker_.run<primary::schedule>(ioc_.get_executor(), std::move(job4));
        if (auto* e = std::get_if<std::string>(&sched)) {
            log(level::error, "schedule_failed", {{"stream", stream}, {"error", *e}});
            co_return;
        }
        auto s = std::get<primary::schedule>(sched);
        ++s.attempts;
        if (may_dead_letter && s.attempts > ladder_steps_) {
            co_await dead_letter(stream, head, "redelivery ladder exhausted: " + why);
            co_return;
        }
        const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(
            ladder_.base_delay(std::min<std::uint32_t>(s.attempts, static_cast<std::uint32_t>(ladder_steps_)), {}));
        s.next_at_ms = now_ms() + delay.count();
        auto job5 = [this, &stream, s](app::database&, bool&) {
            out_.set_schedule(stream, s);
            return true;
        };
        co_await worker_.run<bool>(ioc_.get_executor(), std::move(job5));
        log(level::warn, "redelivery_scheduled", {{"stream", stream}, {"seq", head.seq}, {"step", s.attempts},
                                                  {"delay_ms", delay.count()}, {"reason", why}});
    }

    asio::awaitable<void> dead_letter(const std::string& stream, const primary::pending_message& m, const std::string& why) {
        auto job6 = [this, &stream, m, why](app::database&, bool&) {
            out_.dead_letter(stream, m, why, now_ms());
            return true;
        };
        auto r = co_await worker_.run<bool>(ioc_.get_executor(), std::move(job6));
        if (std::get_if<std::string>(&r)) co_return;
        dead_.Increment();
        log(level::error, "dead_letter", {{"stream", stream}, {"seq", m.seq}, {"id", m.id}, {"reason", why},
                                          {"note", "a tombstone takes its place so the stream goes on"}});
    }

    const options& o_;
    asio::io_context ioc_{1};
    app::database& db_;
    primary::outbox out_;
    app::db_worker worker_;
    backoff ladder_;
    std::size_t ladder_steps_;
    http::client client_, probe_client_;
    std::string token_;
    std::shared_ptr<flag> shutdown_;
    std::shared_ptr<epoch_fence> demoted_;
    cond stop_;
    std::shared_ptr<probe_condition<>> online_;
    watchable::subscription online_sub_, demoted_sub_;
    std::shared_ptr<prometheus::Registry> registry_;
    prometheus::Counter &published_, &delivered_, &attempts_, &retries_, &dead_, &auth_failures_;
    prometheus::Gauge &depth_, &online_gauge_;
    prometheus::Histogram& latency_;
    std::map<std::string, stream_state> streams_;
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals_;  // one per processor, outlives it
    std::uint64_t pending_total_ = 0;
    int publishing_ = 0;  // publishes between acceptance and commit (io thread only)
    bool input_closed_ = false, stopping_ = false;
    std::atomic<bool> stdin_stop_{false};
    http::server* server_ = nullptr;
    int exit_code_ = 0;
};

int status(const std::string& dir) {
    const auto path = (std::filesystem::path(dir) / "primary.db").string();
    if (!std::filesystem::exists(path)) {
        std::cerr << "steadfast-primary status: no database at \"" << path << "\"\n";
        return 1;
    }
    app::database db(dir, "primary.db", "steadfast-primary", app::sync_mode::off);
    primary::outbox out(db);
    auto st = out.status();
    nlohmann::json j = {{"pending", 0}, {"acked_seq", nlohmann::json::object()}, {"next_seq", nlohmann::json::object()}};
    std::uint64_t pending = 0;
    for (auto& [s, v] : st) {
        pending += v.pending;
        j["acked_seq"][s] = v.acked_seq;
        j["next_seq"][s] = v.next_seq;
    }
    j["pending"] = pending;
    j["dead_letter"] = out.dead_letter_count();
    std::cout << j.dump() << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc >= 2 && std::string_view(argv[1]) == "status") {
            std::string data;
            po::options_description d("steadfast-primary status");
            d.add_options()("data", po::value(&data)->required(), "data directory")("help", "this help");
            po::variables_map vm;
            po::store(po::parse_command_line(argc - 1, argv + 1, d), vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-primary status --data DIR\n" << d;
                return 0;
            }
            po::notify(vm);
            return status(data);
        }
        options o;
        std::string sync;
        long long max_backoff_ms = 30'000, attempt_timeout_ms = 10'000;
        po::options_description d("steadfast-primary: replicates messages to a secondary, durably and in order");
        d.add_options()
            ("secondary", po::value(&o.secondary)->required(), "the secondary, e.g. http://127.0.0.1:9001")
            ("data", po::value(&o.data)->required(), "data directory (created if missing)")
            ("listen", po::value(&o.listen), "HOST:PORT for /publish, /health, /metrics")
            ("token-file", po::value(&o.token_file), "file whose first line is the bearer token to send")
            ("stream", po::value(&o.stream)->default_value("default"), "stream for --stdin and /publish without ?stream=")
            ("stdin", po::bool_switch(&o.from_stdin), "publish each line of standard input (one JSON value a line)")
            ("exit-when-drained", po::bool_switch(&o.exit_when_drained), "exit 0 once input is closed and everything is acknowledged")
            ("sync", po::value(&sync)->default_value("full"), "full: fsync before acknowledging; off: for benchmarks")
            ("epoch", po::value(&o.epoch)->default_value(0), "this primary's term; a secondary that saw a newer one fences it")
            ("batch-max", po::value(&o.batch_max)->default_value(500), "messages per request at most")
            ("batch-bytes", po::value(&o.batch_bytes)->default_value(512 * 1024), "payload bytes per request at most")
            ("quick-retries", po::value(&o.quick_retries)->default_value(5), "attempts before durable redelivery takes over")
            ("max-backoff-ms", po::value(&max_backoff_ms)->default_value(30'000), "cap of the quick retries' backoff")
            ("attempt-timeout-ms", po::value(&attempt_timeout_ms)->default_value(10'000), "per-attempt timeout (the HTTP read timeout)")
            ("ladder", po::value(&o.ladder), "durable redelivery ladder, e.g. \"10s 30s 1m\" (default: RocketMQ's 16 steps)")
            ("help", "this help");
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, d), vm);
        if (vm.count("help")) {
            std::cout << "usage: steadfast-primary --secondary URL --data DIR [options]\n"
                         "       steadfast-primary status --data DIR\n\n"
                      << d;
            return 0;
        }
        po::notify(vm);
        o.sync = app::parse_sync(sync);
        if (o.batch_max == 0) throw std::invalid_argument("--batch-max must be at least 1");
        if (o.batch_bytes < 1024) throw std::invalid_argument("--batch-bytes must be at least 1024");
        if (o.quick_retries == 0) throw std::invalid_argument("--quick-retries must be at least 1");
        if (max_backoff_ms < 100) throw std::invalid_argument("--max-backoff-ms must be at least 100");
        if (attempt_timeout_ms < 10) throw std::invalid_argument("--attempt-timeout-ms must be at least 10");
        o.max_backoff = std::chrono::milliseconds(max_backoff_ms);
        o.attempt_timeout = std::chrono::milliseconds(attempt_timeout_ms);
        if (!o.ladder.empty()) (void)backoff::schedule(o.ladder);  // refuses a bad ladder with its message
        if (!envelope::valid_stream_name(o.stream)) throw std::invalid_argument("--stream must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
        (void)http::client::from_url(o.secondary);
        if (!o.listen.empty()) (void)http::parse_listen_address(o.listen);
        if (!o.from_stdin && o.listen.empty() && !o.exit_when_drained)
            app::log(level::warn, "no_input", {{"hint", "without --stdin or --listen only the existing outbox is delivered"}});
        app::init_log("primary");
        app::database db(o.data, "primary.db", "steadfast-primary", o.sync);
        node n(o, db);
        return n.run();
    } catch (const po::error& e) {
        std::cerr << "steadfast-primary: " << e.what() << " (see --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "steadfast-primary: " << e.what() << "\n";
        return 1;
    }
}
