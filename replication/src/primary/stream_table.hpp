// stream_table: where every stream's messages stand on the primary. The
// streams in delivery (each with its machine and what its processor waits
// on), the blocked ones (kept, not delivered, until a restart), and what is
// pending over all; the gauges that report them (depth, active and blocked
// streams, and per stream at each scrape). The replicator changes it only
// through these calls; intake's questions (has_pending, busy_streams) are
// answered here.
#pragma once

#include "metrics.hpp"
#include "stream_fsm.hpp"

#include <steadfast/conditions.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace steadfast::primary {

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

class stream_table {
public:
    /// Keeps references to both: they must outlive the table.
    stream_table(const delivery_config& c, metrics& m) : c_(c), m_(m) {}

    // The streams in delivery. Map nodes are stable: a reference stays valid
    // until erase() of that stream.
    stream_state* find(const std::string& stream);
    const stream_state* find(const std::string& stream) const;
    stream_state& at(const std::string& stream) { return streams_.at(stream); }
    stream_state& add(const std::string& stream, std::uint64_t acked, std::uint64_t acked_max, std::uint64_t pending);
    void erase(const std::string& stream);
    std::size_t size() const noexcept { return streams_.size(); }
    /// To visit the entries (start, retry-now); streams come and go only
    /// through add() and erase(), which keep the gauge.
    std::map<std::string, stream_state>& streams() noexcept { return streams_; }

    /// Over all streams, blocked ones included.
    void committed(std::uint64_t n);
    void delivered(std::uint64_t n);
    std::uint64_t pending() const noexcept { return pending_; }

    /// `stream` (in delivery) is blocked for `reason`: its pending messages
    /// are kept, counted here, until a restart.
    void block(const std::string& stream, const std::string& reason);
    /// `n` messages were committed on `stream`: true when it is blocked (they
    /// are counted, not delivered).
    bool committed_while_blocked(const std::string& stream, std::uint64_t n);
    std::optional<std::string> blocked(const std::string& stream) const;
    bool is_blocked(const std::string& stream) const { return blocked_.count(stream) != 0; }
    std::uint64_t blocked_pending() const;
    std::size_t blocked_count() const noexcept { return blocked_.size(); }

    bool has_pending(const std::string& stream) const;
    /// Streams with messages pending (blocked ones too).
    std::size_t busy_streams() const;

    /// Per-stream pending counts and oldest ages, from what is in memory,
    /// for the `max_stream_series` streams whose oldest pending message is
    /// oldest (the totals cover every stream): a bounded number of series
    /// however many streams are pending, so that a scrape does not grow with
    /// them and this call walks them once (prometheus-cpp 1.0's
    /// Family::Remove looks through the whole family: never one a stream). Streams no longer among them lose theirs.
    void refresh_metrics(std::int64_t now_ms);
    static constexpr std::size_t max_stream_series = 100;
    /// The streams with series now (for tests).
    std::vector<std::string> streams_with_series() const;

private:
    struct blocked_stream {
        std::string reason;
        std::uint64_t pending = 0;
        std::int64_t head_at_ms = 0;
    };
    const delivery_config& c_;  // every stream machine's
    metrics& m_;
    std::map<std::string, stream_state> streams_;
    std::map<std::string, blocked_stream> blocked_;
    std::uint64_t pending_ = 0;
    struct series {
        prometheus::Gauge* pending;
        prometheus::Gauge* age;
    };
    std::map<std::string, series, std::less<>> exposed_;  // the per-stream series now on /metrics
};

}  // namespace steadfast::primary
