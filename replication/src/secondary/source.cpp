#include "source.hpp"

#include "../common/log.hpp"
#include "../common/nats_problem.hpp"

#include <steadfast/engine.hpp>
#include <steadfast/replication/envelope.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <set>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::secondary {

namespace {
// How long a pull waits for messages; the server may deliver to it until then.
constexpr std::chrono::milliseconds fetch_expiry = 1s;
}  // namespace

js_source::js_source(asio::any_io_executor ex, app::db_worker& worker, store& st, source_options o, source_hooks h)
    : ex_(ex),
      worker_(worker),
      st_(st),
      o_(std::move(o)),
      h_(std::move(h)),
      stopping_flag_(make_flag(ex, "source-stopping")) {
    jetstream::options jo;
    jo.servers = jetstream::parse_servers(o_.servers);
    jo.sec = o_.security;
    jo.name = "steadfast-secondary " + o_.consumer;
    js_ = std::make_unique<jetstream::client>(ex_, std::move(jo));
    claim_ = std::make_unique<consumer_claim>(*js_, o_.stream, o_.consumer);
}

js_source::~js_source() = default;

void js_source::stop() {
    stopping_ = true;
    stopping_flag_->set();
    stop_signal_.emit(asio::cancellation_type::terminal);
}

bool js_source::connected() const {
    return js_->connected()->value();
}
std::string js_source::nats_problem() const {
    return connected() ? std::string{} : js_->problem();
}
std::uint64_t js_source::lag() const noexcept {
    if (info_lag_) return *info_lag_;
    return pc_ ? pc_->last_pending() : 0;
}
std::uint64_t js_source::redeliveries() const noexcept {
    return n_.redeliveries_before + (pc_ ? pc_->redeliveries() : 0);
}
std::uint64_t js_source::pulls_unanswered() const noexcept {
    return n_.unanswered_before + (pc_ ? pc_->endings().unanswered : 0);
}
std::uint64_t js_source::deliveries() const noexcept {
    return n_.deliveries_before + (pc_ ? pc_->deliveries() : 0);
}
// The consumer cannot be used (`problem`): said once while it lasts
// (consumer_unavailable), and /health says so until consuming again.
void js_source::unavailable(std::string problem, app::level how, std::string_view hint) {
    if (problem != problem_)
        app::log(how, "consumer_unavailable",
                 {{"stream", o_.stream}, {"consumer", o_.consumer}, {"error", problem}, {"hint", hint}});
    problem_ = std::move(problem);
    consuming_ = false;
}

void js_source::drop_consumer() {
    if (!pc_) return;
    n_.deliveries_before += pc_->deliveries();
    n_.redeliveries_before += pc_->redeliveries();
    n_.unanswered_before += pc_->endings().unanswered;
    n_.deleted_seen = 0;  // (the next one counts from 0)
    pc_.reset();
}

nlohmann::json js_source::health() const {
    nlohmann::json j = {{"connected", connected()},
                        {"server", js_->connected_url()},
                        {"stream", o_.stream},
                        {"consumer", o_.consumer},
                        {"consuming", consuming_},
                        {"lag", lag()},
                        {"deliveries", deliveries()},
                        {"redeliveries", redeliveries()},
                        {"problem", problem_},
                        {"nats_problem", nats_problem()},
                        {"consumer_in_use_by", claim_->in_use_by()},
                        {"blocked", holds_.reasons()}};
    j["stalls"] = stalls();
    j["stalled"] = stall_.in_a_row() > 0;  // the last pulls went unanswered, even after subscribing again
    j["pulls_unanswered"] = pulls_unanswered();
    return j;
}

