// leader_watch: the JetStream stream's new leaders, as the cluster announces
// them. nats-server publishes each election of a stream's leader on the
// account's $JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>; what was sent
// to the old leader (killed, or stepping down) is never answered, and the
// primary sends it again at once rather than waiting out --attempt-timeout
// (jetstream_link.cpp). Anyone on the account may publish to that subject,
// so a message that is not the stream's advisory is ignored, and a burst
// acts once, at most once a second (one that comes sooner waits for its
// second): a flood cannot keep throwing requests away.
#pragma once

#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace steadfast::primary {

class leader_watch : jetstream::client::inbox_sink {
public:
    /// Called on the executor with the new leader's name ("" unknown).
    using handler = std::function<void(const std::string& leader)>;
    leader_watch(jetstream::client& js, boost::asio::any_io_executor ex, std::string stream, handler h);
    ~leader_watch() override;
    leader_watch(const leader_watch&) = delete;
    leader_watch& operator=(const leader_watch&) = delete;
    /// Stops listening (before the client goes).
    void close();

    /// The leader `data` announces, if it is `stream`'s leader-elected
    /// advisory (nullopt: something else, ignored).
    static std::optional<std::string> parse(std::string_view data, std::string_view stream);
    /// Whether the client's last error says that the account may not
    /// subscribe to the advisories (then failover waits out the attempt
    /// timeout): to be said once.
    static bool refused(std::string_view last_error);

private:
    void on_messages() override;
    void act();

    std::string stream_;
    handler h_;
    std::unique_ptr<jetstream::client::inbox> sub_;
    boost::asio::steady_timer timer_;  // a deferred action
    std::chrono::steady_clock::time_point acted_{};
    bool deferred_ = false;
    std::string leader_;                                          // the latest announced
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once closed
};

}  // namespace steadfast::primary
