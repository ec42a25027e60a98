#include "repairs.hpp"

#include "../common/log.hpp"
#include "jetstream_publish.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

log_repairs::log_repairs(const link_env& env, link_host& host, jetstream::client& js)
    : env_(env), host_(host), js_(js) {
    sub_ = js_.subscribe(envelope::repair_subject(env.o.js_stream), *this, 1000);
}

log_repairs::~log_repairs() {
    *alive_ = false;
}

// A request (on the executor): drained in turns.
void log_repairs::on_messages() {
    // 64 a turn: a flood of requests never holds the event loop (and at most
    // 1,000 wait: the subscription drops the rest).
    if (!sub_) return;
    for (auto& m : sub_->drain(64)) requested(m.data);
    if (sub_->queued() > 0)
        asio::post(env_.ex, [this, alive = alive_] {
            if (*alive) on_messages();
        });
}

void log_repairs::log_refusal(const char* event, nlohmann::json fields) {
    const auto now = std::chrono::steady_clock::now();
    if (now - repair_log_at_ < 1s) {
        ++repair_log_suppressed_;
        return;
    }
    if (repair_log_suppressed_) fields["suppressed_since_last"] = std::exchange(repair_log_suppressed_, 0);
    repair_log_at_ = now;
    app::log(level::warn, event, std::move(fields));
}

void log_repairs::requested(const std::string& body) {
    std::string why;
    auto r = envelope::decode_repair_request(body, why);
    if (!r) {
        log_refusal("repair_request_refused",
                    {{"error", why}, {"subject", envelope::repair_subject(env_.o.js_stream)}});
        return;
    }
    if (host_.stopping() || env_.stop.value()) return;
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(repair_at_, [&](const auto& kv) { return now - kv.second.at >= 2min; });
    if (auto last = repair_at_.find(r->stream); last != repair_at_.end()) {
        // One repair per stream every 10 s; the same one again only after
        // 2 minutes (its copy is on the way: the secondary asks every 15 s).
        if (now - last->second.at < 10s || last->second.from == r->from) return;
    }
    if (now - repair_window_ >= 1s) {
        repair_window_ = now;
        repairs_in_window_ = 0;
    }
    if (repairs_running_ >= 4 || repairs_in_window_ >= 10 || repair_at_.size() >= 10'000) {
        log_refusal("repair_busy", {{"stream", r->stream},
                                    {"from_seq", r->from},
                                    {"consumer", r->consumer},
                                    {"note", "repairs under way; the secondary asks again"}});
        return;
    }
    if (auto b = host_.blocked(r->stream)) {
        log_refusal("repair_not_possible", {{"stream", r->stream},
                                            {"from_seq", r->from},
                                            {"to_seq", r->to},
                                            {"consumer", r->consumer},
                                            {"reason", "the stream is blocked: " + *b}});
        return;
    }
    ++repairs_in_window_;
    repair_at_[r->stream] = {now, r->from};
    app::log(level::warn, "repair_requested",
             {{"stream", r->stream}, {"from_seq", r->from}, {"to_seq", r->to}, {"consumer", r->consumer}});
    std::string stream = r->stream;  // (the order of co_spawn's arguments is unspecified)
    asio::co_spawn(env_.ex, repair(std::move(*r)), [stream = std::move(stream)](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            app::log(level::error, "repair_failed", {{"stream", stream}, {"error", ex.what()}});
        }
    });
}

namespace {
struct repair_rows {
    std::uint64_t acked = 0, next_seq = 1, oldest = 0;  // read with the first rows
    std::vector<pending_message> rows;
};
}  // namespace

