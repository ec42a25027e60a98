#include <steadfast/transport/pool.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace steadfast::http {

namespace asio = boost::asio;

// A sender waiting for a client: release() hands it one and cancels its timer.
// Its frame may be destroyed while it waits (its io_context shutting down):
// then it leaves the queue, and gives back a client it was handed but never used.
struct client_pool::waiter {
    client_pool& pool;
    asio::steady_timer timer;
    client* granted = nullptr;
    bool used = false;

    ~waiter() {
        if (auto it = std::find(pool.waiters_.begin(), pool.waiters_.end(), this); it != pool.waiters_.end())
            pool.waiters_.erase(it);
        else if (granted && !used)
            pool.release(granted);
    }
};

client_pool::client_pool(asio::any_io_executor ex, client::options o, std::size_t size) : ex_(std::move(ex)) {
    size = std::max<std::size_t>(size, 1);
    clients_.reserve(size);
    for (std::size_t i = 0; i < size; ++i) {
        clients_.push_back(std::make_unique<client>(ex_, o));
        free_.push_back(clients_.back().get());
    }
}

client_pool::~client_pool() = default;

std::uint64_t client_pool::connections_opened() const noexcept {
    std::uint64_t n = 0;
    for (const auto& c : clients_) n += c->connections_opened();
    return n;
}

void client_pool::close_idle() {
    for (auto* c : free_) c->close();
}

void client_pool::cancel() {
    ++cancels_;  // (a waiter already handed a client, not yet resumed, sees it)
    // Out of the queue first: a client given back meanwhile must not go to
    // a sender that was told to end.
    std::deque<waiter*> told;
    told.swap(waiters_);
    for (waiter* w : told) w->timer.cancel();
    for (const auto& c : clients_) c->cancel();  // (nothing for an idle one)
}

client* client_pool::acquire_now() {
    if (free_.empty()) return nullptr;
    client* c = free_.back();  // the most recently used: its connection is the warmest
    free_.pop_back();
    return c;
}

void client_pool::release(client* c) {
    if (!waiters_.empty()) {
        waiter* w = waiters_.front();
        waiters_.pop_front();
        w->granted = c;
        w->timer.cancel();
        return;
    }
    free_.push_back(c);
}

asio::awaitable<outcome> client_pool::send(const request& req) {
    client* c = acquire_now();
    if (!c) {
        waiter w{*this, asio::steady_timer(ex_, asio::steady_timer::time_point::max())};
        waiters_.push_back(&w);
        const std::uint64_t cancels = cancels_;
        co_await w.timer.async_wait(asio::as_tuple(asio::use_awaitable));
        // Cancelled while waiting (its own cancellation, or the pool's, even
        // after a client was handed to it): w leaves the queue, and gives
        // back a client it was handed, as it goes.
        if (!w.granted || cancels_ != cancels)
            co_return outcome{transport_error{asio::error::operation_aborted, phase::connect, false, {}}};
        w.used = true;
        c = w.granted;
    }
    // Given back however the send ends (also when the coroutine is destroyed).
    struct giver {
        client_pool* pool;
        client* c;
        ~giver() { pool->release(c); }
    } give{this, c};
    co_return co_await c->send(req);
}

}  // namespace steadfast::http
