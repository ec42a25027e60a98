#include "publish_batcher.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace steadfast::primary {

// A group's publishes. `items`, `claims` and `taken` are shared with the
// database thread (under `m` until it is taken; after that only the database
// thread writes, and the loop reads once the answer comes); `handlers` are
// the loop's alone.
struct publish_batcher::group {
    std::mutex m;
    bool taken = false;  // the database thread has it (or its answer is decided): nothing joins any more
    std::int64_t at_ms = 0;
    std::vector<std::pair<std::string, std::string>> items;  // stream, payload
    std::vector<claim_fn> claims;                            // one per item, empty: always wanted
    // The database thread's, once committed: each wanted item's message, in
    // item order, and (when some publish has a claim) which items were
    // wanted; empty: all.
    std::vector<published> stored;
    std::vector<bool> wanted;
    std::vector<handler> handlers;  // the loop's: one per item

    // Stores the wanted items (on the database thread, the group taken).
    void store(outbox& out) {
        if (std::any_of(claims.begin(), claims.end(), [](const claim_fn& c) { return static_cast<bool>(c); })) {
            wanted.resize(items.size());
            for (std::size_t i = 0; i < items.size(); ++i) wanted[i] = !claims[i] || claims[i]();
        }
        if (std::find(wanted.begin(), wanted.end(), false) == wanted.end()) {
            stored = out.publish(items, at_ms, true);
            return;
        }
        std::vector<std::pair<std::string, std::string>> some;  // (a withdrawn publish: rare, copied)
        for (std::size_t i = 0; i < items.size(); ++i)
            if (wanted[i]) some.push_back(items[i]);
        if (!some.empty()) stored = out.publish(some, at_ms, true);
    }
    std::size_t wanted_count() const {
        return wanted.empty() ? items.size() : static_cast<std::size_t>(std::count(wanted.begin(), wanted.end(), true));
    }
};

void publish_batcher::add(std::string stream, std::string payload, std::int64_t at_ms, claim_fn claim, handler done) {
    ++publishes_;
    auto join = [&](group& g) {
        g.items.emplace_back(std::move(stream), std::move(payload));
        g.claims.push_back(std::move(claim));
        g.handlers.push_back(std::move(done));
    };
    if (open_) {
        std::lock_guard l(open_->m);
        if (!open_->taken) return join(*open_);
    }
    auto g = std::make_shared<group>();
    g->at_ms = at_ms;
    join(*g);
    open_ = g;
    ++groups_;
    submit(g);
}

void publish_batcher::submit(const std::shared_ptr<group>& g) {
    auto close = [](group& taken) {
        std::lock_guard l(taken.m);
        taken.taken = true;
    };
    worker_.post(
        [&out = out_, g, close](app::database&) {
            close(*g);
            g->store(out);
            return true;
        },
        // On the database thread or the flusher's (or, the worker stopped,
        // here): one hand-off to the loop for the whole group.
        [this, g, close](const app::db_failure* f) {
            close(*g);  // a job never run (a failed flush before it) takes no more publishes either
            std::optional<app::db_failure> failure;
            if (f)
                failure = *f;
            else if (g->stored.size() != g->wanted_count())
                failure = app::db_failure{app::make_db_error_code(app::db_job_threw),
                                          "the outbox stored " + std::to_string(g->stored.size()) + " of " +
                                              std::to_string(g->wanted_count()) + " messages"};
            boost::asio::post(ex_, [this, g, failure = std::move(failure)]() mutable { answer(*g, failure); });
        });
}

void publish_batcher::answer(group& g, const std::optional<app::db_failure>& failure) {
    // Answered: the group no longer holds its payloads (nor its claims'
    // operations) until the next publish.
    if (open_.get() == &g) open_.reset();
    auto wanted = [&](std::size_t i) { return g.wanted.empty() || g.wanted[i]; };
    // Delivery learns of every stored message before any publisher hears
    // back; neither a hook nor a publisher's handler that throws keeps the
    // others from theirs (the first exception leaves afterwards).
    std::exception_ptr thrown;
    if (!failure)
        for (std::size_t i = 0, k = 0; i < g.items.size(); ++i)
            if (wanted(i)) {
                try {
                    stored_(g.stored[k], std::move(g.items[i].second), g.at_ms);
                } catch (...) {
                    if (!thrown) thrown = std::current_exception();
                }
                ++k;
            }
    for (std::size_t i = 0, k = 0; i < g.handlers.size(); ++i) {
        try {
            auto h = std::move(g.handlers[i]);
            if (failure)
                std::move(h)(result(boost::system::in_place_error, *failure));
            else if (!wanted(i))
                std::move(h)(result(boost::system::in_place_error,
                                    app::db_failure{boost::asio::error::operation_aborted,
                                                    "withdrawn before the database thread took it"}));
            else
                std::move(h)(result(boost::system::in_place_value, std::move(g.stored[k++])));
        } catch (...) {
            if (!thrown) thrown = std::current_exception();
        }
    }
    if (thrown) std::rethrow_exception(thrown);
}

}  // namespace steadfast::primary
