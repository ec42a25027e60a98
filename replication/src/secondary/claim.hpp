// consumer_claim: one secondary a durable consumer. JetStream lets any
// number of clients pull from one durable consumer and splits its messages
// among them: two secondaries given the same --consumer would each see every
// other message, answer gaps, and ask for repairs of holes that are not
// there (issue 30 measured 75,000 redeliveries and nothing named). So each
// secondary answers, on a core NATS subject of its stream and consumer, with
// who it is; before it consumes, it asks. An answer from another process
// means the consumer is in use: it does not consume, and says whose it is.
// While it consumes it asks again every 10 s (two started at the same
// moment both pass the first question; then both see the other and stop).
#pragma once

#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace steadfast::secondary {

class consumer_claim {
public:
    consumer_claim(jetstream::client& js, const std::string& stream, const std::string& consumer);
    ~consumer_claim();

    /// Another process answering for the consumer ("" none): asks once,
    /// waiting at most `wait` (the client must be connected). Once one
    /// answered, in_use_by() names it for good.
    boost::asio::awaitable<std::string> other(std::chrono::milliseconds wait = std::chrono::milliseconds(500));
    const std::string& in_use_by() const noexcept { return other_; }
    /// Answers others' questions from now on (after a first other() found none).
    void answer();
    bool answering() const noexcept { return sub_ != nullptr; }
    /// Whether it is time to ask again (every 10 s), as of `now`.
    bool due(std::chrono::steady_clock::time_point now);
    const std::string& me() const noexcept { return me_; }
    const std::string& subject() const noexcept { return subject_; }

private:
    struct responder : jetstream::client::inbox_sink {
        consumer_claim* c = nullptr;
        void on_messages() override;
    };
    jetstream::client& js_;
    std::string subject_, me_;
    std::string other_;  // the first other process that answered
    responder responder_;
    std::unique_ptr<jetstream::client::inbox> sub_;
    std::chrono::steady_clock::time_point asked_{};
};

}  // namespace steadfast::secondary