// Asks the primary (core NATS, nothing stored) to resend `stream` from
// `from` to `to` (what precedes the first seq the log did deliver after the
// hole); holds.hpp says when.
void js_source::ask_repair(const std::string& stream, std::uint64_t from, std::uint64_t to) {
    const envelope::repair_request r{stream, o_.consumer, from, to};
    const auto ec = js_->publish(envelope::repair_subject(o_.stream), envelope::encode(r));
    app::log(level::warn, "repair_requested",
             {{"stream", stream},
              {"from_seq", r.from},
              {"to_seq", r.to},
              {"sent", !ec},
              {"note",
               "the log lacks these messages (a nak'd one would have come again): asking the primary to resend them "
               "from its retention"}});
}

asio::awaitable<void> js_source::pause(std::chrono::milliseconds d) {
    asio::steady_timer t(ex_, d);
    co_await t.async_wait(asio::bind_cancellation_slot(stop_signal_.slot(), asio::as_tuple(asio::use_awaitable)));
}

namespace {
// Every failure of a consumer request is worth trying again (the stream may
// not exist yet, its leader may be moving); only cancellation ends it.
classification any_failure_retryable(const boost::system::error_code& ec) {
    if (!ec) return classification::success();
    if (ec == asio::error::operation_aborted) return classification::cancelled(ec);
    return classification::retryable(ec);
}
}  // namespace

// Creates the durable consumer (or finds it), retried through the engine
// (each request bounded: a cluster without a meta leader may not answer at
// all) while the stream or its leader is missing; says once what is wrong.
asio::awaitable<bool> js_source::ensure_consumer() {
    const jetstream::consumer_config cc{o_.stream, o_.consumer};
    jetstream::consumer_state found;
    auto attempt = [&](const attempt_context&) -> asio::awaitable<boost::system::error_code> {
        auto [ec, state, why] =
            co_await jetstream::async_ensure_consumer(*js_, cc, asio::as_tuple(asio::use_awaitable));
        if (!ec) found = state;
        if (ec && !(ec == asio::error::operation_aborted && stopping_)) {
            // Cancelled while not stopping: the attempt's 3 s ran out.
            const std::string refused = nats_problem();
            std::string p = !refused.empty() ? refused
                            : ec == asio::error::operation_aborted
                                ? std::string(connected() ? "no answer within 3 s (no JetStream leader?)"
                                                          : "no answer: not connected to any NATS server of --source")
                                : ec.message() + (why.empty() ? std::string{} : ": " + why);
            const bool missing = ec == make_error_code(jetstream::errc::not_found);
            unavailable(std::move(p), missing ? level::warn : level::error,
                        missing            ? "the stream is created by the primary when it starts; waiting"
                        : !refused.empty() ? app::describe_nats_problem(refused).hint
                                           : "is --source a NATS server with JetStream on, and --js-stream the "
                                             "primary's?");
        }
        co_return ec;
    };
    const auto policy = retry_policy{}
                            .with_backoff(backoff::exponential(100ms, 2.0, 2s).with_jitter(jitter::full))
                            .with_stop(stop::never())
                            .with_attempt_timeout(3s)
                            .with_stop_when(stopping_flag_);
    auto classified_attempt = classified(attempt, any_failure_retryable);
    auto r = co_await steadfast::retry(policy, std::move(classified_attempt));
    if (!r.has_value() || r.value()) co_return false;  // stopped
    if (!problem_.empty() || !consuming_)
        app::log(level::info, "consuming",
                 {{"stream", o_.stream}, {"consumer", o_.consumer}, {"server", js_->connected_url()}});
    problem_.clear();
    if (!pc_) {
        pc_ = std::make_unique<jetstream::pull_consumer>(*js_, cc);
        stall_.new_consumer();
        // Only the process's first consumer: one found again later (after a
        // restart_consumer whose delete failed) owes this run's own naks.
        if (n_.left_unacked == not_read) n_.left_unacked = found.ack_pending;
        if (found.ack_wait.count() > 0)
            n_.ack_wait = std::chrono::duration_cast<std::chrono::milliseconds>(found.ack_wait);
    }
    consuming_ = true;
    co_return true;
}