// Resends seqs r.from..r.to of a stream from the outbox (acknowledged
// messages are retained for --retain), in batches, to the repair subject.
// Only what was acknowledged can be missing from the log: the range stops
// there. Beyond retention it says so; the stream itself goes on.
asio::awaitable<void> log_repairs::repair(envelope::repair_request r) {
    ++repairs_running_;
    struct running {
        int& n;
        ~running() { --n; }
    } guard{repairs_running_};
    constexpr std::uint64_t max_per_request = 10'000;  // a larger hole: the secondary asks again for the rest
    const std::string subject = env_.o.js_prefix + ".$repair." + r.stream;
    const std::string id_prefix = "repair:" + std::to_string(now_ms()) + "." + std::to_string(++repair_counter_) + ":";
    auto quick = retry_policy{}
                     .with_backoff(backoff::exponential(100ms, 2.0, env_.o.max_backoff).with_jitter(jitter::full))
                     .with_stop(stop::max_attempts(std::max<std::uint32_t>(env_.o.quick_retries, 3)))
                     .with_stop_when(env_.stop)
                     .with_attempt_when(host_.online())
                     .with_attempt_timeout(env_.o.attempt_timeout);
    std::uint64_t cursor = r.from, end = 0, sent = 0;
    for (bool first = true;; first = false) {
        auto read = [this, stream = r.stream, cursor, first](app::database&, bool&) {
            repair_rows x;
            if (first) {
                const auto pos = env_.out.position(stream);
                x.acked = pos.acked_seq;
                x.next_seq = pos.next_seq;
                x.oldest = env_.out.oldest_seq(stream).value_or(0);
            }
            x.rows = env_.out.pending(stream, cursor - 1, env_.o.batch_max, env_.o.batch_bytes);
            return x;
        };
        auto got = co_await env_.worker.run<repair_rows>(env_.ex, std::move(read));
        if (auto e = app::failed(got)) {
            app::log(level::error, "repair_failed", {{"stream", r.stream}, {"error", "reading the outbox: " + *e}});
            co_return;
        }
        auto& x = *got;
        if (first) {
            // The outbox's acknowledgement mark lags the processor's by up to 10 ms.
            std::uint64_t acked = x.acked;
            if (auto m = host_.acked_max(r.stream)) acked = std::max(acked, *m);
            const decision d = decide_repair(r.from, acked, x.oldest, x.next_seq);
            if (d.what == verdict::block) {
                app::log(level::error, "repair_impossible",
                         {{"stream", r.stream},
                          {"from_seq", r.from},
                          {"to_seq", r.to},
                          {"consumer", r.consumer},
                          {"detail", d.detail},
                          {"hint",
                           "those messages are no longer retained (--retain): the secondary that asked keeps "
                           "the stream blocked; the others are not affected"}});
                co_return;
            }
            if (d.what != verdict::rewind) {
                app::log(level::info, "repair_not_needed",
                         {{"stream", r.stream}, {"from_seq", r.from}, {"detail", d.detail}});
                co_return;
            }
            end = std::min({r.to, acked, r.from + max_per_request - 1});
            app::log(level::warn, "repair",
                     {{"stream", r.stream},
                      {"from_seq", r.from},
                      {"to_seq", end},
                      {"asked_to", r.to},
                      {"consumer", r.consumer},
                      {"subject", subject},
                      {"note", "resending what the log lost, from retention"}});
        }
        std::erase_if(x.rows, [&](const pending_message& m) { return m.seq > end; });
        if (x.rows.empty() || x.rows.front().seq != cursor) {
            app::log(level::error, "repair_impossible",
                     {{"stream", r.stream},
                      {"from_seq", cursor},
                      {"to_seq", end},
                      {"detail", "seq " + std::to_string(cursor) + " is no longer retained"}});
            co_return;
        }
        const std::string body = encode_body(r.stream, x.rows, env_.o.epoch);
        const jetstream::publish_options po{id_prefix + batch_key(x.rows), std::nullopt, {}};
        std::string api_said;
        auto attempt = publish_attempt(js_, subject, body, po, api_said);
        auto res = co_await steadfast::retry(quick, std::move(attempt));
        if (!res.has_value() || !res.value().has_value()) {
            if (!env_.stop.value())
                app::log(level::error, "repair_failed",
                         {{"stream", r.stream},
                          {"from_seq", cursor},
                          {"to_seq", end},
                          {"error", describe(res.last_error(), api_said)},
                          {"note", "the secondary asks again while its gap lasts"}});
            co_return;
        }
        sent += x.rows.size();
        cursor = x.rows.back().seq + 1;
        if (cursor > end) break;
    }
    env_.m.js_repairs.Increment();
    app::log(level::info, "repaired",
             {{"stream", r.stream}, {"from_seq", r.from}, {"to_seq", end}, {"messages", sent}});
}

}  // namespace steadfast::primary
