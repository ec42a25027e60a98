#pragma once
#include <steadfast/engine/breaker.hpp>

#include <time.h>

#include <algorithm>
#include <utility>

namespace steadfast {

namespace detail {
// The coarse monotonic clock's resolution, or zero where there is none.
inline nanoseconds coarse_resolution() noexcept {
#ifdef CLOCK_MONOTONIC_COARSE
    timespec r{};
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &r) == 0) return std::chrono::seconds(r.tv_sec) + nanoseconds(r.tv_nsec);
#endif
    return nanoseconds::zero();
}
}  // namespace detail

circuit_breaker::circuit_breaker(breaker_options o, clock_function now)
    : fsm_(o), is_failure_(std::move(o.is_failure)), on_transition_(std::move(o.on_transition)), now_(std::move(now)) {
    const nanoseconds res = detail::coarse_resolution();
    coarse_calls_ = !now_ && res > nanoseconds::zero() && res <= fsm_.settings().slow_call / 100;
}

nanoseconds circuit_breaker::call_time() const {
#ifdef CLOCK_MONOTONIC_COARSE
    if (coarse_calls_) {
        timespec t{};
        ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
        return std::chrono::seconds(t.tv_sec) + nanoseconds(t.tv_nsec);
    }
#endif
    return now();
}

bool circuit_breaker::is_failure(const classification& c) const {
    return is_failure_ ? is_failure_(c) : c.kind == verdict::retryable;
}

void circuit_breaker::count(breaker_transition& t) {
    t.generation = ++generation_;
    switch (t.to) {
        case breaker_state::open:
            ++stats_.opened;
            break;
        case breaker_state::half_open:
            ++stats_.half_opened;
            break;
        case breaker_state::closed:
            ++stats_.closed;
            break;
        case breaker_state::isolated:
            ++stats_.isolated;
            break;
    }
}

void circuit_breaker::announce(const breaker_transition& t) {
    // A hook must not throw; one that does must not cost a permit taken
    // with the transition (acquire() has already taken it).
    if (on_transition_) try {
            on_transition_(t);
        } catch (...) {
        }
    listeners_.tell();
}

bool circuit_breaker::acquire(std::uint32_t& generation) {
    return acquire(generation, nullptr);
}

// The clock is read under the lock (the machine sees time move forward), and
// only if the decision needs it: a closed breaker reads it only to open (a
// read costs as much as the rest of its bookkeeping).
bool circuit_breaker::acquire(std::uint32_t& generation, nanoseconds* at) {
    std::optional<breaker_transition> moved;
    bool ok;
    {
        std::lock_guard l(m_);
        const auto read = [this] { return now(); };
        ok = fsm_.try_acquire(detail::lazy_time(read), &moved);
        if (moved) count(*moved);
        ++(ok ? stats_.permitted : stats_.rejected);
        generation = generation_;
        if (at) *at = call_time();  // (a clock of the caller's is read under the lock only)
    }
    if (moved) {
        announce(*moved);
        if (at) {
            std::lock_guard l(m_);
            *at = call_time();  // after the hook: its time is not the call's
        }
    }
    return ok;
}

void circuit_breaker::record(std::uint32_t generation, bool failure, nanoseconds took) {
    record_timed(generation, failure, [took] { return took; });
}

template <class Took>
void circuit_breaker::record_timed(std::uint32_t generation, bool failure, Took took_now) {
    std::optional<breaker_transition> moved;
    {
        std::lock_guard l(m_);
        if (generation != generation_) {
            ++stats_.stale;
            return;
        }
        const nanoseconds took = took_now();
        const auto read = [this] { return now(); };
        moved = fsm_.record(detail::lazy_time(read), failure, took);
        ++(failure ? stats_.failures : stats_.successes);
        if (took >= fsm_.settings().slow_call) ++stats_.slow;
        if (moved) count(*moved);
    }
    if (moved) announce(*moved);
}

void circuit_breaker::record(std::uint32_t generation, const classification& c, nanoseconds took) {
    if (c.kind == verdict::cancelled) return release(generation);
    record(generation, is_failure(c), took);
}

void circuit_breaker::release(std::uint32_t generation) noexcept {
    std::lock_guard l(m_);
    if (generation != generation_) {
        ++stats_.stale;
        return;
    }
    fsm_.release();
    ++stats_.released;
}

void circuit_breaker::isolate() {
    std::optional<breaker_transition> moved;
    {
        std::lock_guard l(m_);
        moved = fsm_.isolate(now());
        if (moved) count(*moved);
    }
    if (moved) announce(*moved);
}

void circuit_breaker::reset() {
    std::optional<breaker_transition> moved;
    {
        std::lock_guard l(m_);
        moved = fsm_.reset();
        // A reset of a closed breaker still starts a fresh window: calls let
        // through before it no longer count.
        if (moved)
            count(*moved);
        else
            ++generation_;
    }
    if (moved) announce(*moved);
}

breaker_state circuit_breaker::state() const {
    std::lock_guard l(m_);
    return fsm_.state(now());
}

nanoseconds circuit_breaker::break_left() const {
    std::lock_guard l(m_);
    const nanoseconds t = now();
    if (fsm_.state(t) != breaker_state::open) return nanoseconds::zero();
    return fsm_.open_until() - t;
}

circuit_breaker::stats circuit_breaker::get_stats() const {
    std::lock_guard l(m_);
    stats s = stats_;
    s.state = fsm_.state(now());
    return s;
}

circuit_breaker::permit circuit_breaker::try_acquire() {
    permit p;
    auto self = shared_from_this();  // before the permit is taken: bad_weak_ptr costs nothing
    std::uint32_t g = 0;
    nanoseconds at{};
    if (!acquire(g, &at)) return p;
    p.b_ = std::move(self);
    p.generation_ = g;
    p.at_ = at;
    return p;
}

circuit_breaker::permit& circuit_breaker::permit::operator=(permit&& o) noexcept {
    if (this != &o) {
        release();
        b_ = std::move(o.b_);
        generation_ = o.generation_;
        at_ = o.at_;
    }
    return *this;
}

void circuit_breaker::permit::record(bool failure) {
    if (!b_) return;
    auto b = std::move(b_);
    b->record_timed(generation_, failure, [self = b.get(), at = at_] { return self->call_time() - at; });
}

void circuit_breaker::permit::record(const classification& c) {
    if (!b_) return;
    if (c.kind == verdict::cancelled) return release();
    record(b_->is_failure(c));
}

void circuit_breaker::permit::release() noexcept {
    if (!b_) return;
    auto b = std::move(b_);
    b->release(generation_);
}

}  // namespace steadfast
