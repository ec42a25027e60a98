// http::client_pool: a bounded set of keep-alive clients to one server, shared
// by many senders on one executor. A sender takes a free client for one
// request; when all are busy it waits its turn (first come, first served), so
// concurrent senders never share a connection and never open more than `size`.
#pragma once

#include <steadfast/transport/client.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace steadfast::http {

class client_pool {
public:
    /// `size` clients (at least 1), each with options `o`, on executor `ex`.
    client_pool(boost::asio::any_io_executor ex, client::options o, std::size_t size);
    ~client_pool();
    client_pool(const client_pool&) = delete;
    client_pool& operator=(const client_pool&) = delete;

    /// Sends `req` on a free client (waiting for one if needed) and returns its
    /// outcome. Runs on the pool's executor. Cancellation: terminal (while
    /// waiting for a client, and during the send as client::send documents);
    /// a cancelled wait gives transport_error{operation_aborted}.
    boost::asio::awaitable<outcome> send(const request& req);

    std::size_t size() const noexcept { return clients_.size(); }
    /// Senders waiting for a client now.
    std::size_t waiting() const noexcept { return waiters_.size(); }
    /// TCP connections opened by all clients so far.
    std::uint64_t connections_opened() const noexcept;
    /// Closes every idle connection.
    void close_idle();
    /// Ends every send in flight (client::cancel()) and every one waiting
    /// for a client: each completes with transport_error{operation_aborted}.
    /// Sends after it work as usual. On the pool's executor.
    void cancel();

private:
    struct waiter;
    client* acquire_now();
    void release(client* c);

    boost::asio::any_io_executor ex_;
    std::vector<std::unique_ptr<client>> clients_;
    std::vector<client*> free_;
    std::deque<waiter*> waiters_;
    std::uint64_t cancels_ = 0;  // cancel()s so far: a waiter handed a client before one does not send
};

}  // namespace steadfast::http
