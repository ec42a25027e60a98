// The delivery processor's JetStream link (a nats:// --secondary): the log is
// the secondary. A stream's batches go to the subject `<prefix>.<stream>` in
// order, one in flight, each a JetStream message holding one envelope or a
// batch (the same bytes as an HTTP request body), with
//   Nats-Msg-Id: the message's id, or the batch's key (first id..last seq),
//     so that a retried publish is stored once (the server's window);
//   Nats-Expected-Last-Subject-Sequence: the log's seq of the stream's last
//     message as this primary wrote it, so that a second writer or a stale
//     primary is refused instead of interleaved.
// When the expectation fails, or at start, the processor reads the subject's
// last message and decide_log() says whether the log continues this
// primary's stream (ack up to it), lost some of it (rewind), belongs to
// someone else (block) or to a newer epoch (demote).
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "../common/nats_problem.hpp"
#include "jetstream_publish.hpp"
#include "leader_watch.hpp"
#include "link.hpp"
#include "repairs.hpp"

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

class jetstream_link final : public link {
public:
    jetstream_link(const link_env& env, link_host& host);
    ~jetstream_link() override { close(); }
    void close() override {
        fence_sub_.reset();  // before the NATS client they subscribe through
        repairs_->close();
        leaders_->close();
    }

    bool reads_log() const noexcept override { return true; }
    // Nothing is sent before the stream is known to exist with the replicas asked for.
    bool initially_online() const noexcept override { return false; }
    asio::awaitable<bool> probe() override;
    // probe_backoff(): the default (50 to 200 ms): each check is a request to
    // a cluster that may be electing a leader.
    // A JetStream request has no timeout of its own (an HTTP attempt has the
    // client's): the engine's attempt timeout bounds it.
    retry_policy quick(retry_policy p) const override {
        return std::move(p).with_attempt_timeout(env_.o.attempt_timeout);
    }
    asio::awaitable<decision> send(const std::string& stream, const std::vector<pending_message>& batch,
                                   const retry_policy& quick, std::chrono::nanoseconds& server_wait) override;
    asio::awaitable<decision> sync(const std::string& stream, std::uint64_t acked, const retry_policy& quick) override;
    void forget(const std::string& stream) override { positions_.erase(stream); }
    void restarted(const std::string& stream) override { positions_.erase(stream); }
    std::optional<std::string> refuse_stream(std::string_view stream) const override;
    std::optional<std::string> too_large(std::size_t bytes) const override;
    void health(nlohmann::json& j) const override {
        j["jetstream"] = {{"connected", js_->connected()->value()},
                          {"server", js_->connected_url()},
                          {"stream", env_.o.js_stream},
                          {"problem", js_problem_}};
    }
    void refresh_metrics() override;
    std::string configuration_problem() const override { return js_->problem(); }
    std::string offline_error() const override { return js_problem_; }
    std::string_view demoted_reason() const override {
        return "the JetStream log holds a newer epoch (another primary took over)";
    }

private:
    // A stream's place in the log, as this primary wrote or read it.
    struct position {
        // The log's seq of the stream's last message (the next publish
        // expects it); unknown: read the log first.
        std::optional<std::uint64_t> js_last;
        // Seqs up to here may have been published before a rewind (the
        // server's deduplication window may hold their ids).
        std::uint64_t resend_upto = 0;
    };
    std::string js_subject(const std::string& stream) const;
    asio::awaitable<bool> fence_jetstream();

    link_env env_;
    link_host& host_;
    std::unique_ptr<jetstream::client> js_;
    std::string js_problem_;  // why the last JetStream check failed ("" when it passed), logged once
    bool fenced_ = false, js_ready_logged_ = false;
    std::map<std::string, position> positions_;  // streams with a processor
    struct fence_watch : jetstream::client::inbox_sink {
        jetstream_link* n = nullptr;
        void on_messages() override;
    } fence_watch_;
    std::unique_ptr<jetstream::client::inbox> fence_sub_;
    // Secondaries' requests to resend a hole in the log (repairs.hpp).
    std::unique_ptr<log_repairs> repairs_;
    // The stream's new leaders, as the cluster announces them: what was sent
    // to the old one is sent again at once (leader_elected()).
    std::unique_ptr<leader_watch> leaders_;
    bool advisory_refused_logged_ = false;
    void leader_elected(const std::string& leader);
};

