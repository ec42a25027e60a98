// The secondary's JetStream source (--source nats://...): a durable pull
// consumer with explicit acks on the primary's stream. Each JetStream message
// holds one envelope or a batch (the bytes of an HTTP request body); it is
// applied through the same store, with the same rules (in order per stream,
// idempotent by id, one epoch fence), and acknowledged only after the commit.
//   applied or duplicate  ack
//   an epoch fence        the store's fence raised (a primary took over), ack
//   stale epoch           term (never applied: a fenced primary wrote it)
//   conflict              nak; the stream applies nothing more (its later
//                         messages are held, nak'd) until a restart
//   gap                   nak (redelivered after a second); the stream is
//                         reported blocked. A gap that lasts 10 s (met in 5
//                         fetches) is a hole in the log (lost by JetStream):
//                         the primary is asked to resend it (repair_request)
//                         and the stream's later messages are nak'd for 5 s
//                         (the consumer has no ack-pending limit, so the copy
//                         at the log's end arrives). One that lasts 5 minutes
//                         means this store is behind what the consumer
//                         acknowledged (restored from an older copy, beyond
//                         the primary's retention): the consumer is recreated
//                         from the stream's start (once a minute at most) and
//                         what is applied already is skipped as duplicates.
//   not an envelope       term, and said
//   storage failure       nak after a second; nothing applied
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "claim.hpp"
#include "holds.hpp"
#include "stall_watch.hpp"
#include "store.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace steadfast::secondary {

struct source_options {
    std::string servers;  // nats://HOST:PORT[,...]
    jetstream::security security;
    std::string stream = "steadfast";
    std::string consumer;  // the durable consumer's name (one per secondary)
    std::size_t batch = 1000;
};

struct source_hooks {
    std::function<void(const store::answer&)> counted;  // after a commit: applied, duplicates, rejects
    std::function<void(const std::string&)> storage;    // storage state: "" ok, else the error
    std::function<void(const std::string&)> rejected;   // a reject reason (metrics)
};

class js_source {
public:
    js_source(boost::asio::any_io_executor ex, app::db_worker& worker, store& st, source_options o, source_hooks h);
    ~js_source();
    /// Consumes until stop().
    boost::asio::awaitable<void> run();
    void stop();

    /// For /health and /metrics.
    bool connected() const;
    /// The NATS servers refuse this secondary ("credentials_refused: ...",
    /// "tls_mismatch: ..."; "" while connected, or for any other reason).
    std::string nats_problem() const;
    /// Another secondary consumes with this --consumer (who, "" none): this
    /// one does not (claim.hpp).
    const std::string& consumer_in_use_by() const noexcept { return claim_->in_use_by(); }
    bool consuming() const noexcept { return consuming_; }
    std::uint64_t lag() const noexcept;
    std::uint64_t redeliveries() const noexcept;
    std::uint64_t deliveries() const noexcept;
    std::uint64_t repair_requests() const noexcept { return holds_.repair_requests(); }
    /// Times the consumer was found stalled and subscribed again (stall_watch.hpp).
    std::uint64_t stalls() const noexcept { return stall_.stalls(); }
    /// Pulls the server never answered (ended on this side's timer).
    std::uint64_t pulls_unanswered() const noexcept;
    const std::map<std::string, std::string>& blocked() const noexcept { return holds_.reasons(); }
    nlohmann::json health() const;

private:
    boost::asio::awaitable<bool> ensure_consumer();
    boost::asio::awaitable<void> pause(std::chrono::milliseconds d);
    boost::asio::awaitable<void> apply(std::vector<jetstream::pull_consumer::delivery>& ds);
    boost::asio::awaitable<void> restart_consumer(const std::string& why);
    struct info_reply {
        boost::system::error_code ec;
        jetstream::consumer_state state;
    };
    boost::asio::awaitable<info_reply> consumer_info();
    boost::asio::awaitable<bool> check_consumer();
    boost::asio::awaitable<bool> resubscribe_stalled();
    void ask_repair(const std::string& stream, std::uint64_t from, std::uint64_t to);
    void drop_consumer();  // pc_ goes; its counts are kept
    void unavailable(std::string problem, app::level how, std::string_view hint);

    boost::asio::any_io_executor ex_;
    app::db_worker& worker_;
    store& st_;
    source_options o_;
    source_hooks h_;
    std::unique_ptr<jetstream::client> js_;
    std::unique_ptr<jetstream::pull_consumer> pc_;
    std::unique_ptr<consumer_claim> claim_;         // one secondary a consumer
    boost::asio::cancellation_signal stop_signal_;  // the fetch and pauses
    std::shared_ptr<flag> stopping_flag_;           // the engine's stop-when
    bool stopping_ = false, consuming_ = false;
    std::string problem_;  // the last consumer problem logged ("" none)
    stream_holds holds_;   // what is held back per stream, and what a lasting gap calls for (holds.hpp)
    stall_watch stall_;    // whether the server still answers the consumer's pulls (stall_watch.hpp)
    // The lag as the consumer's last info said it (pending), when that came
    // after the last delivery: during a stall no delivery tells it.
    std::optional<std::uint64_t> info_lag_;
    static constexpr std::uint64_t not_read = UINT64_MAX;
    struct counts {
        std::uint64_t deliveries_before = 0, redeliveries_before = 0,
                      unanswered_before = 0;  // of pull consumers replaced
        std::uint64_t empty_fetches = 0;      // in a row
        std::uint64_t deleted_seen = 0;       // the pull consumer's endings().deleted, as last acted on
        // What a previous run was delivered and never acknowledged, as the
        // process's first consumer found it (not_read: not yet; then 0).
        std::uint64_t left_unacked = not_read;
        std::chrono::milliseconds ack_wait{0};  // the consumer's, as the server said
    } n_;
};

}  // namespace steadfast::secondary
