#include "acknowledger.hpp"

#include "../common/log.hpp"
#include "config.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

void acknowledger::acknowledged(const std::string& stream, std::uint64_t upto) {
    auto& m = marks_[stream];
    m.target = std::max(m.target, upto);
    m.last = upto;
    m.dirty = true;
    if (scheduled_) return;
    scheduled_ = true;
    timer_.expires_after(10ms);
    timer_.async_wait([this, alive = std::weak_ptr<const int>(life_)](const boost::system::error_code& ec) {
        // Cancelled only by ~acknowledger; expired and queued when it went,
        // it finds `life_` gone. (A mark acknowledged after flush() is
        // written by this timer if the loop still runs; both stops run it
        // well past 10 ms.)
        if (ec || alive.expired()) return;
        scheduled_ = false;
        write_dirty();
    });
}

void acknowledger::forget(const std::string& stream) {
    auto it = marks_.find(stream);
    if (it == marks_.end()) return;
    if (it->second.dirty) write({{stream, it->second.target, it->second.last}});
    marks_.erase(it);
}

void acknowledger::flush() {
    for (auto& [name, m] : marks_)
        if (m.target > 0) m.dirty = true;
    write_dirty();  // the database thread finishes it before exit
}

void acknowledger::write_dirty() {
    std::vector<write_one> dirty;
    for (auto& [name, m] : marks_) {
        if (!m.dirty) continue;
        m.dirty = false;
        dirty.push_back({name, m.target, m.last});
    }
    if (!dirty.empty()) write(std::move(dirty));
}

void acknowledger::write(std::vector<write_one> marks) {
    auto streams = std::make_shared<std::vector<write_one>>(std::move(marks));
    worker_.post(
        [this, streams](app::database&) {
            const auto now = now_ms();
            for (const auto& w : *streams) out_.acknowledge(w.stream, w.target, w.last, now);
            return true;
        },
        [this, streams](const app::db_failure* err) {
            if (!err) return;
            for (const auto& w : *streams) failed(w.stream, err->what);
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
