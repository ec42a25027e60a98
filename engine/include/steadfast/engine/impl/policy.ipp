#pragma once
#include <steadfast/engine/policy.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <stdexcept>
#include <string>

namespace steadfast {

classification classify_error(error_code ec) noexcept {
    namespace e = boost::asio::error;
    if (!ec) return classification::success();
    if (ec == e::operation_aborted || ec == error::cancelled) return classification::cancelled(ec);
    // Errors that the same call will meet again however often it is retried:
    // a name that does not exist, a refused permission, a bad argument or
    // descriptor, an unsupported operation. (A refused or reset connection,
    // a timeout, a host or network unreachable may pass: retryable.)
    if (ec == e::host_not_found || ec == e::service_not_found || ec == e::socket_type_not_supported ||
        ec == e::access_denied || ec == e::no_permission || ec == e::invalid_argument || ec == e::bad_descriptor ||
        ec == e::address_family_not_supported || ec == e::operation_not_supported || ec == e::no_protocol_option ||
        ec == e::message_size || ec == e::name_too_long || ec == e::fault)
        return classification::permanent(ec);
    return classification::retryable(ec);
}

classification classify_exception(const std::exception_ptr& e) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const boost::system::system_error& se) {
        auto c = classify_error(se.code());
        if (c.kind == verdict::success) return classification::retryable(error::exception_thrown);
        return c;
    } catch (...) {
        return classification::retryable(error::exception_thrown);
    }
}