jetstream_link::jetstream_link(const link_env& env, link_host& host) : env_(env), host_(host) {
    jetstream::options jo;
    jo.servers = jetstream::parse_servers(env.o.secondary);
    jo.sec = env.o.nats;
    jo.name = "steadfast-primary";
    js_ = std::make_unique<jetstream::client>(env.ex, std::move(jo));
    // A newer primary's epoch fence, as it is written: demoted at once.
    fence_watch_.n = this;
    fence_sub_ = js_->subscribe(env.o.js_prefix, fence_watch_);
    // A secondary that found a hole in the log asks for it again.
    repairs_ = std::make_unique<log_repairs>(env_, host, *js_);
    leaders_ = std::make_unique<leader_watch>(*js_, env.ex, env.o.js_stream,
                                              [this](const std::string& leader) { leader_elected(leader); });
}

// A new leader for the stream: a publish, a read of the log or a check sent
// to the old leader (killed, or stepping down) is never answered. Each is
// abandoned and sent again at once (their retries, the probe), instead of
// waiting out --attempt-timeout; a stream waiting for a ladder step tries now.
// (A request the new leader already had is sent twice: the log says so;
// one whose caller does not retry, such as the epoch fence's, fails once.)
void jetstream_link::leader_elected(const std::string& leader) {
    const std::size_t abandoned = js_->abandon_requests();
    app::log(level::info, "jetstream_leader_elected",
             {{"stream", env_.o.js_stream}, {"leader", leader}, {"requests_abandoned", abandoned}});
    if (!host_.stopping() && !env_.stop.value()) host_.retry_now("jetstream_leader_elected");
}

bool valid_subject_tokens(std::string_view stream) {
    return !stream.empty() && stream.front() != '.' && stream.back() != '.' &&
           stream.find("..") == std::string_view::npos;
}

// Over JetStream a stream's name becomes subject tokens: no empty one.
std::optional<std::string> jetstream_link::refuse_stream(std::string_view stream) const {
    if (valid_subject_tokens(stream)) return std::nullopt;
    return "stream must not begin or end with a dot or hold two in a row "
           "(over JetStream its dots separate subject tokens)";
}

// A message must fit the server's max_payload as one envelope with its
// headers: refused at intake (413) rather than accepted and then blocked.
// Unknown while not connected (checked again when sent).
std::optional<std::string> jetstream_link::too_large(std::size_t bytes) const {
    const std::size_t limit = js_->max_payload();
    const std::size_t size = bytes + 512;  // 512: the NATS headers, generously
    if (limit == 0 || size <= limit) return std::nullopt;
    return "the message would be " + std::to_string(size) +
           " bytes in JetStream, over the NATS server's max_payload of " + std::to_string(limit);
}

std::string jetstream_link::js_subject(const std::string& stream) const {
    return env_.o.js_prefix + "." + stream;
}

namespace {
bool stopped_by(const stop_reason r) {
    return r == stop_reason::condition || r == stop_reason::cancelled;
}

}  // namespace

