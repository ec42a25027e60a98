// The primary's delivery: every stream with messages in the outbox has a
// processor that carries out its machine's decisions (stream_fsm.hpp) over the
// link (link.hpp), on any executor. It owns the streams' state, the
// secondary's probe and the epoch fence; it knows nothing of how messages got
// into the outbox (intake.cpp's HTTP and standard input, or an embedding
// program's publish): whoever commits tells it with committed().
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "acknowledger.hpp"
#include "config.hpp"
#include "link.hpp"
#include "metrics.hpp"
#include "outbox.hpp"
#include "processors.hpp"
#include "retention.hpp"
#include "stream_fsm.hpp"
#include "stream_table.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/conditions.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::primary {

/// What the replicator uses, given when it is built; all outlive it.
struct replicator_env {
    const primary_config& o;
    boost::asio::any_io_executor ex;
    outbox& out;  // used on the database thread only (through worker)
    app::db_worker& worker;
    metrics& m;
    const std::vector<std::string>& tokens;  // sent to the secondary (the first); reloaded in place
};

/// What the replicator tells its owner.
struct replicator_hooks {
    std::function<void()> progress;  // pending went down, or a stream was blocked: drained yet?
    std::function<void()> demoted;   // a newer epoch was seen (logged): stop
};

class replicator final : link_host {
public:
    replicator(const replicator_env& env, replicator_hooks hooks);
    ~replicator();
    replicator(const replicator&) = delete;
    replicator& operator=(const replicator&) = delete;

    /// Reads the outbox's streams (on the calling thread, before the database
    /// thread runs any job) and starts a processor for each with messages;
    /// then purges what was kept past --retain, now and then.
    void start();
    /// Processors end at once (their sends and waits are cancelled); the last
    /// acknowledgements go to the database thread. Idempotent.
    void stop();
    /// Every processor has ended (after stop()).
    cond idle() const { return procs_.idle(); }
    /// Stops taking anything from the secondary's side: before the event
    /// loop's pending handlers are destroyed.
    void close() { link_->close(); }

    /// `n` messages of `stream` were committed to the outbox (on the event
    /// loop). `one`: the message itself, when a single one was committed: it
    /// joins the stream's window in memory when it continues it.
    void committed(const std::string& stream, std::size_t n, pending_message* one = nullptr);
    /// Every stream waiting for a ladder step tries again now (SIGHUP).
    void retry_now(const char* why) override;
    void check_secondary_soon() override { online_->check_soon(); }
    void outbox_read_failed(const std::string& stream, const std::string& error) override;

    /// Where the streams stand (stream_table.hpp): pending, blocked, busy.
    const stream_table& streams() const noexcept { return table_; }
    bool secondary_online() const { return online_->value(); }
    const std::shared_ptr<epoch_fence>& fence() const noexcept { return demoted_; }
    link& secondary() noexcept { return *link_; }
    const link& secondary() const noexcept { return *link_; }
    /// The per-stream series and the link's, for a scrape of /metrics.
    void refresh_metrics();

private:
    // link_host: what the link asks (replicator.cpp).
    bool stopping() const override { return procs_.stopping(); }
    cond online() const override { return online_; }
    std::optional<std::uint64_t> acked_max(const std::string& stream) const override;
    std::optional<std::string> blocked(const std::string& stream) const override;
    bool resend_last(const std::string& stream, std::uint64_t upto) override;

    void start_processor(const std::string& stream, bool retry_at_once = false);
    boost::asio::awaitable<void> deliver(std::string stream);
    // A wait action of the stream's machine: its delay, woken by what it names.
    boost::asio::awaitable<void> wait_for(const stream_action& a, const stream_state& st);
    void acknowledged(const std::string& stream, const stream_action& a);
    std::vector<pending_message> read_window(const std::string& stream, std::uint64_t after);
    void start_read_ahead(const std::string& stream, stream_state& st);
    boost::asio::awaitable<bool> next_step(const std::string& stream, std::uint64_t head_seq, const decision& d,
                                           std::chrono::nanoseconds server_wait);
    boost::asio::awaitable<bool> dead_letter(const std::string& stream, const pending_message& m,
                                             const std::string& why);
    boost::asio::awaitable<void> block(const std::string& stream, const std::string& reason, const std::string& detail);
    void retire(const std::string& stream);

    replicator_env env_;
    replicator_hooks hooks_;
    delivery_config delivery_;  // every stream machine's (before table_: they keep a reference)
    backoff ladder_;
    acknowledger acks_;
    processors procs_;
    std::shared_ptr<epoch_fence> demoted_;
    cond stop_;  // stopped or demoted: the processors' sends and waits end
    std::unique_ptr<link> link_;
    std::shared_ptr<probe_condition<>> online_;
    watchable::subscription online_sub_, demoted_sub_;
    stream_table table_;              // the streams in delivery, the blocked ones, what is pending
    retention retention_;             // acknowledged messages kept, then purged
    app::log_limiter read_failures_;  // outbox_read_failed lines, the link's with the processors'
};

}  // namespace steadfast::primary
