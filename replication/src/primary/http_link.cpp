// The link to a steadfast-secondary over HTTP(S): batches go as POST
// /api/messages through a pool of connections, several streams' batches
// sharing a request when they are ready at once (combiner.hpp); the health
// probe is GET /health, whose instance id tells a restart; and when the
// secondary is first seen, comes back or restarts, the recheck asks it what
// it holds (GET /api/streams) so that a secondary restored from an older copy
// is found out (recheck.hpp).
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "combiner.hpp"
#include "link.hpp"
#include "recheck.hpp"

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/health.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/pool.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

namespace {
// The secondary's address and TLS, for deliveries and the health probe.
http::client::options secondary_options(const primary_config& o) {
    auto c = http::client::from_url(o.secondary);
    if (o.secondary_tls) c.tls = o.secondary_tls;
    return c;
}
http::client::options link_options(const primary_config& o) {
    auto c = secondary_options(o);
    c.read_timeout = o.attempt_timeout;
    c.write_timeout = std::min<std::chrono::nanoseconds>(c.write_timeout, o.attempt_timeout);
    return c;
}
// --batch-max and --batch-bytes bound each request, shared by streams or not;
// --linger is how long a shared one waits for more.
combiner::limits request_limits(const primary_config& o) {
    combiner::limits cl;
    cl.body_bytes = std::min(o.batch_bytes, envelope::limits{}.max_body_bytes);
    cl.messages = std::min(o.batch_max, envelope::limits{}.max_batch);
    cl.linger = o.linger;
    return cl;
}
// Its own timeouts end a check before the probe's 1 s does, so that a
// secondary that accepts and never answers is reported as a timeout ("read:
// The socket was closed due to a timeout"), not as a cancelled read.
http::client::options probe_options_of(const primary_config& o) {
    auto probing = secondary_options(o);
    probing.connect_timeout = probing.read_timeout = probing.write_timeout = 900ms;
    return probing;
}

class http_link final : public link {
public:
    http_link(const link_env& env, link_host& host)
        : env_(env),
          host_(host),
          pool_(env.ex, link_options(env.o), env.o.connections),
          combined_(
              env.ex, pool_, request_limits(env.o),
              [this](std::string body, std::string key) { return make_request(std::move(body), std::move(key)); },
              env.stop),
          probe_client_(env.ex, probe_options_of(env.o)),
          recheck_client_(env.ex, link_options(env.o)) {}  // --attempt-timeout bounds a page

    bool reads_log() const noexcept override { return false; }
    // Sending is the best check.
    bool initially_online() const noexcept override { return true; }
    asio::awaitable<bool> probe() override;
    // While the secondary's host refuses connections (it is restarting), a
    // check costs either side next to nothing: every 50 ms, so a secondary
    // that is back is sent to within about 50 ms (issue 29: under 100 ms).
    // Any other failure (a timeout, an answer other than 200 such as a
    // secondary whose storage fails, TLS, a name that does not resolve) may
    // cost the other side work: the default's 50 to 200 ms.
    backoff probe_backoff() const override {
        return backoff::custom([this, other = link::probe_backoff()](std::uint64_t n, std::chrono::nanoseconds prev) {
            return last_check_refused_ ? std::chrono::nanoseconds(50ms) : other.base_delay(n, prev);
        });
    }
    void came_online() override { recheck_streams(); }
    std::string offline_error() const override { return probe_error_; }
    void health(nlohmann::json& j) const override {
        // Why the last check of the secondary failed, as long as it fails
        // (its reason may change while it stays offline; the log says only
        // the first).
        if (!probe_error_.empty()) j["secondary_error"] = probe_error_;
    }
    // Shutdown and demotion (env_.stop) end a send in flight through the
    // combiner, which cancels the pool's requests: the quick retries let an
    // attempt finish rather than run each one in a coroutine of its own in
    // order to cancel it (1.5 to 2 us a message: RESULTS.md).
    retry_policy quick(retry_policy p) const override {
        return std::move(p).with_stop_when(env_.stop, stop_in_flight::let_finish);
    }
    asio::awaitable<decision> send(const std::string& stream, const std::vector<pending_message>& batch,
                                   const retry_policy& quick, std::chrono::nanoseconds& server_wait) override;
    void forget(const std::string& stream) override { combined_.forget(stream); }
    void refresh_metrics() override { app::sync_counter(env_.m.requests, combined_.requests()); }
    std::string_view demoted_reason() const override { return "the secondary has seen a newer epoch"; }

private:
    http::request make_request(std::string body, std::string key) const;
    asio::awaitable<http::outcome> send_once(const std::string& stream, const std::string& list, std::size_t count,
                                             const std::string& key);
    // The secondary is back after being unreachable: streams with nothing to
    // send resend their last acknowledged message, to find out whether it was
    // restored from an older copy.
    void recheck_streams();
    asio::awaitable<void> recheck();
    void recheck_failed(nlohmann::json fields);
    // The streams a recheck resends to: what this primary acknowledged within
    // --retain (`acked`) that the secondary holds less of, by its pages of
    // GET /api/streams; all of them from a secondary without that route.
    // nullopt: the secondary could not be asked (tried again later).
    asio::awaitable<std::optional<std::vector<std::pair<std::string, std::uint64_t>>>> streams_behind(
        const std::map<std::string, std::uint64_t>& acked, std::size_t& pages);