namespace {
const std::shared_ptr<const detail::policy_data>& default_policy_data() {
    static const auto d = std::make_shared<const detail::policy_data>();
    return d;
}

// One random_device read per process; each operation then gets its own
// stream. The counter is mixed (splitmix64's finaliser) before use: seeds one
// golden-ratio step apart would give streams that are the same sequence
// shifted by one draw, since draw() advances its state by that same step.
std::uint64_t fresh_seed() noexcept {
    static std::atomic<std::uint64_t> counter{[] {
        std::random_device rd;
        return (std::uint64_t{rd()} << 32) ^ rd();
    }()};
    std::uint64_t z = counter.fetch_add(1, std::memory_order_relaxed);
    z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdull;
    z = (z ^ (z >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return z ^ (z >> 33);
}

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("steadfast::retry_policy: " + what);
}
}  // namespace

retry_policy::retry_policy() : d_(default_policy_data()) {}

template <class F>
retry_policy retry_policy::modified(F&& f) const {
    auto copy = std::make_shared<detail::policy_data>(*d_);
    f(*copy);
    return retry_policy(std::move(copy));
}

retry_policy retry_policy::with_backoff(backoff b) const {
    return modified([&](auto& d) { d.backoff_ = std::move(b); });
}
retry_policy retry_policy::with_stop(stop_condition s) const {
    return modified([&](auto& d) { d.stop_ = std::move(s); });
}
retry_policy retry_policy::with_attempt_timeout(nanoseconds t) const {
    require(t.count() > 0, "the attempt timeout must be positive, got " + std::to_string(t.count()) + "ns");
    return modified([&](auto& d) { d.attempt_timeout_ = t; });
}
retry_policy retry_policy::with_max_delay(nanoseconds t) const {
    require(t.count() >= 0, "the max delay must not be negative, got " + std::to_string(t.count()) + "ns");
    return modified([&](auto& d) { d.max_delay_ = t; });
}
retry_hooks combine(retry_hooks a, retry_hooks b) {
    auto both = [](auto x, auto y) -> decltype(x) {
        if (!x) return y;
        if (!y) return x;
        return [x = std::move(x), y = std::move(y)](const auto&... args) {
            x(args...);
            y(args...);
        };
    };
    return {both(std::move(a.before_attempt), std::move(b.before_attempt)),
            both(std::move(a.after_attempt), std::move(b.after_attempt)),
            both(std::move(a.on_give_up), std::move(b.on_give_up))};
}

retry_policy retry_policy::with_more_hooks(retry_hooks h) const {
    return modified([&](auto& d) { d.hooks_ = combine(std::move(d.hooks_), std::move(h)); });
}

retry_policy retry_policy::with_pushback(pushback_rule r) const {
    return modified([&](auto& d) { d.wait_out_pushback_ = r == pushback_rule::wait_it_out; });
}
retry_policy retry_policy::with_budget(std::shared_ptr<retry_budget> b) const {
    require(b != nullptr, "with_budget needs a budget");
    return modified([&](auto& d) { d.budget_ = std::move(b); });
}
retry_policy retry_policy::with_hooks(retry_hooks h) const {
    return modified([&](auto& d) { d.hooks_ = std::move(h); });
}
retry_policy retry_policy::with_random(random_source r) const {
    require(static_cast<bool>(r), "with_random needs a function");
    return modified([&](auto& d) { d.random_ = std::move(r); });
}
retry_policy retry_policy::with_seed(std::uint64_t seed) const {
    return modified([&](auto& d) { d.seed_ = seed; });
}
retry_policy retry_policy::with_exception_classifier(std::function<classification(const std::exception_ptr&)> f) const {
    require(static_cast<bool>(f), "with_exception_classifier needs a function");
    return modified([&](auto& d) { d.exception_classifier_ = std::move(f); });
}
retry_policy retry_policy::with_stop_when(std::shared_ptr<watchable> c, stop_in_flight f) const {
    require(c != nullptr, "with_stop_when needs a condition");
    require(f == stop_in_flight::cancel || f == stop_in_flight::let_finish,
            "with_stop_when: stop_in_flight is cancel or let_finish");
    return modified([&](auto& d) {
        d.stop_when_ = std::move(c);
        d.stop_in_flight_ = f;
    });
}
retry_policy retry_policy::with_attempt_when(std::shared_ptr<watchable> c) const {
    require(c != nullptr, "with_attempt_when needs a condition");
    return modified([&](auto& d) { d.attempt_when_ = std::move(c); });
}

retry_policy retry_policy::with_breaker(std::shared_ptr<circuit_breaker> b) const {
    require(b != nullptr, "with_breaker needs a circuit breaker");
    return modified([&](auto& d) { d.breaker_ = std::move(b); });
}

classification retry_policy::classify(const std::exception_ptr& e) const {
    return d_->exception_classifier_ ? d_->exception_classifier_(e) : classify_exception(e);
}

retry_state::retry_state(const retry_policy& p) : p_(&p.data()), rng_(p.data().seed_.value_or(0)) {}

std::uint64_t retry_state::draw() {
    if (p_->random_) return p_->random_();
    if (!seeded_) {  // seeded on the first draw: an instant success never pays for it
        seeded_ = true;
        if (!p_->seed_) rng_ = fresh_seed();
    }
    // splitmix64: 8 bytes of state per operation, good enough for jitter.
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool retry_state::out_of_time(nanoseconds elapsed) const {
    const auto limit = p_->stop_.deadline();
    return limit && elapsed >= *limit && (attempts_ > 0 || *limit > nanoseconds(0));
}

attempt_context retry_state::begin_attempt(nanoseconds elapsed) {
    attempt_context ctx;
    ctx.number = ++attempts_;
    ctx.elapsed = elapsed;
    if (auto limit = p_->stop_.deadline()) ctx.time_left = std::max(nanoseconds(0), *limit - elapsed);
    ctx.timeout = p_->attempt_timeout_;
    if (ctx.time_left && (!ctx.timeout || *ctx.time_left < *ctx.timeout)) ctx.timeout = ctx.time_left;
    return ctx;
}

decision retry_state::on_outcome(const classification& c, nanoseconds elapsed, const previous_outcome* outcome) {
    auto stop_with = [](stop_reason r) { return decision{decision::action::stop, r, {}, false}; };
    switch (c.kind) {
        case verdict::success:
            // The budget refunds the last retry's cost (as the AWS SDKs' retry
            // quota does), or success_refund when no retry was needed.
            if (p_->budget_) p_->budget_->release(last_cost_ ? last_cost_ : p_->budget_->settings().success_refund);
            return stop_with(stop_reason::success);
        case verdict::cancelled:
            return stop_with(stop_reason::cancelled);
        case verdict::permanent:
            return stop_with(stop_reason::permanent);
        case verdict::retryable:
            break;
    }
    const nanoseconds cap = p_->max_delay_.value_or(p_->backoff_.cap());
    decision d{decision::action::retry, stop_reason::success, {}, c.delay_hint.has_value()};
    if (c.delay_hint) {
        // Pushback: never earlier than the server allowed. A wait beyond the
        // policy's maximum is not shortened; it ends the retry (after the stop
        // condition had its say: the last attempt is "attempts_exhausted"),
        // unless the policy says to wait it out.
        d.delay = std::max(nanoseconds(0), *c.delay_hint);
        if (auto r = p_->stop_.check(attempts_, elapsed, d.delay)) return stop_with(*r);
        if (d.delay > cap && !p_->wait_out_pushback_) return stop_with(stop_reason::pushback);
    } else {
        d.delay = p_->backoff_.delay(
            attempts_, previous_, [this] { return draw(); }, cap, outcome);
        if (auto r = p_->stop_.check(attempts_, elapsed, d.delay)) return stop_with(*r);
    }
    if (p_->budget_) {
        const auto& o = p_->budget_->settings();
        const std::uint32_t cost = c.ec == error::attempt_timeout ? o.timeout_cost : o.retry_cost;
        if (!p_->budget_->try_acquire(cost)) return stop_with(stop_reason::budget);
        last_cost_ = cost;
    }
    previous_ = d.delay;
    return d;
}

}  // namespace steadfast
