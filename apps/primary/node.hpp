// steadfast-primary's node: the state shared by its parts, each in a file of
// its own (one reason to change each):
//   main.cpp      the process: signals, exit codes
//   flags.cpp     the flags, checked (config.hpp: what they set)
//   commands.cpp  `status`, `dead-letters` (offline)
//   node.cpp      wiring, start and stop
//   intake.cpp    /publish and --stdin: check, commit, answer
//   delivery.cpp  the per-stream processor: carries out stream_fsm's actions
//   link.cpp, http_link.cpp, jetstream_link.cpp  the link to the secondary
//   stream_fsm.cpp  a stream's delivery decisions (plain code, unit-tested)
//   decide.cpp    what an answer means for a batch (plain code, unit-tested)
//   ladder.cpp    when a failed head is tried next (plain code, unit-tested)
//   window.cpp    what joins a stream's send window (plain code, unit-tested)
//   outbox.cpp    the durable outbox (SQLite)
// One io_context thread runs everything but SQLite (the database thread) and
// the stdin reader.
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "../common/sqlite.hpp"
#include "../common/storage_health.hpp"
#include "combiner.hpp"
#include "config.hpp"
#include "decide.hpp"
#include "link.hpp"
#include "metrics.hpp"
#include "outbox.hpp"
#include "stream_fsm.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/conditions.hpp>
#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/pool.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace steadfast::primary {

// An io_context whose pending handlers (suspended coroutines) can be destroyed
// while the node's members they refer to still exist.
struct io_context_owner : boost::asio::io_context {
    using boost::asio::execution_context::shutdown;
    using boost::asio::io_context::io_context;
};

// A stream with messages to deliver. Exists only while it has some: an idle
// stream's processor ends and its state goes (5,000 streams seen once cost
// nothing later). Its decisions and positions are its machine's
// (stream_fsm.hpp); what the processor waits on is here.
struct stream_state {
    stream_state(const delivery_config& c, const std::string& name, std::uint64_t acked, std::uint64_t acked_max,
                 std::uint64_t pending)
        : fsm(c, name, acked, acked_max, pending) {}
    stream_fsm fsm;
    std::shared_ptr<flag> wake;  // set when new messages were committed
    // Set to end a wait for the ladder's next step at once: at start (a restart
    // is the operator's "try again now") and on SIGHUP (after a fix of the
    // configuration, of either side).
    std::shared_ptr<flag> retry_now;
    std::shared_ptr<flag> read_done;  // false while a read-ahead runs (made by the first)
};

// Acknowledgements are coalesced: the outbox is marked up to the latest target
// at most every 10 ms per stream. Shared with the timer, so that it survives
// the stream's state.
struct ack_trim {
    std::atomic<std::uint64_t> target{0};  // the highest seq acknowledged
    std::atomic<std::uint64_t> last{0};    // the latest acknowledgement's (lower while a rewind resends)
    bool scheduled = false;
};

class node final : link_host {
public:
    node(const options& o, app::database& db);
    ~node();
    int run();

private:
    // link_host: what the link asks of the node (delivery.cpp).
    bool stopping() const override { return stopping_; }
    cond online() const override { return online_; }
    std::optional<std::uint64_t> acked_max(const std::string& stream) const override;
    std::optional<std::string> blocked(const std::string& stream) const override;
    bool resend_last(const std::string& stream, std::uint64_t upto) override;

    // node.cpp
    void stop(const std::string& why, int code = exit_ok);
    void check_drained();

    // intake.cpp
    http::router routes();
    void read_stdin();
    // `one`: the message itself, when a single one was committed (a
    // publish): it joins the stream's window in memory when it continues it,
    // so that delivery need not read it back from the outbox.
    void committed(const std::string& stream, std::size_t n, pending_message* one = nullptr);
    std::size_t envelope_overhead(std::string_view stream) const;
    std::optional<http::response> refuse_publish(const http::request& req,
                                                 std::string& stream);  // may check the disk again
    bool at_stream_cap(const std::string& stream) const;
    bool has_pending(const std::string& stream) const;
    // A publish admitted to a stream holds the stream's place under
    // --max-streams until its commit has made the stream pending (or failed):
    // concurrent publishes to new streams cannot all pass the cap, nor one to
    // a stream whose messages are all acknowledged meanwhile.
    class stream_admission {
    public:
        stream_admission(node& n, const std::string& stream);
        ~stream_admission();
        stream_admission(const stream_admission&) = delete;
        stream_admission& operator=(const stream_admission&) = delete;

