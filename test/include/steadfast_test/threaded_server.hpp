// An http::server on loopback with its own io_context and thread, for tests:
// listening (on `port`, or any free one) and serving once constructed, shut
// down and joined when destroyed. A test's stand-in whose routes use its own
// state holds one as its last member, so that the server stops first.
#pragma once

#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

namespace steadfast_test {

struct threaded_server {
    boost::asio::io_context ioc;
    std::optional<steadfast::http::server> srv;
    std::uint16_t port = 0;
    std::thread th;

    explicit threaded_server(steadfast::http::router r, steadfast::http::server::options o = {}, std::uint16_t at = 0) {
        srv.emplace(ioc.get_executor(), std::move(r), std::move(o));
        port = srv->listen("127.0.0.1", at).port();
        srv->start();
        th = std::thread([this] { ioc.run(); });
    }
    threaded_server(const threaded_server&) = delete;
    threaded_server& operator=(const threaded_server&) = delete;
    /// Shuts the server down (its connections closed) and joins its thread; once.
    void shutdown_and_join() {
        if (!th.joinable()) return;
        boost::asio::co_spawn(ioc, srv->shutdown(), [this](std::exception_ptr) { ioc.stop(); });
        th.join();
    }
    ~threaded_server() { shutdown_and_join(); }
};

}  // namespace steadfast_test