// The consumer's INFO, answered by its leader (3 s at most: a cluster
// without one may not answer at all); ec says why there is none.
asio::awaitable<js_source::info_reply> js_source::consumer_info() {
    std::string subject = "$JS.API.CONSUMER.INFO." + o_.stream + "." + o_.consumer, empty;
    auto token = asio::bind_cancellation_slot(stop_signal_.slot(), asio::as_tuple(asio::use_awaitable));
    asio::steady_timer limit(ex_, 3s);  // a request without an answer (no leader) ends here
    // Expired and queued when the answer came first, the timer's handler
    // must not cancel what uses the signal next (the fetch): it checks.
    auto answered = std::make_shared<bool>(false);
    limit.async_wait([this, answered](const boost::system::error_code& e) {
        if (!e && !*answered) stop_signal_.emit(asio::cancellation_type::terminal);
    });
    auto [ec, m] = co_await js_->async_request(std::move(subject), std::move(empty), {}, token);
    *answered = true;
    limit.cancel();
    info_reply r;
    // Cancelled by the limit above, not by stop(): no answer in 3 s.
    if (ec == asio::error::operation_aborted && !stopping_) ec = make_error_code(jetstream::errc::request_timeout);
    jetstream::api_error e;
    if (!ec) ec = jetstream::api_reply_error(m, e);
    if (!ec) ec = jetstream::decode_consumer_state(m, r.state, e);
    r.ec = ec;
    if (!ec) info_lag_ = r.state.pending;  // (the lag, while pulls bring nothing to tell it)
    co_return r;
}

// Whether the consumer still exists, and created again if it does not.
// False only when stopping.
asio::awaitable<bool> js_source::check_consumer() {
    // The news of a deletion so far is acted on once the INFO answers (the
    // consumer is there, or created again below); an INFO that failed
    // leaves it for the next fetch.
    const jetstream::pull_consumer* before = pc_.get();
    const std::uint64_t news = pc_ ? pc_->endings().deleted : 0;
    const info_reply r = co_await consumer_info();
    if (stopping_) co_return false;
    if (!r.ec && pc_.get() == before) n_.deleted_seen = news;
    if (r.ec == make_error_code(jetstream::errc::not_found)) {
        app::log(level::warn, "consumer_missing", {{"consumer", o_.consumer}, {"note", "creating it again"}});
        drop_consumer();
        co_return co_await ensure_consumer();
    }
    co_return true;
}

// The server has not answered this consumer's last pulls (stall_watch.hpp):
// said, with what the consumer's info and its pulls' endings tell, and
// subscribed again (a new pull consumer, a new inbox). False only when
// stopping.
asio::awaitable<bool> js_source::resubscribe_stalled() {
    const auto end = pc_->endings();
    const info_reply r = co_await consumer_info();
    if (stopping_) co_return false;
    const bool again = stall_.in_a_row() > 1;
    nlohmann::json f = {{"stream", o_.stream},
                        {"consumer", o_.consumer},
                        {"unanswered_in_a_row", stall_watch::unanswered_in_a_row},
                        {"stalls_in_a_row", stall_.in_a_row()},
                        {"pulls_unanswered", end.unanswered},
                        {"pulls_expired", end.expired},
                        {"pulls_no_messages", end.no_messages},
                        {"pulls_ended", end.ended},
                        {"pulls_no_responders", end.no_responders},
                        {"pulls_late", end.late},  // answers to pulls this side had given up on
                        {"last_status", end.last_status},
                        {"last_status_description", end.last_description},
                        {"server", js_->connected_url()}};
    if (!r.ec) {
        f["pending"] = r.state.pending;
        f["ack_pending"] = r.state.ack_pending;
        f["waiting"] = r.state.waiting;
        f["delivered_stream_seq"] = r.state.delivered_seq;
        f["ack_floor_stream_seq"] = r.state.ack_floor_seq;
    } else {
        f["info_error"] = r.ec.message();
    }
    f["note"] = "the server answers none of this consumer's pulls (not even their expiry): subscribing again";
    if (again)
        f["hint"] =
            "still stalled after subscribing again: check the NATS server's log for this consumer and account; "
            "a restart of the secondary connects afresh";
    app::log(again ? level::error : level::warn, "consumer_stalled", std::move(f));
    drop_consumer();
    co_return co_await ensure_consumer();
}

