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
        [stream](const app::db_failure* err) {
            if (err) app::log(level::error, "ack_failed", {{"stream", stream}, {"error", err->what}});
        });
}

}  // namespace steadfast::primary
