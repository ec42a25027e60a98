// stream_fsm: every decision of one stream's delivery, apart from I/O.
//
// In the style of the engine's retry_fsm (and Boost.Redis' run_fsm): the
// driver (node::deliver, delivery.cpp) calls resume() with what it saw and
// carries out the returned action: read the outbox, wait, send a batch, write
// the ladder's next step, dead-letter, block, demote, or end. The send window,
// the read-ahead, the positions (acknowledged, pending, isolating, rewound)
// and the ladder's schedule in memory are kept here and changed only here;
// intake and the recheck reach them through committed() and resend_last().
// No clock is read, no flag is waited on, nothing is sent: tests drive it
// with the events a driver would feed it (test/unit/primary/stream_fsm.cpp).
#pragma once

#include "decide.hpp"
#include "ladder.hpp"
#include "outbox.hpp"
#include "positions.hpp"
#include "window.hpp"

#include <boost/asio/coroutine.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::primary {

/// What every stream's machine is configured with (kept by reference).
struct delivery_config {
    std::size_t batch_max = 4000;         // messages a batch at most
    std::size_t body_limit = 512 * 1024;  // a request's body at most (exact encoded size)
    std::uint64_t epoch = 0;              // this primary's
    /// The link is a log that must be read before a stream's first send and
    /// after a wrong expected sequence (JetStream); false: requests (HTTP).
    bool reads_log = false;
    std::chrono::milliseconds idle_grace{5000};     // an idle stream waits this long for more, then ends
    std::chrono::milliseconds storage_pause{1000};  // after the outbox failed, before trying again
};

/// What the driver carries out next.
struct stream_action {
    enum class type : unsigned char {
        read,              // read the window after `from` (the outbox's position if `from_position`) and the schedule
        wait,              // wait `delay` (none: no deadline), woken early by what `wake_on` names
        start_read_ahead,  // fill read_ahead_slot() with read_window(after) on the database thread; resume at once
        sync_log,          // read the log's last message and decide_log() (reads_log links)
        send,              // send batch() over the link; resume with its decision
        rewind_facts,      // read the stream's oldest retained seq and next seq
        acknowledged,      // the secondary has up to `upto`: mark the outbox, count `delivered`; resume at once
        link_recovered,    // the ladder's wait is over: log it, clear the durable schedule; resume at once
        next_step,         // write the ladder's next step for head `seq` (decision(), `server_wait`); resume with `ok`
        dead_letter,       // dead-letter batch().front() (decision().reason); resume with `ok`
        rewound,           // resending from `seq` (decision().detail): count and log it; resume at once
        block,             // block the stream (`reason`, `detail`); then done
        demote,            // a newer primary exists (`epoch`); then done
        storage_failed,    // the outbox failed (`detail`): log it; resume after storage_pause (the action is a wait)
        done,              // the processor ends (its stream retires)
    };
    /// What ends a wait early (bits).
    enum wake : unsigned char {
        on_stop = 1,         // shutdown or demotion (every wait has it)
        on_commit = 2,       // a commit on the stream (the wake flag)
        on_online = 4,       // the secondary's probe passes
        on_offline = 8,      // the probe fails
        on_retry_now = 16,   // the operator asked (start, SIGHUP)
        on_read_ahead = 32,  // the read-ahead finished
    };

    type what = type::done;
    std::optional<std::chrono::milliseconds> delay;  // wait: from now (none: until woken)
    unsigned char wake_on = on_stop;
    // Carried out before the action, in this order.
    bool clear_commit = false;       // clear the wake flag
    bool clear_retry_now = false;    // clear the retry-now flag
    bool check_drained = false;      // the stream has nothing to send: tell --exit-when-drained
    std::uint64_t from = 0;          // read: after this seq
    bool from_position = false;      // read: after the outbox's acknowledged position
    std::uint64_t seq = 0;           // next_step: the head; rewound: the first seq resent; link_recovered: acked to
    std::uint64_t upto = 0;          // acknowledged
    std::uint64_t delivered = 0;     // acknowledged: messages acknowledged for the first time
    std::uint64_t first_fresh = 0;   // acknowledged: batch() messages with seq >= this, up to `upto`, are new (latency)
    std::uint32_t ladder_steps = 0;  // link_recovered
    std::uint64_t epoch = 0;         // demote
    std::string reason, detail;      // block; storage_failed (detail)
    std::chrono::nanoseconds server_wait{};  // next_step: a Retry-After
};