asio::awaitable<void> js_source::restart_consumer(const std::string& why) {
    if (!holds_.restart(std::chrono::steady_clock::now())) co_return;  // once a minute at most
    app::log(level::warn, "consumer_restart",
             {{"consumer", o_.consumer},
              {"reason", why},
              {"note", "replaying the stream from its start; applied messages are skipped"}});
    auto attempt = [&](const attempt_context&) -> asio::awaitable<boost::system::error_code> {
        std::string subject = "$JS.API.CONSUMER.DELETE." + o_.stream + "." + o_.consumer, empty;
        auto [ec, m] =
            co_await js_->async_request(std::move(subject), std::move(empty), {}, asio::as_tuple(asio::use_awaitable));
        jetstream::api_error e;
        if (!ec) ec = jetstream::api_reply_error(m, e);
        co_return ec == make_error_code(jetstream::errc::not_found) ? boost::system::error_code{} : ec;
    };
    const auto policy = retry_policy{}
                            .with_backoff(backoff::fixed(500ms))
                            .with_stop(stop::max_attempts(5))
                            .with_attempt_timeout(3s)
                            .with_stop_when(stopping_flag_);
    auto classified_attempt = classified(attempt, any_failure_retryable);
    auto r = co_await steadfast::retry(policy, std::move(classified_attempt));
    if (!r.has_value() || r.value())
        app::log(level::error, "consumer_restart_failed", {{"error", r.last_error().message()}});
    drop_consumer();
    consuming_ = false;
}

