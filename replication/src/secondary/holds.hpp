// stream_holds: what the JetStream source holds back, per stream, and what a
// gap that lasts calls for, apart from I/O (times are passed in):
//   conflict  the stream applies nothing more (its messages are nak'd) until
//             a restart: nothing is applied over another history;
//   gap       waiting for an earlier message: one nak'd a moment ago comes
//             again by itself. A gap met in 5 fetches (a paused process makes
//             none) and older than 10 s is a hole in the log: the primary is
//             asked to resend it, at most every 15 s a stream. One older than
//             5 minutes means this store is behind what the consumer
//             acknowledged (restored from an older copy, beyond the primary's
//             retention): the consumer starts again from the stream's start,
//             at most once a minute.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace steadfast::secondary {

class stream_holds {
public:
    using time_point = std::chrono::steady_clock::time_point;

    /// A conflict holds the stream: nothing of it is applied.
    bool held(const std::string& stream) const;
    /// A message of `stream` was applied: true when that ended its block (a
    /// gap closed: the missing messages came again).
    bool applied(const std::string& stream);
    /// `stream` is blocked for `why`: true when that is news (to be logged).
    bool blocked(const std::string& stream, const std::string& why);

    struct gap_step {
        bool ask_repair = false;  // ask the primary to resend [from, to]
        std::uint64_t from = 0, to = 0;
        bool lasting = false;  // older than 5 minutes: the consumer should start again
    };
    /// `stream` answered "gap: expects `expected`" for a delivered message
    /// whose first seq of the stream is `first` (0: none). `new_fetch`: the
    /// first time this fetch met the stream's gap (a fetch counts once).
    gap_step gap(const std::string& stream, std::uint64_t expected, std::uint64_t first, bool new_fetch,
                 time_point now);
    /// How long a nak of a held or gapped message waits: a gap comes back
    /// after a second; once a repair was asked, and for a conflict, 5 s
    /// (fewer redeliveries while the copy at the log's end arrives).
    std::chrono::seconds nak_delay(const std::string& stream, bool is_gap) const;
    /// The consumer starts again from the stream's start (false: it did less
    /// than a minute ago). Gaps are forgotten either way: they are met anew.
    bool restart(time_point now);

    const std::map<std::string, std::string>& reasons() const noexcept { return blocked_; }
    std::uint64_t repair_requests() const noexcept { return repair_requests_; }

private:
    struct gap_seen {
        time_point since;             // first seen
        unsigned times = 0;           // fetches that met it since (a paused process makes none)
        std::uint64_t next_held = 0;  // the lowest seq delivered after the hole (0: none yet)
    };
    std::map<std::string, std::string> blocked_;      // stream -> why (conflict, gap)
    std::map<std::string, gap_seen> gaps_;            // streams answering gap
    std::map<std::string, time_point> repair_asked_;  // the last repair request per stream
    std::uint64_t repair_requests_ = 0;
    time_point last_restart_{};
};

}  // namespace steadfast::secondary
