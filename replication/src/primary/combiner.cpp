#include "combiner.hpp"

#include "decide.hpp"

#include <steadfast/replication/envelope.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

namespace asio = boost::asio;

namespace steadfast::primary {

struct combiner::part {
    std::string_view stream, list, key;  // the sender's, alive until its send returns
    std::size_t count = 0;
    bool alone = false;                               // a 400, 413 or 422 of a shared request: by itself next time
    bool queued = false;                              // in queue_ (not taken by a sender yet)
    bool abandoned = false;                           // its send returned (stop): never read again
    std::chrono::steady_clock::time_point queued_at;  // when it last joined the queue
    std::optional<http::outcome> result;
    std::shared_ptr<flag> done;
};

combiner::combiner(asio::any_io_executor ex, http::client_pool& pool, limits l, request_maker make, cond stop)
    : ex_(std::move(ex)),
      pool_(pool),
      limits_(l),
      make_(std::move(make)),
      stop_(std::move(stop)),
      go_now_(make_flag(ex_, "linger-go")),
      patience_timer_(ex_) {
    stop_->subscribe(stop_sub_, [this](bool v) {
        if (!v) return;
        pool_.cancel();
        disarm_patience();
    });
}

asio::awaitable<http::outcome> combiner::send(std::string_view stream, std::string_view list, std::size_t count,
                                              std::string_view key) {
    // Stopped already: nothing goes (the stop's cancel of the pool came before).
    if (stop_.value()) co_return http::outcome{http::transport_error{asio::error::operation_aborted}};
    const bool shares = proven_.find(stream) != proven_.end();
    const bool lingers = shares && shared_last_ && limits_.linger.count() > 0;
    if (queue_.empty() && senders_ < pool_.size() && (senders_ == 0 || !shares) && !lingers) {
        // By itself, at once, from here: nothing is in flight, or the stream
        // has yet to prove itself (judge()). Never ahead of queued parts.
        ++senders_;
        struct release {  // the slot goes back whatever happens
            combiner* c;
            ~release() {
                --c->senders_;
                c->kick(false);  // what queued meanwhile: a sender takes it
            }
        } slot{this};
        const http::request req = make_(envelope::encode_body({list}, count), std::string(key));
        ++requests_;
        const auto t0 = std::chrono::steady_clock::now();
        auto out = co_await pool_.send(req);
        const auto took = std::chrono::steady_clock::now() - t0;
        judge(stream, out, took);
        timed(out, took);
        co_return out;
    }
    auto p = std::make_shared<part>();
    p->stream = stream;
    p->list = list;
    p->key = key;
    p->count = count;
    p->alone = !shares;
    p->done = make_flag(ex_, "sent");
    enqueue(p, false);
    // However this ends (an answer, stop, cancellation, an exception, the
    // frame destroyed at shutdown), a part that has no answer is taken out:
    // its strings are about to go.
    struct leave {
        combiner* c;
        part_ptr p;
        ~leave() {
            if (p->result) return;
            p->abandoned = true;
            if (p->queued) {
                c->dequeued(*p);
                c->queue_.erase(std::find(c->queue_.begin(), c->queue_.end(), p));
                if (c->queue_.empty()) c->disarm_patience();
            }
        }
    } on_leave{this, p};
    kick(false);
    // (What a wait of `patience` starts is the queue's timer's to do, not
    // each waiting send's: check_patience().)
    while (!p->result && !stop_.value()) {
        // Named: g++ 12 mishandles non-trivial temporaries in a co_await expression.
        const cond woken = cond(p->done) || stop_;
        auto [ec] = co_await woken->async_wait_until(true, asio::as_tuple(asio::use_awaitable));
        if (ec) break;  // cancelled
    }
    if (p->result) co_return std::move(*p->result);
    co_return http::outcome{http::transport_error{asio::error::operation_aborted}};
}

// A stream shares requests once a request of its own went through healthily
// (a 2xx, not slow()), and stops sharing when one it took part in failed or
// was slow, until it has proved itself again by itself: so a stream that the
// secondary refuses or answers slowly (as a fake or a proxy in front of it may
// do for some streams) holds up the others only in the shared request where
// it showed itself.
void combiner::judge(std::string_view stream, const http::outcome& out, std::chrono::steady_clock::duration took,
                     bool resent) {
    const bool healthy = !resent && out.has_response() && out.res().status / 100 == 2 && took < slow();
    if (healthy) {
        if (proven_.find(stream) == proven_.end()) proven_.emplace(stream);
    } else if (auto it = proven_.find(stream); it != proven_.end()) {
        proven_.erase(it);
    }
}

// Slow: past four times the typical answered request, and never under
// limits.slow. A stream the secondary (or something in front of it) answers
// slowly is caught even when every request is fast, and a secondary that is
// slow for everyone does not switch sharing off for good.
std::chrono::steady_clock::duration combiner::slow() const {
    return std::max<std::chrono::steady_clock::duration>(limits_.slow, 4 * typical_);
}

void combiner::timed(const http::outcome& out, std::chrono::steady_clock::duration took) {
    if (!out.has_response() || out.res().status / 100 != 2) return;
    typical_ = typical_ == std::chrono::steady_clock::duration{} ? took : typical_ + (took - typical_) / 16;
}

void combiner::forget(std::string_view stream) {
    if (auto it = proven_.find(stream); it != proven_.end()) proven_.erase(it);
}

void combiner::enqueue(const part_ptr& p, bool front) {
    p->queued = true;
    p->queued_at = std::chrono::steady_clock::now();
    if (!patience_armed_) arm_patience(p->queued_at + limits_.patience);
    queued_bytes_ += p->list.size() + 1;
    queued_messages_ += p->count;
    if (p->alone) ++queued_alone_;
    if (front || p->alone || full()) go_now_->set();  // no linger for it (linger())
    if (front)
        queue_.push_front(p);
    else
        queue_.push_back(p);
}

void combiner::dequeued(part& p) {
    p.queued = false;
    queued_bytes_ -= p.list.size() + 1;
    queued_messages_ -= p.count;
    if (p.alone) --queued_alone_;
}

// Starts a sender if the queue has work that no running sender is about to
// take: when none runs, when the queue holds a full request, when a part
// must go by itself, or when a send has waited a whole `patience`
// (`waited`); never more requests in flight than the pool's connections.
void combiner::kick(bool waited) {
    if (queue_.empty() || senders_ >= pool_.size() || stop_.value()) return;
    if (runners_ > 0 && !full() && !waited && queued_alone_ == 0) return;
    ++senders_;
    ++runners_;
    asio::co_spawn(ex_, sender(waited), [this](std::exception_ptr) {
        --runners_;
        --senders_;
        kick(false);
    });
}

// A send that has waited a whole `patience` in the queue means the requests
// in flight are slow: another one may start (kick(true)), and again each
// `patience` while it waits. One timer serves the whole queue, armed for the
// moment the part queued longest has waited that long: thousands of sends
// waiting (thousands of new streams, each going by itself) cost one wake-up
// a `patience`, not one each.
void combiner::arm_patience(std::chrono::steady_clock::time_point at) {
    patience_armed_ = true;
    patience_timer_.expires_at(at);
    patience_timer_.async_wait([this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;
        check_patience();
    });
}

// Nothing waits any more (or a stop): the timer does not keep the loop busy.
void combiner::disarm_patience() {
    if (!patience_armed_) return;
    patience_armed_ = false;
    patience_timer_.cancel();
}

void combiner::check_patience() {
    patience_armed_ = false;
    ++patience_checks_;
    if (queue_.empty() || stop_.value()) return;
    const auto now = std::chrono::steady_clock::now();
    auto oldest = std::chrono::steady_clock::time_point::max();
    for (const auto& p : queue_) {
        if (now - p->queued_at >= limits_.patience) {
            kick(true);  // (may take from the queue at once: nothing of it is read after)
            if (!queue_.empty() && !patience_armed_) arm_patience(now + limits_.patience);
            return;
        }
        oldest = std::min(oldest, p->queued_at);
    }
    arm_patience(oldest + limits_.patience);
}

// The queue holds a request's worth (what one request may carry at most).
bool combiner::full() const {
    return queued_bytes_ + envelope::batch_prefix.size() + envelope::batch_suffix.size() >= limits_.body_bytes ||
           queued_messages_ >= limits_.messages;
}

// Before a sender takes the queue: while streams share requests, up to
// `linger` for more parts to join. What must not wait ends it, before or
// during the wait (enqueue() says so through `go_now_`): a full queue, a part
// that must go alone, parts sent again after another stream's 409, a stop.
// A sender started because a send waited `patience` (`at_once`) never waits.
asio::awaitable<void> combiner::linger(bool at_once) {
    const bool go = at_once || go_now_->value() || limits_.linger.count() <= 0 || !shared_last_ || full() ||
                    queued_alone_ > 0;  // (one left behind by the last take())
    go_now_->clear();
    if (go) co_return;
    // Named: g++ 12 mishandles non-trivial temporaries in a co_await expression.
    const cond woken =
        stop_ || cond(go_now_) || cond(make_deadline(ex_, "linger", std::chrono::steady_clock::now() + limits_.linger));
    co_await woken->async_wait_until(true, asio::as_tuple(asio::use_awaitable));
    go_now_->clear();
}

// The parts of the next request: from the front of the queue, within the
// limits (the first always: it fits alone); a part to be sent alone goes by
// itself.
std::deque<combiner::part_ptr> combiner::take() {
    std::deque<part_ptr> group;
    std::size_t bytes = envelope::batch_prefix.size() + envelope::batch_suffix.size(), messages = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
        part& p = **it;
        const bool fits =
            group.empty() || (!p.alone && !group.front()->alone && bytes + p.list.size() + 1 <= limits_.body_bytes &&
                              messages + p.count <= limits_.messages);
        if (!fits) {
            if (group.front()->alone) break;
            ++it;  // a later, smaller part may still fit
            continue;
        }
        bytes += p.list.size() + 1;
        messages += p.count;
        dequeued(p);
        group.push_back(std::move(*it));
        it = queue_.erase(it);
    }
    if (queue_.empty()) disarm_patience();
    return group;
}

