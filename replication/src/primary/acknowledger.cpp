#include "acknowledger.hpp"

#include "../common/log.hpp"
#include "config.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

void acknowledger::acknowledged(const std::string& stream, std::uint64_t upto) {
    auto& m = marks_[stream];
    m.target = std::max(m.target, upto);
    m.last = upto;
    m.version = ++versions_;
    m.dirty = true;
    m.retired = false;
    arm(10ms);
}

void acknowledger::arm(std::chrono::milliseconds delay) {
    if (scheduled_) return;
    scheduled_ = true;
    timer_.expires_after(delay);
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
    const mark& m = it->second;
    if (m.dirty) write({{stream, m.target, m.last, m.version, true}});
    marks_.erase(it);
}

void acknowledger::flush() {
    for (auto& [name, m] : marks_)
        if (m.target > 0) m.dirty = true;
    write_dirty(true);  // the database thread finishes it before exit
}

void acknowledger::write_dirty(bool at_stop) {
    std::vector<write_one> dirty;
    for (auto& [name, m] : marks_) {
        if (!m.dirty) continue;
        m.dirty = false;
        dirty.push_back({name, m.target, m.last, m.version, m.retired});
    }
    if (!dirty.empty()) write(std::move(dirty), at_stop);
}

void acknowledger::write(std::vector<write_one> marks, bool at_stop) {
    auto streams = std::make_shared<const std::vector<write_one>>(std::move(marks));
    const bool any_retired =
        std::any_of(streams->begin(), streams->end(), [](const write_one& w) { return w.retired; });
    worker_.post(
        [this, streams](app::database&) {
            const auto now = now_ms();
            for (const auto& w : *streams) out_.acknowledge(w.stream, w.target, w.last, now);
            return true;
        },
        // On the database thread or the flusher's: back to the event loop
        // when there is something to do there (a failure, a retired mark).
        [this, streams, any_retired, at_stop, alive = std::weak_ptr<const int>(life_)](const app::db_failure* err) {
            if (err && at_stop) {
                // The last try: said whatever the one-line-a-second limit
                // (a status read after the stop counts these as pending).
                app::log(level::error, "ack_failed",
                         {{"streams", streams->size()},
                          {"error", err->what},
                          {"at_stop", true},
                          {"note",
                           "the outbox did not record what the secondary acknowledged on these streams; after the "
                           "restart those messages are sent again and answered duplicate"}});
            } else if (err) {
                for (const auto& w : *streams) failed(w.stream, err->what);
            }
            if (!err && !any_retired) return;
            asio::post(timer_.get_executor(), [this, streams, ok = err == nullptr, alive] {
                if (!alive.expired()) after_write(streams, ok);
            });
        });
}

void acknowledger::after_write(const writes& w, bool ok) {
    bool again = false;
    for (const auto& one : *w) {
        if (ok) {
            // Stored: a retired mark with nothing newer is done with.
            auto it = marks_.find(one.stream);
            if (it != marks_.end() && it->second.retired && it->second.version == one.version && !it->second.dirty)
                marks_.erase(it);
            continue;
        }
        auto [it, added] = marks_.try_emplace(one.stream);
        mark& m = it->second;
        if (added) {  // retired before its write failed: kept until stored
            m.last = one.last;
            m.version = one.version;
            m.retired = true;
        }
        // Written again, unless a newer state of it replaced this one (queued
        // or written after it, with a target at least as high).
        if (one.target > m.target || m.version == one.version) {
            m.target = std::max(m.target, one.target);
            m.dirty = true;
            again = true;
        }
    }
    if (again) arm(retry_);
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