asio::awaitable<void> js_source::run() {
    while (!stopping_) {
        if (!pc_ && !co_await ensure_consumer()) break;
        if (!claim_->in_use_by().empty() ||
            (claim_->due(std::chrono::steady_clock::now()) && !co_await claim_->keep())) {
            // Another secondary holds this consumer (claim.hpp): this one
            // does not consume.
            app::log(level::error, "consumer_in_use",
                     {{"stream", o_.stream},
                      {"consumer", o_.consumer},
                      {"in_use_by", claim_->in_use_by()},
                      {"subject", claim_->subject()},
                      {"hint",
                       "each secondary needs a --consumer of its own: two on one durable consumer split its "
                       "messages and both see gaps. The one that started first keeps it; this one does not "
                       "consume: give it another name and restart it"}});
            consuming_ = false;
            problem_ = "consumer in use by " + claim_->in_use_by();
            while (!stopping_) co_await pause(std::chrono::hours(1));  // until stop()
            break;
        }
        if (stopping_) break;
        if (const auto owed = std::exchange(n_.left_unacked, 0); owed > 0 && owed != not_read) {
            // A previous run of this consumer (killed before its commit) was
            // delivered these and never acknowledged them: they come again
            // once the consumer's ack wait has run out, before anything newer.
            // Pulling on meanwhile would meet a gap on every stream they
            // belong to and nak the later messages again and again (a
            // redelivery storm while catching up): wait for them instead.
            // The ack wait runs from each delivery, and the last of them may
            // have come after this run found the consumer: to a pull the
            // killed run left pending (a fetch expires after 1 s, below), or
            // in the moment before the kill while this run started. So the
            // wait is the ack wait and a fetch's expiry: with the ack wait
            // alone, a restart right after the kill pulled while some of them
            // were not due yet, met gaps, and nak'd its way through 578
            // redeliveries (CI, 2026-12-06, a busy machine).
            const auto wait = (n_.ack_wait.count() > 0
                                   ? n_.ack_wait
                                   : std::chrono::duration_cast<std::chrono::milliseconds>(pc_->config().ack_wait)) +
                              fetch_expiry;
            app::log(level::info, "unacknowledged",
                     {{"consumer", o_.consumer},
                      {"messages", owed},
                      {"waiting_ms", wait.count()},
                      {"note", "delivered to a previous run and not acknowledged: they come again first"}});
            co_await pause(wait);
            if (stopping_) break;
        }
        // Not while the connection is down and coming back: the C client
        // would keep each pull in its reconnect buffer and send them all at
        // once when it is back, each for up to a batch. (Closed for good:
        // the fetch fails below and says why.)
        if (!connected() && nats_problem().empty()) {
            co_await pause(200ms);
            continue;
        }
        const auto fetch_started = std::chrono::steady_clock::now();
        const std::uint64_t unanswered_before = pc_->endings().unanswered, disconnects_before = js_->disconnects();
        auto [ec, ds] = co_await pc_->async_fetch(
            o_.batch, fetch_expiry,
            asio::bind_cancellation_slot(stop_signal_.slot(), asio::as_tuple(asio::use_awaitable)));
        if (ec == asio::error::operation_aborted || stopping_) break;
        if (ec) {
            if (auto refused = nats_problem(); !refused.empty()) {
                // The connection is closed for good (the servers refused
                // this secondary, or it closed): said once, by name.
                const std::string hint(app::describe_nats_problem(refused).hint);
                unavailable(std::move(refused), level::error, hint);
                co_await pause(1s);
                continue;
            }
            if (ec != make_error_code(jetstream::errc::not_connected))
                app::log(level::warn, "fetch_failed", {{"error", ec.message()}});
            co_await pause(200ms);
            continue;
        }
        // The server said the consumer was deleted (409 Consumer Deleted, on
        // this pull or an earlier one, maybe while messages were applied):
        // checked, and created again, now (its later pulls would never be
        // answered: the stall would be found only after three of them).
        // (Until an INFO answers: see check_consumer.)
        const bool deleted = pc_->endings().deleted != n_.deleted_seen;
        if (!consuming_) {
            // Back after a problem named in the loop above.
            app::log(level::info, "consuming",
                     {{"stream", o_.stream}, {"consumer", o_.consumer}, {"server", js_->connected_url()}});
            problem_.clear();
            consuming_ = true;
        }
        if (ds.empty()) {
            // The pull ended without messages. One the server never answered
            // (not even with its expiry) counts toward a stall
            // (stall_watch.hpp): a new subscription then. Otherwise, also
            // what a deleted consumer or a lost leader looks like: every
            // 10th time (or when it ended at once, or the server said the
            // consumer was deleted), make sure the consumer is there: a cheap
            // INFO, a create only when it is missing. A pull that lived
            // through a reconnect is not the server's silence: neither
            // answered nor counted.
            if (pc_->endings().unanswered == unanswered_before)
                stall_.answered();
            else if (connected() && js_->disconnects() == disconnects_before && stall_.unanswered()) {
                if (!co_await resubscribe_stalled()) break;
                continue;
            }
            const bool quick = std::chrono::steady_clock::now() - fetch_started < 100ms;
            if (quick) co_await pause(200ms);
            if (connected() && (quick || deleted || ++n_.empty_fetches % 10 == 0) && !co_await check_consumer()) break;
            continue;
        }
        stall_.answered();
        n_.empty_fetches = 0;
        info_lag_.reset();
        co_await apply(ds);
        if (deleted && !stopping_ && connected() && !co_await check_consumer()) break;
    }
    consuming_ = false;
}

