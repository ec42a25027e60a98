#include "acknowledger.hpp"

#include "../common/log.hpp"
#include "config.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <sqlite3.h>

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
    set_dirty(stream, m);
    m.retired = false;
    arm(10ms);
}

void acknowledger::arm(std::chrono::milliseconds delay) {
    if (scheduled_) return;
    scheduled_ = true;
    timer_.expires_after(delay);
    timer_.async_wait([this, alive = std::weak_ptr<acknowledger*>(life_)](const boost::system::error_code& ec) {
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
    mark& m = it->second;
    m.retired = true;
    if (m.dirty) {
        m.dirty = false;
        write({{stream, m.target, m.last, m.version, true}});
    }
    // Kept (held() still answers for it) until its last write is stored.
    if (m.stored >= m.version) marks_.erase(it);
}

std::uint64_t acknowledger::held(std::string_view stream) const {
    const auto it = marks_.find(stream);
    return it == marks_.end() ? 0 : it->second.target;
}

void acknowledger::flush() {
    for (auto& [name, m] : marks_)
        if (m.target > 0) set_dirty(name, m);
    write_dirty(true);  // the database thread finishes it before exit
}

void acknowledger::set_dirty(std::string_view stream, mark& m) {
    if (m.dirty) return;
    m.dirty = true;
    dirty_.emplace_back(stream);
}

// The marks that turned dirty since the last write, not every stream's:
// with 50,000 streams active, a look at each every 10 ms was most of the
// event loop's time.
void acknowledger::write_dirty(bool at_stop) {
    std::vector<write_one> dirty;
    for (const auto& name : dirty_) {
        auto it = marks_.find(name);
        if (it == marks_.end() || !it->second.dirty) continue;  // written by forget(), or gone since
        mark& m = it->second;
        m.dirty = false;
        dirty.push_back({it->first, m.target, m.last, m.version, m.retired});
    }
    dirty_.clear();
    // (In the streams' order, as the outbox's rows are.)
    std::sort(dirty.begin(), dirty.end(), [](const write_one& a, const write_one& b) { return a.stream < b.stream; });
    if (!dirty.empty()) write(std::move(dirty), at_stop);
}

void acknowledger::write(std::vector<write_one> marks, bool at_stop) {
    auto streams = std::make_shared<const std::vector<write_one>>(std::move(marks));
    worker_.post(
        [this, streams](app::database&) {
            const auto now = now_ms();
            for (const auto& w : *streams) out_.acknowledge(w.stream, w.target, w.last, now);
            return true;
        },
        // On the database thread or the flusher's, touching nothing of this
        // object's (it may be gone when this runs late): back to the event
        // loop, where it is asked whether it is still there.
        [streams, at_stop, ex = timer_.get_executor(), limiter = failures_logged_,
         alive = std::weak_ptr<acknowledger*>(life_)](const app::db_failure* err) {
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
                return;
            }
            // At most a line a second however many streams' marks fail (a
            // full disk fails them all, every 10 ms).
            if (err)
                app::log_limited(*limiter, level::error, "ack_failed",
                                 {{"stream", streams->front().stream},
                                  {"streams", streams->size()},
                                  {"error", err->what},
                                  {"note",
                                   "the outbox did not record what the secondary acknowledged (tried again each "
                                   "second; after a restart those messages are sent again and answered duplicate); "
                                   "at most one such line a second"}});
            // Not tried again: the database thread has stopped, or a flush
            // failed (every write fails until the process restarts).
            if (err && (err->code == boost::asio::error::shut_down ||
                        err->code == app::make_db_error_code(SQLITE_IOERR_FSYNC)))
                return;
            asio::post(ex, [streams, ok = err == nullptr, alive] {
                if (auto self = alive.lock()) (*self)->after_write(streams, ok);
            });
        });
}

void acknowledger::after_write(const writes& w, bool ok) {
    bool again = false;
    for (const auto& one : *w) {
        auto it = marks_.find(one.stream);
        if (it == marks_.end()) continue;  // stored since (a later write): nothing to do
        mark& m = it->second;
        if (ok) {
            m.stored = std::max(m.stored, one.version);
            // A retired mark, stored with nothing newer: done with.
            if (m.retired && !m.dirty && m.stored >= m.version) marks_.erase(it);
            continue;
        }
        // Written again, unless a newer state of it replaced this one (queued
        // or written after it, with a target at least as high).
        if (one.target > m.target || m.version == one.version) {
            m.target = std::max(m.target, one.target);
            set_dirty(one.stream, m);
            again = true;
        }
    }
    if (again) arm(retry_);
}

}  // namespace steadfast::primary
