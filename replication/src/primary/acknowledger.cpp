#include "acknowledger.hpp"

#include "../common/log.hpp"
#include "config.hpp"

#include <boost/asio/steady_timer.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

void acknowledger::acknowledged(const std::string& stream, std::uint64_t upto) {
    auto& t = marks_[stream];
    if (!t) t = std::make_shared<mark>();
    if (upto > t->target.load(std::memory_order_relaxed)) t->target.store(upto, std::memory_order_relaxed);
    t->last.store(upto, std::memory_order_relaxed);
    schedule(stream, t);
}

void acknowledger::forget(const std::string& stream) {
    auto t = marks_.find(stream);
    if (t == marks_.end()) return;
    if (!t->second->scheduled) write(stream, t->second);
    marks_.erase(t);
}

void acknowledger::flush() {
    for (auto& [name, t] : marks_)
        if (t->target.load() > 0) write(name, t);  // the database thread finishes it before exit
}

void acknowledger::schedule(const std::string& stream, const std::shared_ptr<mark>& t) {
    if (t->scheduled) return;
    t->scheduled = true;
    auto timer = std::make_shared<asio::steady_timer>(ex_, 10ms);
    timer->async_wait([this, stream, t, timer](const boost::system::error_code&) {
        t->scheduled = false;
        write(stream, t);  // also when forget() has dropped the stream meanwhile
    });
}

void acknowledger::write(const std::string& stream, const std::shared_ptr<mark>& t) {
    worker_.post(
        [this, stream, t](app::database&) {
            out_.acknowledge(stream, t->target.load(std::memory_order_relaxed), t->last.load(std::memory_order_relaxed),
                             now_ms());
            return true;
        },
        [this, stream](const app::db_failure* err) {
            if (err) failed(stream, err->what);
        });
}

// On the database thread or the flusher's: at most one line a second
// however many streams' marks fail (a full disk fails them all, every 10 ms).
void acknowledger::failed(const std::string& stream, const std::string& error) {
    const auto held = failures_logged_.allow();
    if (!held) return;
    app::log(level::error, "ack_failed",
             {{"stream", stream},
              {"error", error},
              {"also_failed_since_last_line", *held},
              {"note",
               "the outbox did not record what the secondary acknowledged (after a restart those messages are "
               "sent again and answered duplicate); at most one such line a second"}});
}

}  // namespace steadfast::primary
