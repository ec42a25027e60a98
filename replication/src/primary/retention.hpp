// What is kept after delivery: acknowledged messages stay in the outbox for
// the configured retention (a rewind resends from them), then are purged,
// now and then, on the database thread; and the memory that retired streams
// freed is given back to the system (glibc keeps freed memory in its arenas
// otherwise).
#pragma once

#include <common/db_worker.hpp>
#include <primary/outbox.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>

namespace steadfast::primary {

class retention {
public:
    retention(boost::asio::any_io_executor ex, outbox& out, app::db_worker& worker, std::chrono::milliseconds retain)
        : out_(out), worker_(worker), retain_(retain), timer_(std::move(ex)) {}
    /// Purges every retain/4 (100 ms to 10 s) until stop().
    void start();
    void stop() {
        stopped_ = true;
        timer_.cancel();
    }
    /// A stream retired (its memory is freed).
    void retired() noexcept { ++retired_; }

private:
    void purge();

    outbox& out_;
    app::db_worker& worker_;
    std::chrono::milliseconds retain_;
    boost::asio::steady_timer timer_;
    std::size_t retired_ = 0;  // since the allocator was last trimmed
    bool stopped_ = false;
};

}  // namespace steadfast::primary