// The key of a shared request: the first part's, the number of parts and a
// hash of all their keys, so that two requests with other parts never share
// a key.
std::string combiner::shared_key(const std::deque<part_ptr>& group) {
    std::string key(group.front()->key);
    if (group.size() == 1) return key;
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a over the keys, each followed by a 0 byte
    for (const auto& p : group) {
        for (unsigned char c : p->key) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0u) * 1099511628211ull;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return key + "+" + std::to_string(group.size() - 1) + "." + hex;
}

asio::awaitable<void> combiner::sender(bool at_once) {
    for (bool first = true; !queue_.empty() && !stop_.value(); first = false) {
        co_await linger(at_once && first);
        if (queue_.empty() || stop_.value()) break;  // (another sender took a full queue meanwhile)
        auto group = take();
        shared_last_ = group.size() > 1;
        try {
            co_await send_group(group);
        } catch (const std::exception&) {
            // (Out of memory.) Its parts are not left waiting for good.
            for (auto& p : group)
                if (!p->abandoned && !p->result && !p->queued) {
                    // (Phase write, nothing sent: as the client says of a
                    // request it could not send; the log reads "write:".)
                    p->result = http::outcome{http::transport_error{asio::error::no_memory, http::phase::write}};
                    p->done->set();
                }
        }
    }
}

