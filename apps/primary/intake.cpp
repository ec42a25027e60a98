// The primary's intake: POST /publish and --stdin. A payload is checked as
// the secondary will check it (so that nothing accepted is ever
// dead-lettered for its shape), committed to the outbox, and only then
// acknowledged. A failed commit takes no seq and is answered 503 (HTTP) or
// ends the process with a non-zero code (stdin).
#include "node.hpp"
#include <common/json_body.hpp>
#include <common/nats_problem.hpp>
#include <common/readiness.hpp>
#include <common/token.hpp>

#include <steadfast/replication/envelope.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <mutex>
#include <tuple>
#include <variant>

namespace asio = boost::asio;
using steadfast::app::level;

namespace steadfast::primary {

std::size_t node::envelope_overhead(std::string_view stream) const {
    return c_.envelope_overhead(stream, o_.epoch);
}

// Whether a publish to `stream` would exceed --max-streams: streams with
// pending messages (idle processors in their grace period do not count), and
// streams that publishes under way are adding to (each counted once).
bool node::at_stream_cap(const std::string& stream) const {
    if (c_.rep.streams().has_pending(stream) || admitting_.contains(stream)) return false;
    // Far from the cap (every stream in memory and every one being admitted
    // counted, busy or not), no walk: the count below looks at each stream.
    const auto& t = c_.rep.streams();
    if (t.size() + t.blocked_count() + admitting_.size() < o_.max_streams) return false;
    auto busy = t.busy_streams();
    for (const auto& [s, n] : admitting_)
        if (!t.has_pending(s)) ++busy;
    return busy >= o_.max_streams;
}

// Also for a stream with messages pending: they may all be acknowledged
// before this commit lands, and the stream must still hold its place.
node::stream_admission::stream_admission(node& n, const std::string& stream)
    : n_(n), held_(n.admitting_.try_emplace(stream, 0).first) {
    ++held_->second;
}

node::stream_admission::~stream_admission() {
    if (--held_->second == 0) n_.admitting_.erase(held_);
}

// The checks before a publish touches the outbox, in the contract's order:
// token, content type, stream name, stream cap. nullopt: go on.
std::optional<http::response> node::refuse_publish(const http::request& req, std::string& stream) {
    if (auto r = app::refuse_unauthorized(req, c_.tokens)) return r;
    if (auto r = app::refuse_json_body(req, {"Idempotency-Key"})) return r;
    stream = o_.stream;
    // A misspelt parameter (?strem=x, ?STREAM=x) must not send the message
    // to the default stream: every parameter but stream is refused by name.
    if (auto unknown = http::unknown_query_params(req.target, {"stream"}); !unknown.empty())
        return http::response::error(400, "unknown query parameter" +
                                              std::string(unknown.find(',') == std::string::npos ? " " : "s ") +
                                              unknown + " (/publish takes only ?stream=NAME)");
    if (http::query_param_count(req.target, "stream") > 1)
        return http::response::error(400, "stream is given more than once; give it once");
    if (auto q = http::query_param(req.target, "stream")) stream = std::move(*q);
    if (!envelope::valid_stream_name(stream))
        return http::response::error(400, "stream must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
    if (auto why = c_.rep.secondary().refuse_stream(stream)) return http::response::error(400, *why);
    if (at_stream_cap(stream)) {
        auto r = http::response::error(
            429, "too many streams with pending messages (limit " + std::to_string(o_.max_streams) + "); retry later");
        r.set("Retry-After", "1");
        return r;
    }
    if (stopping_) return http::response::error(503, "shutting down");
    if (health_.storage().disk_low_now()) {
        // Refused before SQLite fails on a full disk; nothing is stored.
        auto r = http::response::error(507, "insufficient storage: " + health_.storage().low_message());
        r.set("Retry-After", "5");
        return r;
    }
    return std::nullopt;
}

namespace {
// GET /dead-letters' query: after (a dead letter's n, 0 by default) and
// limit (1 to 1000, 1000 by default); anything else is refused by name.
std::variant<std::pair<std::int64_t, std::size_t>, http::response> dead_letter_query(std::string_view target) {
    if (auto unknown = http::unknown_query_params(target, {"after", "limit"}); !unknown.empty())
        return http::response::error(400, "unknown query parameter(s) " + unknown + " (after=N, limit=N)");
    std::int64_t after = 0, limit = 1000;
    for (auto [name, value, low, high] : {std::tuple{"after", &after, std::int64_t{0}, INT64_MAX},
                                          std::tuple{"limit", &limit, std::int64_t{1}, std::int64_t{1000}}}) {
        if (http::query_param_count(target, name) > 1)
            return http::response::error(400, std::string(name) + " is given more than once; give it once");
        const auto q = http::query_param(target, name);
        if (!q) continue;
        const char* end = q->data() + q->size();
        auto [p, ec] = std::from_chars(q->data(), end, *value);
        if (ec != std::errc{} || p != end || q->empty() || *value < low || *value > high)
            return http::response::error(400, std::string(name) + " must be a whole number from " +
                                                  std::to_string(low) + " to " + std::to_string(high));
    }
    return std::pair{after, static_cast<std::size_t>(limit)};
}
}  // namespace

http::router node::routes() {
    http::router r;
    r.add("GET", "/health", [this](http::request&) -> asio::awaitable<http::response> {
        const bool online = c_.rep.secondary_online();
        // (Liveness: 200 while the process works. A store that cannot commit
        // or a disk under --min-free-space is named here too, and makes
        // /ready 503: a restart would not fix either.)
        nlohmann::json j{{"status", "ok"}, {"secondary_online", online}, {"storage", health_.storage().state()}};
        c_.rep.secondary().health(j);
        if (online) j.erase("secondary_error");  // a check failed, not yet enough to call it offline
        // (Text from the secondary's answers: bytes that are not UTF-8 are
        // replaced, never a 500 here.)
        co_return http::response::json(200, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    });
    // Readiness (readiness.hpp): the largest message's size is the write tried
    // after a failed commit (the envelope's limit).
    r.add("GET", "/ready", [this](http::request&) -> asio::awaitable<http::response> {
        // NATS refusing this primary (its credentials, its TLS) is a
        // configuration to fix, not an outage to wait out: not ready.
        if (auto p = c_.rep.secondary().configuration_problem(); !p.empty() && !stopping_)
            return app::not_ready(app::describe_nats_problem(p).status, p);
        return app::readiness(stopping_ ? "draining"
                              : !ready_ ? "starting"
                                        : nullptr,
                              health_.storage(), c_.worker, ioc_.get_executor(), envelope::limits{}.max_body_bytes);
    });
    r.add("GET", "/metrics", [this](http::request&) -> asio::awaitable<http::response> {
        if (server_) {
            app::sync_counter(c_.m.refused, server_->get_stats().connections_rejected);
            app::sync_counter(c_.m.tls_failures, server_->get_stats().tls_handshake_failures);
            app::sync_counter(c_.m.accept_failures, server_->get_stats().accept_failures);
        }
        c_.m.db.sync(c_.worker.get_stats());
        health_.storage().check_disk();
        c_.m.free_bytes.Set(static_cast<double>(health_.storage().available()));
        c_.refresh_metrics();
        co_return app::metrics_response(*c_.m.registry);
    });
    r.add("POST", "/publish", [this](http::request& req) -> asio::awaitable<http::response> {
        std::string stream;
        if (auto refused = refuse_publish(req, stream)) co_return std::move(*refused);
        const stream_admission admitted(*this, stream);  // until the commit's outcome is known
        const std::size_t overhead = envelope_overhead(stream);
        auto checked = envelope::check_payload(req.body, overhead);
        if (auto* e = std::get_if<envelope::payload_error>(&checked))
            co_return http::response::error(e->status, e->what);
        if (auto big = c_.rep.secondary().too_large(overhead + std::get<std::string_view>(checked).size()))
            co_return http::response::error(413, *big);
        // A publisher's Idempotency-Key: the same key again finds the first
        // message instead of storing a second (outbox::publish_once).
        std::string key;
        if (auto k = req.get("Idempotency-Key")) {
            if (k->empty() || k->size() > 255 ||
                std::any_of(k->begin(), k->end(), [](char c) { return c < 0x21 || c > 0x7e; }))
                co_return http::response::error(400, "Idempotency-Key must be 1 to 255 visible ASCII characters");
            key = std::string(*k);
        }
        ++publishing_;
        const std::int64_t at_ms = now_ms();
        keyed_publish::status what = keyed_publish::status::stored;
        published p;
        std::optional<std::string> failure;
        if (key.empty()) {
            // One by one, grouped with the publishes made meanwhile
            // (publish_batcher.hpp); delivery learns of the message there.
            auto stored = co_await c_.batch.async_publish(stream, std::string(std::get<std::string_view>(checked)),
                                                          at_ms, asio::use_awaitable);
            if (stored)
                p = std::move(*stored);
            else
                failure = std::move(stored.error().what);
        } else {
            // A publisher's Idempotency-Key: a job of its own, which may find
            // the key's first message instead of storing a second.
            // (Shared with the job: the payload is not copied again.)
            auto payload = std::make_shared<std::string>(std::get<std::string_view>(checked));
            // Job lambdas are named before the co_await: g++ 12 released a
            // shared_ptr captured by a lambda temporary inside co_await twice (ASan).
            auto job = [this, key, stream, payload, at_ms](app::database&, bool&) {
                return c_.out.publish_once(key, stream, *payload, at_ms);
            };
            auto result = co_await c_.worker.run<keyed_publish>(ioc_.get_executor(), std::move(job));
            if (auto e = app::failed(result)) {
                failure = std::move(*e);
            } else {
                what = result->what;
                p = std::move(result->p);
                // First, before anything that could throw: delivery learns of every
                // stored message.
                if (what == keyed_publish::status::stored) c_.stored(p, std::move(*payload), at_ms);
            }
        }
        --publishing_;
        if (failure) {
            health_.publish_failed(stream, *failure);  // checks the watermark again
            if (health_.storage().disk_low()) {
                // The same answer as the refusals before the store is tried.
                auto res = http::response::error(507, "insufficient storage: " + health_.storage().low_message());
                res.set("Retry-After", "5");
                check_drained();
                co_return res;
            }
            auto res = http::response::error(503, "storage failure, nothing stored: " + *failure);
            res.set("Retry-After", "1");
            check_drained();
            co_return res;
        }
        // Only a commit that wrote shows the store works again (not a replay's read).
        if (what == keyed_publish::status::stored) health_.works();
        if (what == keyed_publish::status::conflict)
            co_return http::response::error(422, "Idempotency-Key was first used for another payload or stream (seq " +
                                                     std::to_string(p.seq) + " of stream " + p.stream + ")");
        auto res = http::response::json(202, envelope::encode_published(p.id, p.stream, p.seq));
        if (what == keyed_publish::status::replayed)
            res.set("Idempotent-Replayed", "true");  // the first publish's answer; nothing stored now
        co_return res;
    });
    // Dead letters, for operators (the same token as /publish): the list, and
    // a requeue as a new message at the end of its stream.
    // In pages: ?after=N (the last n seen) and ?limit=N (1 to 1000, the
    // default), and no more once the page's payloads reach 8 MiB (a
    // thousand dead letters of 1 MiB each must not be one answer). A page
    // that is not the last says where the next starts: Link: <...>; rel="next".
    r.add("GET", "/dead-letters", [this](http::request& req) -> asio::awaitable<http::response> {
        if (auto refused = app::refuse_unauthorized(req, c_.tokens)) co_return std::move(*refused);
        auto q = dead_letter_query(req.target);
        if (auto* bad = std::get_if<http::response>(&q)) co_return std::move(*bad);
        // (Not a structured binding: clang 14 cannot capture one.)
        const std::int64_t after = std::get<std::pair<std::int64_t, std::size_t>>(q).first;
        const std::size_t limit = std::get<std::pair<std::int64_t, std::size_t>>(q).second;
        auto job = [this, after, limit](app::database&, bool&) {
            return c_.out.dead_letters(after, limit, std::size_t{8} << 20);
        };
        auto page = co_await c_.worker.run<dead_letter_page>(ioc_.get_executor(), std::move(job));
        if (auto e = app::failed(page)) co_return http::response::error(503, "storage failure: " + *e);
        std::string body = "[";
        for (const auto& d : page->rows) {
            if (body.size() > 1) body += ',';
            body += to_json(d);
        }
        body += ']';
        auto res = http::response::json(200, std::move(body));
        if (page->more)
            res.set("Link", "</dead-letters?after=" + std::to_string(page->rows.back().n) +
                                "&limit=" + std::to_string(limit) + ">; rel=\"next\"");
        co_return res;
    });
    r.add("POST", "/dead-letters/requeue", [this](http::request& req) -> asio::awaitable<http::response> {
        if (auto refused = app::refuse_unauthorized(req, c_.tokens)) co_return std::move(*refused);
        if (auto unknown = http::unknown_query_params(req.target, {"n"}); !unknown.empty())
            co_return http::response::error(400, "unknown query parameter(s) " + unknown + " (requeue?n=N)");
        if (http::query_param_count(req.target, "n") > 1)
            co_return http::response::error(400, "n is given more than once; requeue one dead letter a request");
        std::int64_t n = 0;
        const auto q = http::query_param(req.target, "n");
        if (q) {
            const auto* end = q->data() + q->size();
            auto [p, ec] = std::from_chars(q->data(), end, n);
            if (ec != std::errc{} || p != end) n = 0;
        }
        if (n <= 0)
            co_return http::response::error(400, "give the dead letter's n: /dead-letters/requeue?n=N (N >= 1)");
        if (stopping_) co_return http::response::error(503, "shutting down");
        auto job = [this, n](app::database&, bool&) { return c_.out.requeue(n, now_ms()); };
        auto result = co_await c_.worker.run<requeue_result>(ioc_.get_executor(), std::move(job));
        if (auto e = app::failed(result)) {
            health_.publish_failed("(dead letter " + std::to_string(n) + ")", *e);  // a requeue is a publish
            auto res = http::response::error(503, "storage failure, nothing requeued: " + *e);
            res.set("Retry-After", "1");
            co_return res;
        }
        const auto& rq = *result;
        switch (rq.what) {
            case requeue_result::status::not_found:
                co_return http::response::error(404, "no dead letter " + std::to_string(n));
            case requeue_result::status::already:
                co_return http::response::error(409, "dead letter " + std::to_string(n) +
                                                         " was requeued already, as seq " + std::to_string(rq.p.seq) +
                                                         " of stream " + rq.p.stream);
            case requeue_result::status::requeued:
                break;
        }
        health_.works();
        app::log(level::info, "requeued", {{"n", n}, {"stream", rq.p.stream}, {"seq", rq.p.seq}, {"id", rq.p.id}});
        c_.rep.committed(rq.p.stream, 1);
        co_return http::response::json(202, envelope::encode_requeued(n, rq.p.id, rq.p.stream, rq.p.seq));
    });
    return r;
}

// The --stdin reader thread: one JSON payload a line; lines are committed in
// groups (group commit) with a bounded number of groups in flight. A group
// goes to the database once the input has nothing more to read at the moment,
// or it holds 4,000 lines or 4 MiB, or its first line was read 50 ms ago: a
// steady trickle is stored as it comes, and memory stays bounded whatever the
// lines' size. It polls with a timeout so that a shutdown never waits on an
// open pipe. A failed commit stops reading and ends the process with
// exit_error.
void node::read_stdin() {
    constexpr std::size_t group_lines = 4000, group_bytes = 4u << 20;
    constexpr auto group_age = std::chrono::milliseconds(50);
    std::vector<std::pair<std::string, std::string>> group;
    std::size_t bytes = 0;
    std::chrono::steady_clock::time_point group_started{};
    std::mutex m;
    std::condition_variable cv;
    int in_flight = 0;
    std::uint64_t first_not_stored = 0;  // (under m) the first line of the first group that failed; 0: none
    const std::size_t overhead = envelope_overhead(o_.stream);
    std::uint64_t group_first_line = 0;  // the input line of the group's first message
    // `last`: the flush after reading stopped, which stores what was read
    // even at shutdown (the lines are gone from the pipe); after a storage
    // failure the job refuses it on the database thread (stdin_failed_, set
    // there by the failed group's rolled_back before the next group runs).
    auto flush = [&](bool last = false) {
        if (group.empty() || (stdin_stop_ && !last)) return;
        auto items = std::make_shared<std::vector<std::pair<std::string, std::string>>>(std::move(group));
        group.clear();
        bytes = 0;
        const std::uint64_t first_line = group_first_line;
        {
            std::unique_lock l(m);
            cv.wait(l, [&] { return in_flight < 4; });
            ++in_flight;
        }
        asio::post(ioc_, [this] { ++publishing_; });  // runs before this group's completion
        auto result = std::make_shared<std::vector<published>>();
        c_.worker.post(
            [this, items, result](app::database&) {
                // Groups run in input order on this thread: once one failed (in
                // its job or at its commit), every later one fails as well, so
                // that what is stored is always a prefix of the input.
                if (stdin_failed_) throw app::db_error("not stored: an earlier group of input lines was not");
                try {
                    *result = c_.out.publish(*items, now_ms());
                } catch (...) {
                    stdin_failed_ = true;
                    throw;
                }
                return true;
            },
            [this, items, result, first_line, &m, &cv, &in_flight, &first_not_stored](const app::db_failure* failure) {
                if (failure) {
                    stdin_failed_ = true;  // a failed commit: later groups must not be stored either
                    stdin_stop_ = true;    // and reading stops
                }
                // A failed flush (not a failed commit): lines committed before
                // it may still be in the log after a restart.
                const bool flush_failed = failure && failure->code == app::make_db_error_code(SQLITE_IOERR_FSYNC);
                asio::post(
                    ioc_, [this, result, err = failure ? failure->what : std::string{}, flush_failed, first_line] {
                        --publishing_;
                        if (!err.empty()) {
                            if (stdin_failure_logged_) return;  // a later group: "nothing after it" said it
                            stdin_failure_logged_ = true;
                            app::log(
                                level::error, app::storage_health::storage_failed,
                                {{"input", "stdin"},
                                 {"first_line_not_stored", first_line},
                                 {"error", err},
                                 {"hint", flush_failed
                                              ? "the input was stored up to the line before first_line_not_stored; "
                                                "lines after it may be stored too (the disk failed to flush them, and "
                                                "a restart recovers what it holds): after the restart, check the "
                                                "streams' next seqs (status) before feeding the rest again; reading "
                                                "stopped, exiting non-zero"
                                              : "the input was stored up to the line before first_line_not_stored, and "
                                                "nothing after it; reading stopped, exiting non-zero"}});
                            stop("storing standard input failed", exit_error);
                            return;
                        }
                        std::map<std::string, std::size_t> per;
                        for (auto& p : *result) ++per[p.stream];
                        for (auto& [s, k] : per) c_.rep.committed(s, k);
                        check_drained();
                    });
                std::lock_guard l(m);
                if (failure && (first_not_stored == 0 || first_line < first_not_stored)) first_not_stored = first_line;
                --in_flight;
                cv.notify_all();
            },
            // On the database thread, as soon as this group is known not to
            // be stored (its answer may come later, behind a flush): the
            // next group must not be stored either.
            [this] { stdin_failed_ = true; });
    };
    std::uint64_t line_no = 0;
    std::string partial;
    std::vector<char> buf(1 << 20);
    auto take_line = [&](std::string_view line) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
        auto checked = envelope::check_payload(line, overhead);
        if (auto* e = std::get_if<envelope::payload_error>(&checked)) {
            app::log(level::warn, "stdin_line_skipped", {{"line", line_no}, {"status", e->status}, {"error", e->what}});
            return;
        }
        if (auto big = c_.rep.secondary().too_large(overhead + std::get<std::string_view>(checked).size())) {
            app::log(level::warn, "stdin_line_skipped", {{"line", line_no}, {"status", 413}, {"error", *big}});
            return;
        }
        if (group.empty()) {
            group_first_line = line_no;
            group_started = std::chrono::steady_clock::now();
        }
        bytes += std::get<std::string_view>(checked).size();
        group.emplace_back(o_.stream, std::string(std::get<std::string_view>(checked)));
    };
    bool eof = false, read_failed = false;
    while (!stdin_stop_ && !eof) {
        pollfd pfd{0, POLLIN, 0};
        const int pr = ::poll(&pfd, 1, 100);
        if (pr < 0 && errno != EINTR) {
            read_failed = true;
            break;
        }
        if (pr <= 0) {
            flush();  // a pause in the input: commit what we have
            continue;
        }
        const ssize_t n = ::read(0, buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            app::log(level::error, "stdin_failed", {{"error", std::strerror(errno)}});
            read_failed = true;
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
                partial.append(chunk);
                break;
            }
            if (partial.empty()) {
                take_line(chunk.substr(0, nl));
            } else {
                partial.append(chunk.substr(0, nl));
                take_line(partial);
                partial.clear();
            }
            chunk.remove_prefix(nl + 1);
            if (group.size() >= group_lines || bytes >= group_bytes) flush();
        }
        if (!group.empty()) {
            pollfd more{0, POLLIN, 0};
            if (::poll(&more, 1, 0) == 0 || std::chrono::steady_clock::now() - group_started >= group_age) flush();
        }
    }
    if (eof && !partial.empty()) take_line(partial);
    flush(true);
    std::unique_lock l(m);
    cv.wait(l, [&] { return in_flight == 0; });
    if (!eof && !read_failed) {
        // Stopped before the end of the input (a signal, or a storage failure
        // logged as storage_failed): say where to go on from. The event loop
        // may have stopped already, so this is logged from here.
        // (Groups fail from the first failed one on: what is stored is the
        // lines before it, however many were read after it.)
        nlohmann::json f{{"lines_read", line_no}, {"partial_line_not_read", !partial.empty()}};
        if (first_not_stored != 0) {
            f["first_line_not_stored"] = first_not_stored;
            f["hint"] =
                "storing failed (storage_failed): the lines before first_line_not_stored were stored; feed the "
                "input again from first_line_not_stored (after a failed flush, storage_failed's hint says to check "
                "the streams' next seqs first)";
        } else {
            f["hint"] = "every line up to lines_read was stored; feed the input again from the line after";
        }
        app::log(level::info, "input_stopped", std::move(f));
    }
    asio::post(ioc_, [this, line_no, eof, read_failed] {
        app::log(level::info, "input_closed", {{"lines", line_no}, {"eof", eof}});
        if (read_failed) stop("reading standard input failed", exit_error);
        input_closed_ = true;
        check_drained();
    });
}

}  // namespace steadfast::primary
