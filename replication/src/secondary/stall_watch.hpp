// When the secondary's JetStream consumer is stalled: the server drops its
// pulls without a word.
//
// nats-server answers a pull it holds with messages, or with a status when
// the pull expires (408), is ended (409) or finds nothing (404). A pull it
// drops (no interest in its reply inbox as the server sees it, a request that
// expired before the consumer took it, a consumer with no leader or that does
// not exist) ends on the client's own timer, empty, and looks like an idle
// stream. (nats-server 2.9 also drops, now and then, a pull whose expiry
// meets a message arriving: the message goes to the next pull, which is
// answered, so that alone never makes three in a row.) So the source tells this watch how each pull
// ended: `unanswered_in_a_row` pulls in a row that the server never answered,
// on one connection, are a stall; the source then subscribes again (a new pull
// consumer, a new inbox) and says so (consumer_stalled). Each stall takes
// that many pulls to find (about 9 s: a pull waits 1 s, then 2 s more for
// its answer), so a consumer that stays stalled is subscribed again at most
// that often; `in_a_row` says how many stalls came with no answered pull
// between them.
//
// Sans-IO: the source tells it what happened and asks what it means.
#pragma once

#include <cstdint>

namespace steadfast::secondary {

class stall_watch {
public:
    static constexpr std::uint64_t unanswered_in_a_row = 3;

    /// The server answered a pull (messages or a status): pulls are heard.
    void answered() noexcept {
        unanswered_ = 0;
        in_a_row_ = 0;
    }
    /// A pull the server never answered. True: stalled (the
    /// unanswered_in_a_row-th in a row); the count starts over.
    bool unanswered() noexcept {
        if (++unanswered_ < unanswered_in_a_row) return false;
        unanswered_ = 0;
        ++stalls_;
        ++in_a_row_;
        return true;
    }
    /// A new consumer (subscribed again, created again): its pulls start a
    /// count of their own.
    void new_consumer() noexcept { unanswered_ = 0; }

    /// Stalls found since the source started.
    std::uint64_t stalls() const noexcept { return stalls_; }
    /// Stalls with no answered pull between them (0: not stalled now).
    std::uint64_t in_a_row() const noexcept { return in_a_row_; }

private:
    std::uint64_t unanswered_ = 0, stalls_ = 0, in_a_row_ = 0;
};

}  // namespace steadfast::secondary
