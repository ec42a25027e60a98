#pragma once
#include <steadfast/engine/stop.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace steadfast {

struct stop_condition::node {
    enum class kind { never, attempts, elapsed, any, all } k = kind::never;
    std::uint64_t attempts = 0;
    nanoseconds elapsed{};
    std::shared_ptr<const node> left, right;
};

namespace {
nanoseconds sat_add(nanoseconds a, nanoseconds b) noexcept {
    if (b.count() > 0 && a.count() > std::numeric_limits<nanoseconds::rep>::max() - b.count())
        return nanoseconds::max();
    return a + b;
}

std::optional<stop_reason> eval(const stop_condition::node& n, std::uint64_t attempts, nanoseconds elapsed,
                                nanoseconds next_delay) {
    using kind = stop_condition::node::kind;
    switch (n.k) {
        case kind::never:
            return std::nullopt;
        case kind::attempts:
            if (attempts >= n.attempts) return stop_reason::attempts_exhausted;
            return std::nullopt;
        case kind::elapsed:
            // Sleeping next_delay would start the next attempt at or past the limit.
            if (sat_add(elapsed, next_delay) >= n.elapsed) return stop_reason::deadline;
            return std::nullopt;
        case kind::any:
            if (auto r = eval(*n.left, attempts, elapsed, next_delay)) return r;
            return eval(*n.right, attempts, elapsed, next_delay);
        case kind::all: {
            auto a = eval(*n.left, attempts, elapsed, next_delay);
            auto b = eval(*n.right, attempts, elapsed, next_delay);
            if (a && b) return b;
            return std::nullopt;
        }
    }
    return std::nullopt;
}

std::optional<nanoseconds> limit(const stop_condition::node& n) {
    using kind = stop_condition::node::kind;
    switch (n.k) {
        case kind::elapsed:
            return n.elapsed;
        case kind::any: {
            auto a = limit(*n.left), b = limit(*n.right);
            if (a && b) return std::min(*a, *b);
            return a ? a : b;
        }
        case kind::all: {
            // Both must hold to stop; a side without a time limit never expires by time.
            auto a = limit(*n.left), b = limit(*n.right);
            if (a && b) return std::max(*a, *b);
            return std::nullopt;
        }
        default:
            return std::nullopt;
    }
}
}  // namespace

stop_condition::stop_condition() : node_(stop::never().node_) {}

std::optional<stop_reason> stop_condition::check(std::uint64_t attempts, nanoseconds elapsed,
                                                 nanoseconds next_delay) const {
    return eval(*node_, attempts, elapsed, next_delay);
}

std::optional<nanoseconds> stop_condition::deadline() const {
    return limit(*node_);
}

stop_condition operator||(stop_condition a, stop_condition b) {
    auto n = std::make_shared<stop_condition::node>();
    n->k = stop_condition::node::kind::any;
    n->left = std::move(a.node_);
    n->right = std::move(b.node_);
    return stop_condition(std::move(n));
}

stop_condition operator&&(stop_condition a, stop_condition b) {
    auto n = std::make_shared<stop_condition::node>();
    n->k = stop_condition::node::kind::all;
    n->left = std::move(a.node_);
    n->right = std::move(b.node_);
    return stop_condition(std::move(n));
}

stop_condition stop::never() {
    static const auto n = std::make_shared<const stop_condition::node>();
    return stop_condition(n);
}

stop_condition stop::max_attempts(std::uint64_t count) {
    if (count == 0) throw std::invalid_argument("steadfast::stop::max_attempts: the attempt limit must be at least 1");
    auto n = std::make_shared<stop_condition::node>();
    n->k = stop_condition::node::kind::attempts;
    n->attempts = count;
    return stop_condition(std::move(n));
}

stop_condition stop::max_elapsed(nanoseconds d) {
    if (d.count() <= 0)
        throw std::invalid_argument("steadfast::stop::max_elapsed: the time limit must be positive, got " +
                                    std::to_string(d.count()) + "ns");
    auto n = std::make_shared<stop_condition::node>();
    n->k = stop_condition::node::kind::elapsed;
    n->elapsed = d;
    return stop_condition(std::move(n));
}

}  // namespace steadfast
