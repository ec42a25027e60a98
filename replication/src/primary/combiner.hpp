// Streams' batches share requests: what several streams have to send at the
// same moment goes to the secondary as one batch (the contract's batch may
// hold several streams, each contiguous), so that 16 busy streams cost the
// secondary one request and one transaction, not 16.
//
// A stream's send waits in a queue while a request is in flight; the request
// that follows takes everything queued, within the body and count limits.
// While streams share requests (the last one a sender took held several), a
// request also waits up to `linger` for more to join before it goes (Kafka's
// linger.ms): fewer, larger requests, each costing the secondary one
// transaction and one fsync, for up to `linger` more latency. A full request,
// a part that must go alone, parts sent again after another stream's 409 and
// a request started after `patience` never wait. A stream delivering by
// itself never waits (its own next batch cannot come while it waits). At
// most `--connections` requests are in flight: another one starts when the
// queue holds a full request, or when a send has waited longer than
// `patience` (a slow or stuck request does not hold the other streams up for
// longer than that). Each stream still has at most one batch in flight.
//
// A stream shares requests only once one of its own went through healthily,
// and goes by itself again after a shared request failed or was slow (see
// judge()), so that a stream the secondary refuses or answers slowly holds up
// the others only in the shared request where it showed itself.
//
// Each part gets the answer it would have had alone (split_answer() in
// decide.hpp): a 409 naming a stream is that stream's, and the other parts,
// of which nothing was applied, are sent again at once; the secondary's 400,
// 413 or 422 (or a 409 naming none of them) sends each part by itself to find
// whose it is, but for the 400s that no message causes (a request's framing,
// the primary's epoch); anything else is everyone's.
#pragma once

#include <steadfast/conditions.hpp>
#include <steadfast/transport/pool.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace steadfast::primary {

class combiner {
public:
    struct limits {
        std::size_t body_bytes = 1 << 20;  // a request's body at most
        std::size_t messages = 10'000;     // envelopes in a request at most
        std::chrono::milliseconds patience{20};
        /// How long a request of streams sharing requests waits for more
        /// (0: it goes at once); under `patience`.
        std::chrono::milliseconds linger{0};
        // A request is slow (judge()) past four times the typical request
        // (a moving average), and never under this.
        std::chrono::milliseconds slow{100};
    };
    /// Makes the request for a body (headers: type, token, Idempotency-Key `key`).
    using request_maker = std::function<http::request(std::string body, std::string key)>;

    /// Requests go through `pool` (which must outlive this), on executor `ex`.
    /// `stop` ends every send (shutdown, demotion): its wait in the queue, and
    /// the request in flight (the pool's sends are cancelled), so that the
    /// quick retries around a send need not cancel it themselves
    /// (stop_in_flight::let_finish: no coroutine of its own per attempt).
    combiner(boost::asio::any_io_executor ex, http::client_pool& pool, limits l, request_maker make, cond stop);
    combiner(const combiner&) = delete;
    combiner& operator=(const combiner&) = delete;

    /// Sends one stream's batch: `list` its envelopes, comma-joined, `count`
    /// of them, `key` its Idempotency-Key; the strings must live until it
    /// completes. With nothing in flight it goes at once, by itself. Completes
    /// with the answer this batch would have had alone (of a 2xx shared with
    /// other streams, the status and headers: the results are not split); on
    /// stop or cancellation while it waits, with
    /// transport_error{operation_aborted} (it may still be sent).
    boost::asio::awaitable<http::outcome> send(std::string_view stream, std::string_view list, std::size_t count,
                                               std::string_view key);

    /// The stream has no processor any more: nothing of it is kept.
    void forget(std::string_view stream);

    /// Requests sent so far (for metrics).
    std::uint64_t requests() const noexcept { return requests_; }
    /// Times the queue was looked at for a send that waited `patience` (one
    /// timer for the whole queue, not one a waiting send: for tests).
    std::uint64_t patience_checks() const noexcept { return patience_checks_; }

private:
    struct part;
    using part_ptr = std::shared_ptr<part>;
    void enqueue(const part_ptr& p, bool front);
    void dequeued(part& p);
    static std::string shared_key(const std::deque<part_ptr>& group);
    void kick(bool waited);
    void arm_patience(std::chrono::steady_clock::time_point at);
    void check_patience();
    void disarm_patience();
    bool full() const;
    boost::asio::awaitable<void> linger(bool at_once);
    void judge(std::string_view stream, const http::outcome& out, std::chrono::steady_clock::duration took,
               bool resent = false);
    void timed(const http::outcome& out, std::chrono::steady_clock::duration took);
    std::chrono::steady_clock::duration slow() const;
    boost::asio::awaitable<void> sender(bool at_once);
    boost::asio::awaitable<void> send_group(std::deque<part_ptr>& group);
    std::deque<part_ptr> take();

    boost::asio::any_io_executor ex_;
    http::client_pool& pool_;
    limits limits_;
    request_maker make_;
    cond stop_;
    watchable::subscription stop_sub_;           // stop_ turning true cancels the pool's sends
    std::set<std::string, std::less<>> proven_;  // streams that share requests (judge())
    std::deque<part_ptr> queue_;
    std::size_t queued_bytes_ = 0, queued_messages_ = 0, queued_alone_ = 0;
    std::size_t senders_ = 0;                        // requests in flight (by sender coroutines or sends of their own)
    std::size_t runners_ = 0;                        // sender coroutines
    bool shared_last_ = false;                       // the last request taken held several streams' parts
    std::shared_ptr<flag> go_now_;                   // something queued that must not wait a linger
    std::chrono::steady_clock::duration typical_{};  // moving average of answered requests' durations
    std::uint64_t requests_ = 0;
    // One timer for the queue's patience: it fires when the part queued
    // longest has waited `patience` (see check_patience()).
    boost::asio::steady_timer patience_timer_;
    bool patience_armed_ = false;
    std::uint64_t patience_checks_ = 0;
    std::shared_ptr<char> alive_ = std::make_shared<char>();  // the timer's handler outliving this does nothing
};

}  // namespace steadfast::primary
