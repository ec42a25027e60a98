// Publishes made one by one on the event loop (HTTP's POST /publish), handed
// to the database thread in groups: every publish made while the database
// thread has not yet taken the last group joins it. A group costs one job
// (one savepoint at most, one completion hand-off back to the loop, one wake-
// up of each thread), not one per publish, and each stream's next seq is read
// and written once a group. Each publish still gets its own answer, in the
// order they were made, once the group's commit is on disk; a group whose
// commit fails fails each of its publishes with that failure (what fails a
// group commit is the storage's, which every publish in it shares).
//
// The messages go to the outbox as publishes alone do (outbox::publish's
// `each_alone`): small ones to its tail.
#pragma once

#include "outbox.hpp"
#include <common/db_worker.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace steadfast::primary {

class publish_batcher {
public:
    using result = app::db_result<published>;
    using handler = boost::asio::any_completion_handler<void(result)>;
    /// Told of each stored message on `ex`, in the order of the publishes,
    /// before its publisher is answered (delivery must learn of every stored
    /// message, whatever becomes of its publisher): the message, its payload
    /// (as stored) and its time.
    using stored_fn = std::function<void(const published&, std::string payload, std::int64_t at_ms)>;
    using claim_fn = std::function<bool()>;

    /// Groups go to `worker`'s database thread, which runs them on `out`;
    /// answers come back on `ex` (the event loop the publishes are made on).
    /// `out` and `ex` outlive it, and `worker` is stopped before it is
    /// destroyed (its queued groups' answers use it). Holds no outstanding
    /// work on `ex`: its owner keeps the loop running while publishes are
    /// under way.
    publish_batcher(app::db_worker& worker, outbox& out, boost::asio::any_io_executor ex, stored_fn stored)
        : worker_(worker), out_(out), ex_(std::move(ex)), stored_(std::move(stored)) {}
    publish_batcher(const publish_batcher&) = delete;
    publish_batcher& operator=(const publish_batcher&) = delete;

    /// On `ex`'s thread: stores `payload` (checked already) in `stream`,
    /// `at_ms` its time if it starts a group (a group's messages share the
    /// time of its first). Completes on `ex`, never inline, with the message
    /// once its commit is on disk, or why nothing was stored. Completion
    /// signature `void(result)`.
    template <class CompletionToken>
    auto async_publish(std::string stream, std::string payload, std::int64_t at_ms, CompletionToken&& token) {
        return async_publish(std::move(stream), std::move(payload), at_ms, claim_fn{},
                             std::forward<CompletionToken>(token));
    }
    /// The same; `claim`, when given, is asked on the database thread as its
    /// group is taken, before anything is written: false (its publisher
    /// withdrew it) stores nothing of it, and it completes with
    /// operation_aborted (or with its group's failure, if the group failed).
    template <class CompletionToken>
    auto async_publish(std::string stream, std::string payload, std::int64_t at_ms, claim_fn claim,
                       CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(result)>(
            [this](auto h, std::string s, std::string p, std::int64_t t, claim_fn c) {
                add(std::move(s), std::move(p), t, std::move(c), handler(std::move(h)));
            },
            token, std::move(stream), std::move(payload), at_ms, std::move(claim));
    }

    /// The next publish starts a group of its own. Call it before queueing
    /// another job that stores messages (a batch, a transactional publish),
    /// so that publishes made after that job are stored after it: the order
    /// of the calls is the order of the seqs.
    void seal() noexcept { open_.reset(); }

    /// Groups handed to the database thread so far, and the publishes in them.
    std::uint64_t groups() const noexcept { return groups_; }
    std::uint64_t publishes() const noexcept { return publishes_; }

private:
    struct group;
    void add(std::string stream, std::string payload, std::int64_t at_ms, claim_fn claim, handler done);
    void submit(const std::shared_ptr<group>& g);
    void answer(group& g, const std::optional<app::db_failure>& failure);

    app::db_worker& worker_;
    outbox& out_;
    boost::asio::any_io_executor ex_;
    stored_fn stored_;
    std::shared_ptr<group> open_;  // the group new publishes join, until the database thread takes it
    std::uint64_t groups_ = 0, publishes_ = 0;
};

}  // namespace steadfast::primary
