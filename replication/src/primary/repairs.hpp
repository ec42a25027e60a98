// log_repairs: a secondary that finds a hole in the JetStream log (messages
// the log lost; its later ones are there) asks the primary, on
// envelope::repair_subject(), to resend it. Carried out apart from the
// stream's processor: the copy goes from the outbox's retention to the
// subject `<prefix>.$repair.<stream>` (no stream name can make it: `$` is
// not allowed in one), without an expected sequence, so the stream's own
// subject (its order, its last message, what a restart reads) is untouched.
// Bounded, since anyone on the account may ask: one repair per stream every
// 10 s (the same range again only after 2 minutes), 10 begun a second, 4 at
// once, 10,000 messages a request, refusals logged at most once a second;
// the secondary asks again while its gap lasts.
#pragma once

#include "link.hpp"

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace steadfast::primary {

class log_repairs : jetstream::client::inbox_sink {
public:
    /// Listens at once. `env`, `host` and `js` outlive it.
    log_repairs(const link_env& env, link_host& host, jetstream::client& js);
    ~log_repairs() override;
    log_repairs(const log_repairs&) = delete;
    log_repairs& operator=(const log_repairs&) = delete;
    /// Stops listening (repairs under way end with the primary's stop).
    void close() { sub_.reset(); }

private:
    void on_messages() override;
    void requested(const std::string& body);
    boost::asio::awaitable<void> repair(envelope::repair_request r);
    void log_refusal(const char* event, nlohmann::json fields);

    const link_env& env_;
    link_host& host_;
    jetstream::client& js_;
    std::unique_ptr<jetstream::client::inbox> sub_;
    struct last_repair {
        std::chrono::steady_clock::time_point at;
        std::uint64_t from = 0;
    };
    std::map<std::string, last_repair> repair_at_;  // the last repair per stream, kept 2 minutes
    int repairs_running_ = 0;
    std::uint64_t repair_counter_ = 0;
    // At most 10 repairs begin a second; refusals are logged at most once a second.
    std::chrono::steady_clock::time_point repair_window_{}, repair_log_at_{};
    unsigned repairs_in_window_ = 0;
    std::uint64_t repair_log_suppressed_ = 0;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once gone (a queued turn checks)
};

}  // namespace steadfast::primary