/// What the driver saw: read just before every resume(), and the result of
/// the action just carried out.
struct stream_event {
    bool stop = false;        // shutdown or demotion
    bool online = false;      // the secondary's probe passes
    bool retry_now = false;   // the retry-now flag
    bool commit = false;      // the wake flag
    std::int64_t now_ms = 0;  // the wall clock (schedules are durable, in wall time)

    // read, rewind_facts: what failed ("" when it worked).
    std::string error;
    // read
    std::uint64_t position = 0;  // from_position: the acknowledged seq read
    std::vector<pending_message> rows;
    schedule sched;
    // send, sync_log
    decision d;
    std::chrono::nanoseconds server_wait{};
    // rewind_facts
    std::uint64_t oldest = 0, next_seq = 1;
    // next_step, dead_letter: whether it was written
    bool ok = true;
};

class stream_fsm {
public:
    /// Keeps a reference to `c`: it must outlive the machine. `acked` is the
    /// stream's acknowledged position (UINT64_MAX: not known, read from the
    /// outbox first); `acked_max` the highest ever acknowledged.
    stream_fsm(const delivery_config& c, std::string stream, std::uint64_t acked, std::uint64_t acked_max,
               std::uint64_t pending);
    stream_fsm(delivery_config&&, std::string, std::uint64_t, std::uint64_t, std::uint64_t) = delete;

    /// The first call starts the processor (nothing in `ev` but the inputs).
    stream_action resume(stream_event& ev);

    /// `n` messages were committed (on the event loop's thread). `one`: the
    /// message itself when one was (a publish): it joins the window in
    /// memory when it continues it and the secondary is online, else the
    /// window is read again. The driver sets the wake flag.
    void committed(std::size_t n, pending_message* one, bool online);
    /// The recheck: an idle stream (nothing pending, nothing resent
    /// already) sends its last acknowledged message again, to learn whether
    /// the secondary still has it. False: nothing to do (the driver wakes it
    /// only on true).
    bool resend_last();

    const std::string& stream() const noexcept { return stream_; }
    std::uint64_t acked() const noexcept { return pos_.acked(); }
    std::uint64_t acked_max() const noexcept { return pos_.acked_max(); }
    std::uint64_t pending() const noexcept { return pos_.pending(); }
    std::int64_t head_at_ms() const noexcept { return pos_.head_at_ms(); }
    const schedule& sched() const noexcept { return sched_; }
    /// The batch of the last send action (and of acknowledged's latency).
    const std::vector<pending_message>& batch() const noexcept { return batch_; }
    /// The decision the current next_step or dead_letter action carries out.
    const decision& current() const noexcept { return answer_.d; }
    /// The read-ahead the start_read_ahead action fills (shared with the
    /// database thread's job, which may finish after the machine is gone).
    const std::shared_ptr<read_ahead>& read_ahead_slot() const noexcept { return window_.read_ahead_slot(); }
    bool reading_ahead() const noexcept { return window_.reading_ahead(); }

private:
    stream_action acknowledge(std::uint64_t upto);
    stream_action wait(std::optional<std::chrono::milliseconds> delay, unsigned wake_on);
    stream_action act(stream_action::type t);
    stream_action finish();
    stream_action failed(std::string error);
    stream_action blocked(std::string reason, std::string detail);

    const delivery_config& c_;
    std::string stream_;
    boost::asio::coroutine coro_;
    stream_positions pos_;  // acknowledged, pending, isolating, rewound (positions.hpp)
    send_window window_;    // rows read from the outbox or handed over by their commit (window.hpp)
    schedule sched_;        // the ladder's, for the window's head
    // The loop's own.
    std::vector<pending_message> batch_;  // the last send's
    struct answer {
        decision d;
        std::chrono::nanoseconds server_wait{};  // its Retry-After
        bool from_log = false;                   // the log's (sync_log), not a send's
    } answer_;                                   // what the last send or read of the log said
    std::uint64_t read_gen_ = 0;                 // the window a read is for
    bool sync_log_;                              // the log must be read before the next send
    bool woken_by_recovery_ = false;             // a ladder wait ended because the secondary came back
    bool resync_now_ = false;                    // the log answered a send "wrong sequence": read it now
    bool retire_after_read_ = false;  // the window ran dry and its wait for more ended: one read, then retire
    // Carried out before the next action (act()).
    struct before_action {
        bool clear_commit = false, clear_retry_now = false, drained = false;
    } before_;
};

}  // namespace steadfast::primary