    private:
        node& n_;
        std::map<std::string, std::size_t>::iterator held_;  // in admitting_, erased only by the last holder
    };

    // delivery.cpp
    void start_processor(const std::string& stream, bool retry_at_once = false);
    // SIGHUP: every stream waiting for a ladder step tries again now.
    void retry_now(const char* why);
    boost::asio::awaitable<void> deliver(std::string stream);
    // A wait action of the stream's machine: its delay, woken by what it names.
    boost::asio::awaitable<void> wait_for(const stream_action& a, const stream_state& st);
    // A new stream's state (its processor is started by start_processor).
    stream_state& add_stream(const std::string& stream, std::uint64_t acked, std::uint64_t acked_max,
                             std::uint64_t pending);
    void acknowledge(const std::string& stream, const stream_action& a);
    std::vector<pending_message> read_window(const std::string& stream, std::uint64_t after);
    void start_read_ahead(const std::string& stream, stream_state& st);
    void schedule_trim(const std::string& stream);
    void trim(const std::string& stream, const std::shared_ptr<ack_trim>& t);
    boost::asio::awaitable<bool> next_step(const std::string& stream, std::uint64_t head_seq, const decision& d,
                                           std::chrono::nanoseconds server_wait);
    boost::asio::awaitable<bool> dead_letter(const std::string& stream, const pending_message& m,
                                             const std::string& why);
    boost::asio::awaitable<void> block(const std::string& stream, const std::string& reason, const std::string& detail);
    void retire(const std::string& stream);
    void purge_retained();

    const options& o_;
    delivery_config delivery_;  // every stream machine's (before streams_: they keep a reference)
    io_context_owner ioc_{1};
    app::database& db_;
    outbox out_;
    app::db_worker worker_;
    backoff ladder_;
    std::vector<std::string> tokens_;  // --token-file: the first is sent, any is accepted on /publish
    metrics m_;
    // The secondary's: after ioc_, tokens_ and m_, which it refers to (destroyed before them).
    std::unique_ptr<link> link_;
    std::shared_ptr<shutdown_condition> shutdown_;  // SIGINT, SIGTERM or stop()
    std::shared_ptr<epoch_fence> demoted_;
    cond stop_;
    std::shared_ptr<probe_condition<>> online_;
    watchable::subscription online_sub_, demoted_sub_;
    std::set<std::string> exposed_streams_;
    void refresh_stream_metrics();
    std::map<std::string, stream_state> streams_;
    std::map<std::string, std::shared_ptr<ack_trim>> trims_;
    struct blocked_stream {
        std::string reason;
        std::uint64_t pending = 0;
        std::int64_t head_at_ms = 0;
    };
    std::map<std::string, blocked_stream> blocked_;
    std::uint64_t pending_total_ = 0;
    int publishing_ = 0;  // publishes between acceptance and commit (io thread only)
    // Streams that publishes under way are adding to, and how many
    // publishes each (stream_admission).
    std::map<std::string, std::size_t> admitting_;
    std::size_t retired_since_trim_ = 0;
    bool input_closed_ = false, stopping_ = false;
    bool ready_ = false;  // /ready: the event loop runs and no shutdown has begun
    // The outbox can take a write: free space above --min-free-space, and the
    // last commit worked (false from a failed one until a write succeeds).
    app::storage_health storage_;
    void storage_changed(bool ok, const std::string& why);
    // Refused publishes while the outbox fails: logged at most once a second
    // (a client retrying at once would write thousands of lines a second).
    std::uint64_t failed_publishes_ = 0, failed_unlogged_ = 0;
    std::chrono::steady_clock::time_point failed_logged_at_{};
    bool failure_reported_ = false;  // a publish_failed line since the last storage_recovered
    void publish_failed(const std::string& stream, const std::string& error);
    void outbox_works();
    std::atomic<bool> stdin_stop_{false};
    // A group of standard input was not stored: no later group may be (the
    // input's order would break), so they fail too (database thread only).
    bool stdin_failed_ = false;
    bool stdin_failure_logged_ = false;  // (io thread)
    http::server* server_ = nullptr;
    int exit_code_ = exit_ok;
};

}  // namespace steadfast::primary
