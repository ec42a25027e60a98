// stream_positions: where one stream's delivery stands, changed only through
// these calls: what the secondary acknowledged (now, and the most ever),
// what is pending, when the oldest pending message was accepted, whether a
// rejected message is being isolated (one message a batch), and the last
// rewind (so that the same rewind without progress is recognised).
//
// The stream's machine (stream_fsm.hpp) owns one; intake reaches it through
// committed(), the recheck through resend_last(). No I/O, no clock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace steadfast::primary {

class stream_positions {
public:
    /// Not known yet: read from the outbox before the first send.
    static constexpr std::uint64_t unknown = UINT64_MAX;

    stream_positions(std::uint64_t acked, std::uint64_t acked_max, std::uint64_t pending) noexcept
        : acked_(acked), acked_max_(acked_max), pending_(pending) {}

    std::uint64_t acked() const noexcept { return acked_; }
    std::uint64_t acked_max() const noexcept { return acked_max_; }
    std::uint64_t pending() const noexcept { return pending_; }
    /// When the oldest unacknowledged message was accepted (0: none known).
    std::int64_t head_at_ms() const noexcept { return head_at_ms_; }
    bool known() const noexcept { return acked_ != unknown; }

    /// The acknowledged position read from the outbox (when not known).
    void learn(std::uint64_t position) noexcept { acked_ = acked_max_ = position; }
    /// `n` messages were committed.
    void committed(std::size_t n) noexcept { pending_ += n; }
    /// The oldest pending message was accepted at `at_ms`.
    void head(std::int64_t at_ms) noexcept { head_at_ms_ = at_ms; }

    /// The recheck: an idle stream (nothing pending, nothing resent already)
    /// steps back one message, to send its last acknowledged one again.
    /// False: nothing to do.
    bool resend_last() noexcept {
        if (pending_ != 0 || acked_ == 0 || acked_ == unknown || acked_ != acked_max_) return false;
        acked_ -= 1;
        return true;
    }

    struct progress {
        std::uint64_t first_fresh = 0;  // messages from this seq up to the ack are acknowledged for the first time
        std::uint64_t delivered = 0;    // how many of them were pending (counted as delivered)
    };
    /// The secondary applied up to `upto`: only messages never acknowledged
    /// before count as delivered (a rewind or a recheck resends some).
    progress acknowledge(std::uint64_t upto) noexcept {
        progress p;
        p.first_fresh = acked_max_ == unknown ? unknown : acked_max_ + 1;
        const std::uint64_t fresh = upto > acked_max_ ? upto - acked_max_ : 0;
        acked_ = upto;
        if (upto > acked_max_) acked_max_ = upto;
        p.delivered = fresh < pending_ ? fresh : pending_;
        pending_ -= p.delivered;
        if (pending_ == 0) head_at_ms_ = 0;
        return p;
    }
    /// An acknowledgement of a send (not of a read of the log) up to `upto`:
    /// progress past the last rewind forgets it.
    void sent_and_acknowledged(std::uint64_t upto) noexcept {
        if (upto > rewound_to_) rewound_to_ = unknown;
    }

    /// A message among those up to `through` is rejected: send one a batch
    /// until it is found.
    void isolate(std::uint64_t through) noexcept { single_until_ = through; }
    /// A batch's count limit: one while isolating.
    std::size_t batch_limit(std::size_t batch_max) const noexcept { return single_until_ > acked_ ? 1 : batch_max; }

    /// A rewind to after `upto` is decided. False: the same rewind again
    /// without progress (what is retained has a hole): do not resend.
    bool start_rewind(std::uint64_t upto) noexcept {
        if (rewound_to_ == upto) return false;
        rewound_to_ = upto;
        return true;
    }
    /// Resending from `upto` + 1: the position goes back, isolation ends.
    void rewind(std::uint64_t upto) noexcept {
        acked_ = upto;
        single_until_ = 0;
    }

private:
    std::uint64_t acked_, acked_max_, pending_;
    std::int64_t head_at_ms_ = 0;
    std::uint64_t single_until_ = 0;      // send one message at a time up to this seq (isolating a reject)
    std::uint64_t rewound_to_ = unknown;  // the last rewind's position, until acks pass it
};

}  // namespace steadfast::primary
