// consumer_claim: one secondary a durable consumer. JetStream lets any
// number of clients pull from one durable consumer and splits its messages
// among them: two secondaries given the same --consumer would each see every
// other message, answer gaps, and ask for repairs of holes that are not
// there (issue 30 measured 75,000 redeliveries and nothing named). So each
// secondary answers, on a core NATS subject of its stream and consumer, with
// who it is and when it started; before it consumes, and every 10 s after,
// it asks (not answering itself meanwhile, so that "nobody" is answered at
// once by the server's no-responders). When two hear each other, the one
// that started first keeps the consumer; the other stops answering and
// consuming, and says whose the consumer is. So exactly one consumes, also
// when two start at the same moment or one was paused while another started.
#pragma once

#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace steadfast::secondary {

class consumer_claim {
public:
    consumer_claim(jetstream::client& js, const std::string& stream, const std::string& consumer);
    ~consumer_claim();

    /// Asks whether another process holds the consumer, waiting at most
    /// `wait` (the client must be connected), then answers others' questions
    /// again unless it lost. False: this one must not consume; in_use_by()
    /// names the other for good.
    boost::asio::awaitable<bool> keep(std::chrono::milliseconds wait = std::chrono::milliseconds(500));
    /// Another process holds the consumer ("" none): found by keep(), or
    /// told by a question of one that started first.
    const std::string& in_use_by() const noexcept { return other_; }
    /// Whether it is time to ask again (every 10 s; at once before the first).
    bool due(std::chrono::steady_clock::time_point now) const;
    const std::string& me() const noexcept { return me_; }
    const std::string& subject() const noexcept { return subject_; }

    /// Whether `a` (an identity as me() gives it) started before `b`: the
    /// earlier keeps the consumer (ties: the smaller identity).
    static bool first(const std::string& a, const std::string& b);

private:
    struct responder : jetstream::client::inbox_sink {
        consumer_claim* c = nullptr;
        void on_messages() override;
    };
    jetstream::client& js_;
    std::string subject_, me_;
    std::string other_;  // who holds the consumer, once this one lost it
    responder responder_;
    std::unique_ptr<jetstream::client::inbox> sub_;
    std::chrono::steady_clock::time_point asked_{};
    bool asked_once_ = false;
};

}  // namespace steadfast::secondary