    link_env env_;
    link_host& host_;
    http::client_pool pool_;
    combiner combined_;  // streams' batches sharing pool_'s requests
    http::client probe_client_;
    http::client recheck_client_;       // GET /api/streams, one request at a time
    std::string probe_error_;           // why the last health check failed ("" when it passed)
    bool last_check_refused_ = false;   // the last health check's connection was refused
    bool refused_since_pass_ = false;   // a send's connection was refused since the last check that passed
    std::string secondary_instance_;    // the secondary's X-Steadfast-Instance, as last probed
    bool rechecking_ = false;           // a recheck is under way
    bool recheck_again_ = false;        // it could not finish: another in the next slot
    bool recheck_timer_armed_ = false;  // a recheck waits for its slot (at most one every 5 s)
    std::chrono::steady_clock::time_point last_recheck_{};
};

// One health check of the secondary. A TLS failure is reported at once and
// plainly (a wrong CA or name would otherwise look like a secondary that is
// down), once for each new error.
asio::awaitable<bool> http_link::probe() {
    const auto r = co_await http::health_check_report(probe_client_);
    last_check_refused_ = r.refused;
    if (r.healthy) {
        const bool refused_send = std::exchange(refused_since_pass_, false);
        probe_error_.clear();
        if (!r.instance.empty() && r.instance != secondary_instance_) {
            // First seen (it may have been restored while this primary was
            // down), or restarted, perhaps on a restored data directory,
            // perhaps too briefly for the probe to see it down.
            if (!secondary_instance_.empty()) {
                app::log(level::info, "secondary_restarted", {{"secondary", env_.o.secondary}});
                // Back from a restart the probe may not have seen (down for
                // less than its second between checks while online): streams
                // whose quick retries ran out on its refused connections wait
                // for no ladder step. Only then: several secondaries behind a
                // balancer show a new instance at every check, and would
                // otherwise cancel every ladder step.
                if (refused_send) host_.retry_now("secondary_restarted");
            }
            secondary_instance_ = r.instance;
            recheck_streams();
        }
        co_return true;
    }
    if (r.tls_failure && r.why != probe_error_)
        app::log(level::error, "secondary_tls_failed",
                 {{"secondary", env_.o.secondary},
                  {"error", r.why},
                  {"hint",
                   "check --tls-ca (the CA that signed the secondary's certificate), --tls-server-name, "
                   "--tls-cert/--tls-key if the secondary asks for a certificate, and that "
                   "the secondary serves HTTPS"}});
    probe_error_ = r.why;
    co_return false;
}

// One attempt of a send. A refused connection (nothing listens: the
// secondary restarting?) has the probe check at once, so that the attempts
// after it wait for the secondary's return (the probe's gate) instead of
// running out within the probe's second between checks.
asio::awaitable<http::outcome> http_link::send_once(const std::string& stream, const std::string& list,
                                                    std::size_t count, const std::string& key) {
    auto o = co_await combined_.send(stream, list, count, key);
    if (!o.has_response() && o.error().refused()) {
        refused_since_pass_ = true;
        host_.check_secondary_soon();
    }
    co_return o;
}

http::request http_link::make_request(std::string body, std::string key) const {
    http::request req{"POST", "/api/messages", {{"Content-Type", "application/json"}}, std::move(body)};
    req.set("Idempotency-Key", std::move(key));
    if (!env_.tokens.empty()) req.set("Authorization", "Bearer " + env_.tokens.front());
    return req;
}

// One batch over HTTP (sharing a request with other streams' batches when
// several are ready at once), retried quickly; what the answer means (decide()).
asio::awaitable<decision> http_link::send(const std::string& stream, const std::vector<pending_message>& batch,
                                          const retry_policy& quick, std::chrono::nanoseconds& server_wait) {
    const std::string list = encode_list(stream, batch, env_.o.epoch), key = batch_key(batch);
    // Every send carries an Idempotency-Key (the secondary deduplicates), so
    // a send cut short may be repeated: http::classify's rule for a
    // repeatable request, with no request shape or std::function to build a
    // message. Named first: g++ 12 mishandles non-trivial temporaries inside
    // a co_await expression.
    auto attempt = classified([this, &stream, &list, &key,
                               n = batch.size()](const attempt_context&) { return send_once(stream, list, n, key); },
                              [](const http::outcome& o) { return http::classify(o, {.repeatable = true}); });
    auto r = co_await steadfast::retry(quick, std::move(attempt));

    delivery_outcome outcome;
    if (r.reason() == stop_reason::condition || r.reason() == stop_reason::cancelled || env_.stop.value()) {
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
        outcome.detail = std::string(to_string(r.reason())) + ": ";
        if (r.has_value()) {
            // The phase too: a read that timed out is a slow secondary, a
            // connect that did is a missing one (the hint differs).
            const http::transport_error& t = r.value().error();
            outcome.detail += std::string(http::to_string(t.phase)) + ": ";
            outcome.no_answer_in_time = t.answer_timed_out();  // (never a TLS error)
        }
        outcome.detail += r.last_error().message();
    }
    co_return decide(sent_batch{batch.front().seq, batch.back().seq}, outcome);
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
void http_link::recheck_streams() {
    if (host_.stopping()) return;
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
        auto t = std::make_shared<asio::steady_timer>(env_.ex, every - since);
        t->async_wait([this, t](const boost::system::error_code&) {
            recheck_timer_armed_ = false;
            recheck_streams();
        });
        return;
    }
    rechecking_ = true;
    last_recheck_ = clock::now();
    asio::co_spawn(env_.ex, recheck(), [this](std::exception_ptr e) {
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
        if (std::exchange(recheck_again_, false) && !host_.stopping()) recheck_streams();
    });
}

// Logged, and counted (a recheck that keeps failing shows on /metrics).
void http_link::recheck_failed(nlohmann::json fields) {
    env_.m.recheck_failures.Increment();
    app::log(level::warn, "recheck_failed", std::move(fields));
}

asio::awaitable<std::optional<std::vector<std::pair<std::string, std::uint64_t>>>> http_link::streams_behind(
    const std::map<std::string, std::uint64_t>& acked, std::size_t& pages) {
    recheck_merge merge(acked);  // recheck.hpp: the comparison, as plain code
    for (;;) {
        const std::string& after = merge.after();
        http::request req{
            "GET", "/api/streams?limit=1000" + (after.empty() ? std::string() : "&after=" + after), {}, {}};
        if (!env_.tokens.empty()) req.set("Authorization", "Bearer " + env_.tokens.front());
        const auto o = co_await recheck_client_.send(req);
        ++pages;
        if (host_.stopping()) co_return std::nullopt;
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
            recheck_failed({{"error", "GET /api/streams answered " + std::to_string(o.res().status)},
                            {"note", "tried again in 5 s"}});
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

asio::awaitable<void> http_link::recheck() {
    auto read = [this](app::database&, bool&) { return env_.out.recently_acknowledged(); };
    auto got = co_await env_.worker.run<std::map<std::string, std::uint64_t>>(env_.ex, std::move(read));
    if (auto e = app::failed(got)) {
        recheck_failed({{"error", *e}});
        recheck_again_ = true;
        co_return;
    }
    auto& acked = *got;
    std::erase_if(acked, [this](const auto& kv) { return kv.second == 0 || host_.blocked(kv.first).has_value(); });
    if (acked.empty() || host_.stopping()) co_return;
    std::size_t pages = 0;
    auto behind = co_await streams_behind(acked, pages);
    if (!behind) recheck_again_ = true;
    if (!behind || host_.stopping()) co_return;
    std::size_t n = 0;
    for (const auto& [name, upto] : *behind)
        if (host_.resend_last(name, upto)) ++n;
    app::log(level::info, "recheck",
             {{"streams", n},
              {"checked", acked.size()},
              {"requests", pages},
              {"why",
               "the secondary was first seen, came back or restarted: each stream it holds less of than was "
               "acknowledged resends its last acknowledged message, in case it was restored from an older copy"}});
}

}  // namespace

std::unique_ptr<link> make_http_link(const link_env& env, link_host& host) {
    return std::make_unique<http_link>(env, host);
}

}  // namespace steadfast::primary
