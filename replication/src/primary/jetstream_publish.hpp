// What the JetStream link and its repairs share: one publish as an engine
// attempt, and how a failure reads in the log.
#pragma once

#include <steadfast/engine.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <string>

namespace steadfast::primary {

namespace asio = boost::asio;

// What failed, for the log: the error, and the API's own words when it said any.
inline std::string describe(const boost::system::error_code& ec, const std::string& api) {
    return api.empty() ? ec.message() : ec.message() + ": " + api;
}

// Whether a failure is the link's (no server, no leader, timeouts) rather
// than a refusal.
inline bool unavailable(const boost::system::error_code& ec) {
    return ec == make_error_code(error::attempt_timeout) ||
           jetstream::classify(ec).kind == steadfast::verdict::retryable;
}

// One publish as an engine attempt: its ack, or the error (and the API's own
// words in `api_said`). The referenced values outlive the retry around it.
inline auto publish_attempt(jetstream::client& js, const std::string& subject, const std::string& body,
                            const jetstream::publish_options& po, std::string& api_said) {
    auto attempt = [&js, &subject, &body, &po,
                    &api_said](const attempt_context&) -> asio::awaitable<boost::system::result<jetstream::pub_ack>> {
        std::string s = subject, b = body;  // named: g++ 12 and temporaries in co_await
        auto [ec, ack, err] =
            co_await jetstream::async_publish(js, std::move(s), std::move(b), po, asio::as_tuple(asio::use_awaitable));
        if (ec) {
            api_said = err.description;
            co_return ec;
        }
        co_return ack;
    };
    return classified(std::move(attempt), jetstream::classifier{});
}

}  // namespace steadfast::primary