asio::awaitable<decision> jetstream_link::send(const std::string& stream, const std::vector<pending_message>& batch,
                                               const retry_policy& quick, std::chrono::nanoseconds&) {
    auto& st = positions_[stream];
    const std::string subject = js_subject(stream);
    const std::string body = encode_body(stream, batch, env_.o.epoch);
    // A resend (a rewind or a repair) gets its own Nats-Msg-Id: under the
    // batch's own key, the server's window would answer "duplicate" for the
    // copy it lost. Retries of one publish keep one id (the same expectation).
    std::string key = batch_key(batch);
    const std::uint64_t sent_before = std::max(host_.acked_max(stream).value_or(0), st.resend_upto);
    if (batch.front().seq <= sent_before) key += "@" + std::to_string(st.js_last.value_or(0));
    const jetstream::publish_options po{std::move(key), st.js_last, {}};
    std::string api_said;
    auto attempt = publish_attempt(*js_, subject, body, po, api_said);
    auto r = co_await steadfast::retry(quick, std::move(attempt));

    publish_outcome o;
    if (stopped_by(r.reason()) || env_.stop.value()) {
        o.what = publish_outcome::kind::stopped;
    } else if (r.has_value() && r.value().has_value()) {
        const auto& ack = r.value().value();
        st.js_last = ack.seq;
        if (ack.duplicate) env_.m.js_duplicates.Increment();
    } else {
        const auto ec = r.last_error();
        o.detail = describe(ec, api_said);
        if (ec == make_error_code(jetstream::errc::wrong_last_sequence)) {
            o.what = publish_outcome::kind::wrong_sequence;
            st.js_last.reset();  // unknown until the log is read (the machine's resync)
        } else if (ec == make_error_code(jetstream::errc::too_large))
            o.what = publish_outcome::kind::too_large;
        else
            o.what = unavailable(ec) ? publish_outcome::kind::unavailable : publish_outcome::kind::refused;
    }
    co_return decide_publish(sent_batch{batch.front().seq, batch.back().seq}, o);
}

asio::awaitable<decision> jetstream_link::sync(const std::string& stream, std::uint64_t acked_now,
                                               const retry_policy& quick) {
    auto& st = positions_[stream];
    const std::string subject = js_subject(stream);
    std::string api_said;
    auto attempt = [&](const attempt_context&) -> asio::awaitable<boost::system::result<jetstream::stored_message>> {
        auto [ec, m, err] = co_await jetstream::async_last_message(*js_, env_.o.js_stream, subject,
                                                                   asio::as_tuple(asio::use_awaitable));
        if (ec) {
            api_said = err.description;
            co_return ec;
        }
        co_return m;
    };
    auto classified_attempt = classified(attempt, jetstream::classifier{});
    auto r = co_await steadfast::retry(quick, std::move(classified_attempt));
    if (stopped_by(r.reason()) || env_.stop.value()) co_return decision{verdict::stop, 0, 0, "stopping", {}, {}};
    if (!r.has_value() || !r.value().has_value()) {
        const auto ec = r.last_error();
        co_return decision{
            verdict::redeliver,
            0,
            0,
            "reading the log: " + describe(ec, api_said),
            {unavailable(ec) ? link_fault::kind::jetstream_unavailable : link_fault::kind::jetstream_refused},
            {}};
    }
    const auto& m = r.value().value();

    log_head h;
    h.empty = m.seq == 0;
    if (!h.empty) {
        envelope::limits l;
        l.max_body_bytes = std::max<std::size_t>(m.data.size(), l.max_body_bytes);
        auto decoded = envelope::decode(m.data, l);
        const envelope::message* last = nullptr;
        if (auto* d = std::get_if<envelope::decoded>(&decoded)) {
            if (auto* one = std::get_if<envelope::message>(d))
                last = one;
            else if (auto& msgs = std::get<envelope::batch>(*d).messages; !msgs.empty())
                last = &msgs.back();
        }
        if (!last || last->stream != stream) {
            h.envelope = false;
        } else {
            h.seq = last->seq;
            h.epoch = last->epoch;
            h.id = last->id;
        }
    }
    const std::uint64_t head_seq = h.seq, acked = acked_now;
    auto read = [this, &stream, head_seq, acked](app::database&, bool&) {
        outbox_facts f;
        const auto pos = env_.out.position(stream);
        f.acked = std::max(acked, pos.acked_seq);
        f.next_seq = pos.next_seq;
        f.oldest = env_.out.oldest_seq(stream).value_or(0);
        if (head_seq > 0) {
            auto rows = env_.out.pending(stream, head_seq - 1, 1, SIZE_MAX);
            if (!rows.empty() && rows.front().seq == head_seq) f.id_at_head = rows.front().id;
        }
        return f;
    };
    auto got = co_await env_.worker.run<outbox_facts>(env_.ex, std::move(read));
    if (auto e = app::failed(got)) {
        host_.outbox_read_failed(stream, *e);
        co_await wait_until(env_.ex, std::chrono::steady_clock::now() + 1s, env_.stop);
        co_return decision{verdict::stop, 0, 0, "stopping", {}, {}};  // the processor restarts after a second
    }
    const auto& facts = *got;
    decision d = decide_log(h, env_.o.epoch, facts);
    if (d.what == verdict::rewind)
        st.resend_upto = std::max(st.resend_upto, facts.next_seq - 1);  // any may have been sent
    if (d.what == verdict::ack || d.what == verdict::rewind) {
        st.js_last = m.seq;
        if (d.what == verdict::ack && d.upto > acked_now)
            app::log(level::info, "log_ahead",
                     {{"stream", stream},
                      {"acked_to", d.upto},
                      {"from", acked_now},
                      {"note", "the log had messages whose acknowledgement was lost"}});
    }
    co_return d;
}