namespace {
struct applied_one {
    enum class kind { envelope, fence, malformed, held } what = kind::envelope;
    std::string error;  // malformed: why
    store::answer a;
};
// One delivered message, as read before the database thread applies it.
struct item {
    applied_one::kind what = applied_one::kind::envelope;
    std::variant<envelope::decoded, envelope::decode_error> body = envelope::decode_error{};
    std::uint64_t fence = 0;  // a primary's epoch fence (the header says so)
    std::string stream;       // the envelope's (its first message's) stream
};

// The first seq of `stream` in a delivered envelope or batch (0: none).
std::uint64_t first_seq_of(const item& it, const std::string& stream) {
    const auto* d = std::get_if<envelope::decoded>(&it.body);
    if (!d) return 0;
    if (const auto* one = std::get_if<envelope::message>(d)) return one->stream == stream ? one->seq : 0;
    std::uint64_t first = 0;
    for (const auto& m : std::get<envelope::batch>(*d).messages)
        if (m.stream == stream && (first == 0 || m.seq < first)) first = m.seq;
    return first;
}

}  // namespace

// Applies what one fetch brought in one transaction (one fsync), each
// message in a savepoint of its own, then acks each after the commit.
asio::awaitable<void> js_source::apply(std::vector<jetstream::pull_consumer::delivery>& ds) {
    using k = applied_one::kind;
    auto items = std::make_shared<std::vector<item>>(ds.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
        auto& it = (*items)[i];
        const auto& msg = ds[i].msg;
        if (const auto* f = msg.get("Steadfast-Epoch-Fence")) {
            // A primary took over with this epoch: from here on in the log,
            // older epochs are refused on every stream.
            it.what = k::fence;
            try {
                it.fence = std::stoull(*f);
            } catch (const std::exception&) {
                it.what = k::malformed;
                it.body = envelope::decode_error{"an epoch fence that is not a number: " + f->substr(0, 40)};
            }
            continue;
        }
        envelope::limits l;
        l.max_body_bytes = std::max<std::size_t>(msg.data.size(), l.max_body_bytes);
        it.body = envelope::decode(msg.data, l);
        if (auto* d = std::get_if<envelope::decoded>(&it.body)) {
            it.stream = std::holds_alternative<envelope::message>(*d)
                            ? std::get<envelope::message>(*d).stream
                            : std::get<envelope::batch>(*d).messages.front().stream;
            // A stream that met a conflict applies nothing more until an
            // operator looks (nothing is applied over another history).
            if (holds_.held(it.stream)) it.what = k::held;
        } else {
            it.what = k::malformed;
        }
    }
    auto job = [this, items](app::database& db, bool&) {
        std::vector<applied_one> out(items->size());
        for (std::size_t i = 0; i < items->size(); ++i) {
            const auto& it = (*items)[i];
            out[i].what = it.what;
            if (it.what == k::malformed) {
                out[i].error = std::get<envelope::decode_error>(it.body).what;
                continue;
            }
            if (it.what == k::held) continue;
            db.exec("SAVEPOINT steadfast_js_message");
            bool keep = true;
            try {
                if (it.what == k::fence)
                    st_.raise_fence(it.fence);
                else
                    out[i].a = st_.apply(std::get<envelope::decoded>(it.body), keep);
            } catch (...) {
                // Unless SQLite rolled the whole transaction back (a full
                // disk): then the savepoint went with it, and the error
                // thrown is the one to report (db_worker fails the group).
                if (!sqlite3_get_autocommit(db.handle())) {
                    db.exec("ROLLBACK TO steadfast_js_message");
                    db.exec("RELEASE steadfast_js_message");
                }
                throw;
            }
            if (!keep) db.exec("ROLLBACK TO steadfast_js_message");
            db.exec("RELEASE steadfast_js_message");
        }
        return out;
    };
    auto result = co_await worker_.run<std::vector<applied_one>>(ex_, std::move(job));
    if (auto e = app::failed(result)) {
        // Nothing was applied: JetStream delivers them again. (An embedding
        // program's apply handler that failed is not the storage's failure;
        // the whole fetch waits for it, as it would for the storage.)
        if (result.error().code == app::make_db_error_code(app::db_abandoned)) {
            h_.rejected("stopping");  // the node is being destroyed: delivered again
        } else if (app::application_failed(result.error().code)) {
            h_.rejected("apply_failed");
            app::log(level::warn, "apply_failed", {{"error", *e}, {"note", "nothing of the fetch applied; nak'd"}});
        } else {
            h_.storage(*e);
            h_.rejected("storage");
        }
        for (const auto& d : ds) pc_->nak(d, 1s);
        co_await pause(200ms);
        co_return;
    }
    auto& out = *result;
    bool gap = false;
    std::set<std::string> gap_counted;  // streams whose gap this fetch counted
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto& d = ds[i];
        auto& r = out[i];
        const auto& it = (*items)[i];
        if (r.what == k::malformed) {
            h_.rejected("malformed");
            app::log(level::error, "not_an_envelope",
                     {{"subject", d.msg.subject},
                      {"stream_seq", d.info.stream_seq},
                      {"error", r.error},
                      {"note", "not applied; acknowledged as terminal"}});
            pc_->term(d);
            continue;
        }
        if (r.what == k::fence) {
            app::log(level::info, "epoch_fence", {{"epoch", it.fence}, {"stream_seq", d.info.stream_seq}});
            pc_->ack(d);
            continue;
        }
        if (r.what == k::held) {
            pc_->nak(d, 5s);
            continue;
        }
        if (r.a.applied > 0) h_.storage({});
        h_.counted(r.a);
        if (r.a.status == 200) {
            pc_->ack(d);
            if (r.a.applied > 0 && holds_.applied(it.stream)) {
                // A gap closed (the missing messages came again).
                app::log(level::info, "unblocked", {{"stream", it.stream}});
            }
            continue;
        }
        const auto rej = envelope::decode_rejection(r.a.body);
        using rk = envelope::rejection::kind;
        if (rej.what == rk::stale_epoch) {
            // Written after a newer primary's fence: the older primary is
            // demoted by that fence; its message is not applied anywhere.
            h_.rejected("stale_epoch");
            app::log(level::warn, "stale_epoch",
                     {{"subject", d.msg.subject},
                      {"stream_seq", d.info.stream_seq},
                      {"fence", rej.epoch},
                      {"note", "written by a fenced primary: not applied"}});
            pc_->term(d);
            continue;
        }
        const std::string why = rej.what == rk::conflict ? "conflict at seq " + std::to_string(rej.seq)
                                                         : "gap: expects seq " + std::to_string(rej.expected);
        if (holds_.blocked(rej.stream, why)) {
            app::log(
                rej.what == rk::conflict ? level::error : level::warn, "blocked",
                {{"stream", rej.stream},
                 {"reason", why},
                 {"stream_seq", d.info.stream_seq},
                 {"hint",
                  rej.what == rk::conflict
                      ? "another primary wrote this stream: nothing more of it is applied; "
                        "a restart of the secondary tries again"
                      : "waiting for an earlier message to come again (nak'd, or left unacknowledged); "
                        "after 10 s the primary is asked to resend it (a hole in the log), after 5 minutes "
                        "the consumer starts again from the stream's start (a store restored from an older copy)"}});
        }
        if (rej.what == rk::gap) {
            // A message nak'd a moment ago comes again by itself; one that
            // the consumer acknowledged before this store was restored never
            // does, nor one the log itself lost (holds.hpp: when a gap that
            // stays asks the primary to resend the hole, and when the
            // consumer starts again from the stream's start).
            const auto step = holds_.gap(rej.stream, rej.expected, first_seq_of(it, rej.stream),
                                         gap_counted.insert(rej.stream).second, std::chrono::steady_clock::now());
            if (step.lasting) gap = true;
            if (step.ask_repair) ask_repair(rej.stream, step.from, step.to);
        }
        pc_->nak(d, holds_.nak_delay(rej.stream, rej.what == rk::gap));
    }
    if (gap) {
        co_await restart_consumer("a gap for 5 minutes: this store is behind what the consumer acknowledged");
    }
}

}  // namespace steadfast::secondary
