// When the secondary asks JetStream about its consumer, and when what it hears
// means the consumer is stalled: the server holds messages for it (pending)
// while its pulls keep ending empty.
//
// A pull the server drops without a word (no interest in its reply inbox as
// the server sees it, a request that expired before the consumer took it:
// nats-server 2.9 answers neither) ends on the client's own timer, empty, and
// looks like an idle stream. So while pulls end empty the source asks for the
// consumer's info (a cheap request): after an empty pull that ended at once,
// at the 3rd empty pull in a row and every 10th after it, and at the next
// one whenever the last info said messages were pending. Two infos in a row
// that say messages are pending, with no delivery between them, mean the
// consumer is stalled: the source subscribes again (a new pull consumer, a
// new inbox) and says so (consumer_stalled).
//
// Sans-IO: the source tells it what happened and asks what to do.
#pragma once

#include <cstdint>

namespace steadfast::secondary {

class stall_watch {
public:
    /// A pull brought messages: nothing is stalled.
    void delivered() noexcept {
        empty_ = 0;
        suspect_ = false;
    }
    /// A pull ended empty (`quick`: at once, not after its wait). Whether to
    /// ask for the consumer's info now.
    bool empty_pull(bool quick) noexcept {
        ++empty_;
        return quick || suspect_ || empty_ == 3 || empty_ % 10 == 0;
    }
    /// The consumer's info said `pending` messages wait for it. True: stalled
    /// (the second such info in a row with no delivery between them); the
    /// watch starts over, as for a new consumer.
    bool info(std::uint64_t pending) noexcept {
        if (pending == 0) {
            suspect_ = false;
            return false;
        }
        if (!suspect_) {
            suspect_ = true;
            return false;
        }
        ++stalls_;
        delivered();
        return true;
    }
    /// Empty pulls in a row.
    std::uint64_t empty_pulls() const noexcept { return empty_; }
    /// Stalls found since the source started.
    std::uint64_t stalls() const noexcept { return stalls_; }

private:
    std::uint64_t empty_ = 0, stalls_ = 0;
    bool suspect_ = false;  // the last info said messages were pending
};

}  // namespace steadfast::secondary