// The "JetStream available" check (the gate of every attempt): the stream
// exists with the subjects and replicas asked for and no limits, or is
// created so, and answers with a leader; and, once, this primary's epoch is
// in the log (fence_jetstream). A misconfiguration (another stream's
// subjects, other replicas, limits) is said once, plainly; messages wait.
asio::awaitable<bool> jetstream_link::probe() {
    const jetstream::stream_config cfg{
        env_.o.js_stream, {env_.o.js_prefix, env_.o.js_prefix + ".>"}, env_.o.js_replicas, 2min};
    auto [ec, st, why] = co_await jetstream::async_ensure_stream(*js_, cfg, asio::as_tuple(asio::use_awaitable));
    for (int again = 0; again < 3 && ec == make_error_code(jetstream::errc::abandoned); ++again) {
        // Sent to the old leader: the new one answers now (the check's
        // timeout would add up to a second to the failover).
        std::tie(ec, st, why) = co_await jetstream::async_ensure_stream(*js_, cfg, asio::as_tuple(asio::use_awaitable));
    }
    if (!ec && st.replicas > 1 && st.leader.empty()) {
        ec = make_error_code(jetstream::errc::unavailable);
        why = "the stream has no leader";
    }
    const std::string refused = js_->connected()->value() ? std::string{} : js_->problem();
    std::string problem =
        !ec                ? std::string{}
        : !refused.empty() ? refused
        : ec == asio::error::operation_aborted
            ? std::string(js_->connected()->value() ? "no answer within the check's second (no JetStream leader?)"
                                                    : "not connected to any NATS server of --secondary")
            : describe(ec, why);
    if (!advisory_refused_logged_ && leader_watch::refused(js_->last_error())) {
        advisory_refused_logged_ = true;
        app::log(level::warn, "jetstream_advisories_refused",
                 {{"error", js_->last_error()},
                  {"hint",
                   "allow this primary's NATS user to subscribe to $JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.> : "
                   "without it, a publish sent to a leader that died waits out --attempt-timeout"}});
    }
    if (!ec && !fenced_ && !co_await fence_jetstream()) co_return false;
    if (problem != js_problem_ || (problem.empty() && !js_ready_logged_)) {
        if (problem.empty()) {
            js_ready_logged_ = true;
            app::log(level::info, "jetstream_ready",
                     {{"stream", env_.o.js_stream},
                      {"replicas", st.replicas},
                      {"leader", st.leader},
                      {"server", js_->connected_url()},
                      {"messages", st.messages},
                      {"epoch", env_.o.epoch}});
        } else if (!refused.empty()) {
            app::log(level::error, "nats_refused",
                     {{"error", refused}, {"hint", app::describe_nats_problem(refused).hint}});
        } else if (ec == make_error_code(jetstream::errc::config_mismatch) ||
                   ec == make_error_code(jetstream::errc::api_error)) {
            app::log(level::error, "jetstream_misconfigured",
                     {{"stream", env_.o.js_stream},
                      {"error", problem},
                      {"hint",
                       "--js-stream, --js-prefix and --js-replicas must match the existing stream, which must have "
                       "no limits (or use another name)"}});
        } else {
            app::log(level::warn, "jetstream_unavailable",
                     {{"stream", env_.o.js_stream},
                      {"error", problem},
                      {"connected", js_->connected()->value()},
                      {"server", js_->connected_url()},
                      {"nats_error", js_->last_error()}});
        }
    }
    js_problem_ = std::move(problem);
    co_return !ec;
}