// One request for `group`, and each part's share of the answer.
asio::awaitable<void> combiner::send_group(std::deque<part_ptr>& group) {
    // The streams are copied: a part's own strings may go (its send
    // abandoned at a stop) while the request is in flight.
    std::vector<std::string_view> lists;
    std::vector<std::string> names;
    std::size_t count = 0;
    for (const auto& p : group) {
        lists.push_back(p->list);
        names.emplace_back(p->stream);
        count += p->count;
    }
    // Another sender, if what is left needs one (a part to go alone).
    kick(false);
    const http::request req = make_(envelope::encode_body(lists, count), shared_key(group));
    ++requests_;
    const auto t0 = std::chrono::steady_clock::now();
    const http::outcome out = co_await pool_.send(req);
    const auto took = std::chrono::steady_clock::now() - t0;
    const bool answered = out.has_response();
    const std::vector<std::string_view> streams(names.begin(), names.end());
    const auto fates = split_answer(streams, answered, answered ? out.res().status : 0,
                                    answered ? std::string_view(out.res().body) : std::string_view{});
    // Streams whose own answer this is are judged by it; so are those
    // sent alone after a 400, 413 or 422 (it may be theirs). Those sent
    // again because of another stream's 409 are not.
    for (std::size_t i = 0; i < group.size(); ++i)
        if (fates[i] != part_fate::resend) judge(names[i], out, took, fates[i] == part_fate::resend_alone);
    timed(out, took);
    // Parts sent again go back to the front, in their order, before
    // anything queued meanwhile.
    for (std::size_t i = group.size(); i-- > 0;) {
        auto& p = group[i];
        if (p->abandoned) continue;
        if (fates[i] == part_fate::answer) {
            if (answered && group.size() > 1 && out.res().status / 100 == 2) {
                http::response r;  // its status and headers: decide() reads no 2xx body
                r.status = out.res().status;
                r.headers = out.res().headers;
                p->result = http::outcome{std::move(r)};
            } else {
                p->result = out;
            }
            p->done->set();
            continue;
        }
        p->alone = p->alone || fates[i] == part_fate::resend_alone;
        enqueue(p, true);
    }
}

}  // namespace steadfast::primary