// The epoch fence in the log: the subject `<prefix>` holds the epochs of the
// primaries that wrote the stream, newest last. At start a primary reads it:
// a newer epoch than its own demotes it (exit 3); else it appends its own
// (expecting the subject's last sequence, so that two primaries starting at
// once cannot both pass). The secondaries raise their fence when they read it,
// and an older primary still running sees it (fence_watch) and is demoted.
asio::awaitable<bool> jetstream_link::fence_jetstream() {
    const std::string subject = env_.o.js_prefix;
    for (int round = 0; round < 3; ++round) {
        auto [ec, m, err] = co_await jetstream::async_last_message(*js_, env_.o.js_stream, subject,
                                                                   asio::as_tuple(asio::use_awaitable));
        if (ec) {
            js_problem_ = "reading the epoch fence: " + describe(ec, err.description);
            co_return false;
        }
        std::uint64_t seen = 0;
        if (m.seq) {
            auto j = nlohmann::json::parse(m.data, nullptr, false);
            if (j.is_object() && j.contains("epoch") && j["epoch"].is_number_unsigned())
                seen = j["epoch"].get<std::uint64_t>();
        }
        if (m.seq && seen > env_.o.epoch) {
            env_.demoted->observe(seen);
            co_return false;
        }
        if (m.seq && seen == env_.o.epoch) {
            fenced_ = true;
            co_return true;
        }
        std::string data = nlohmann::json{{"epoch", env_.o.epoch}}.dump(), s = subject;
        const jetstream::publish_options po{"steadfast-epoch-" + std::to_string(env_.o.epoch),
                                            m.seq,
                                            {{"Steadfast-Epoch-Fence", std::to_string(env_.o.epoch)}}};
        auto [pe, ack, perr] = co_await jetstream::async_publish(*js_, std::move(s), std::move(data), po,
                                                                 asio::as_tuple(asio::use_awaitable));
        if (!pe) {
            app::log(level::info, "epoch_fence", {{"epoch", env_.o.epoch}, {"previous", seen}, {"log_seq", ack.seq}});
            fenced_ = true;
            co_return true;
        }
        if (pe != make_error_code(jetstream::errc::wrong_last_sequence)) {
            js_problem_ = "writing the epoch fence: " + describe(pe, perr.description);
            co_return false;
        }
        // Another primary wrote the fence meanwhile: read it again.
    }
    co_return false;
}

void jetstream_link::fence_watch::on_messages() {
    for (auto& m : n->fence_sub_->drain(SIZE_MAX)) {
        const auto* f = m.get("Steadfast-Epoch-Fence");
        if (!f) continue;
        std::uint64_t e = 0;
        try {
            e = std::stoull(*f);
        } catch (const std::exception&) {
            continue;
        }
        if (e > n->env_.o.epoch) n->env_.demoted->observe(e);
    }
}

void jetstream_link::refresh_metrics() {
    env_.m.js_connected.Set(js_->connected()->value() ? 1 : 0);
    env_.m.nats_refused.Set(js_->connected()->value() || js_->problem().empty() ? 0 : 1);
    app::sync_counter(env_.m.js_disconnects, js_->disconnects());
    app::sync_counter(env_.m.js_reconnects, js_->reconnects());
}

std::unique_ptr<link> make_jetstream_link(const link_env& env, link_host& host) {
    return std::make_unique<jetstream_link>(env, host);
}

}  // namespace steadfast::primary
