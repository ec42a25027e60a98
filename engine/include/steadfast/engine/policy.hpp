// retry_policy: the composable pieces of a retry (backoff, stop, per-attempt
// timeout, delay cap, budget, hooks, randomness) in one immutable value.
//
// Copying a policy copies one shared pointer, so it can be passed by value to
// every retrying operation and shared across threads. The with_* builders
// return modified copies and validate their arguments (std::invalid_argument).
#pragma once

#include <steadfast/engine/backoff.hpp>
#include <steadfast/engine/budget.hpp>
#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/stop.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace steadfast {

using std::chrono::nanoseconds;

class watchable;        // an observable boolean state (steadfast/engine/watchable.hpp)
class circuit_breaker;  // steadfast/engine/breaker.hpp

/// What an attempt knows about itself. The attempt runs under the retry's
/// cancellation state: a per-attempt timeout, a stop-when condition or the
/// caller's cancellation cancels the operations it awaits.
struct attempt_context {
    std::uint64_t number = 1;  // 1 for the first attempt
    /// Under hedging (see pipeline.hpp): 0 for the attempt that started
    /// first, k for the k-th hedge started beside it (all share `number`).
    std::uint32_t hedge = 0;
    nanoseconds elapsed{};                 // since the retry started
    std::optional<nanoseconds> time_left;  // until the stop condition's deadline
    std::optional<nanoseconds> timeout;    // this attempt's effective timeout
    /// The outcome of the attempt before this one (nullptr for the first):
    /// its classification, exception or returned value.
    const previous_outcome* previous = nullptr;
};

/// What the engine decided after an attempt.
struct decision {
    enum class action { stop, retry };
    action what = action::stop;
    stop_reason reason = stop_reason::success;  // when stopping
    nanoseconds delay{};                        // when retrying: the chosen delay
    bool hinted = false;                        // the delay came from a server hint
};

/// Summary handed to the give-up hook and kept in the result.
struct retry_summary {
    stop_reason reason = stop_reason::success;
    std::uint64_t attempts = 0;
    nanoseconds elapsed{};
    error_code last_error;
};

/// Observation points for logs and metrics. Called on the retry's executor;
/// they must not throw.
struct retry_hooks {
    std::function<void(const attempt_context&)> before_attempt = {};
    std::function<void(const attempt_context&, const classification&, const decision&)> after_attempt = {};
    std::function<void(const retry_summary&)> on_give_up = {};
};

/// Both sets of hooks: for each event, `a`'s hook and then `b`'s (metrics and
/// logging from different places on one policy).
retry_hooks combine(retry_hooks a, retry_hooks b);

/// See retry_policy::with_pushback.
enum class pushback_rule { stop, wait_it_out };

/// How a stop-when condition meets the attempt in flight (see
/// retry_policy::with_stop_when).
enum class stop_in_flight {
    /// The attempt is cancelled (terminal, partial and total) and the retry
    /// ends at once. For that, under retry() each attempt runs in a
    /// coroutine of its own with a cancellation signal of its own.
    cancel,
    /// The attempt runs to its end and no other starts. Under retry() it
    /// runs inline in the retry's coroutine (nothing spawned: cheaper), as
    /// without stop-when (async_retry() spawns every attempt either way).
    /// For an attempt that must not be cut short, or whose own I/O ends when
    /// the condition turns true (something closes it). An attempt timeout
    /// still cancels it, and so does a deadline stop (stop::max_elapsed),
    /// which gives each attempt the time left as its timeout: then the
    /// attempt runs in a coroutine of its own, as with `cancel`.
    let_finish,
};

class retry_state;
namespace detail {
class retry_fsm;
struct retry_state_access;
struct policy_data {
    backoff backoff_;
    stop_condition stop_ = stop::max_attempts(5);
    std::optional<nanoseconds> attempt_timeout_;
    std::optional<nanoseconds> max_delay_;
    std::shared_ptr<retry_budget> budget_;
    retry_hooks hooks_;
    random_source random_;
    std::optional<std::uint64_t> seed_;
    std::function<classification(const std::exception_ptr&)> exception_classifier_;
    std::shared_ptr<watchable> stop_when_;
    std::shared_ptr<watchable> attempt_when_;
    stop_in_flight stop_in_flight_ = stop_in_flight::cancel;
    std::shared_ptr<circuit_breaker> breaker_;
    bool wait_out_pushback_ = false;
};
}  // namespace detail

class retry_policy {
public:
    /// Exponential backoff 100 ms doubling to 30 s with full jitter, at most 5 attempts.
    retry_policy();

    retry_policy with_backoff(backoff b) const;
    retry_policy with_stop(stop_condition s) const;
    /// Each attempt that overruns `d` is cancelled and counts as a retryable
    /// timeout (error::attempt_timeout). d > 0.
    retry_policy with_attempt_timeout(nanoseconds d) const;
    /// Upper bound for the backoff's delays. Default: the backoff's cap. d >= 0.
    /// A server's hint (Retry-After) is never shortened: a hint beyond this
    /// bound stops the retry with stop_reason::pushback, unless
    /// with_pushback(pushback_rule::wait_it_out).
    retry_policy with_max_delay(nanoseconds d) const;
    /// What to do when the server asks for a longer wait than max_delay():
    /// stop (default, stop_reason::pushback) or wait as long as it asked.
    retry_policy with_pushback(pushback_rule r) const;
    retry_policy with_budget(std::shared_ptr<retry_budget> b) const;
    /// Replaces the hooks.
    retry_policy with_hooks(retry_hooks h) const;
    /// Adds hooks that run after the ones already set (see combine()).
    retry_policy with_more_hooks(retry_hooks h) const;
    /// Random numbers for jitter. The function is called from the retry's executor.
    retry_policy with_random(random_source r) const;
    /// Deterministic jitter: every operation using this policy draws the same sequence.
    retry_policy with_seed(std::uint64_t seed) const;
    retry_policy with_exception_classifier(std::function<classification(const std::exception_ptr&)> f) const;
    /// The retry ends with stop_reason::condition as soon as `c` is true, also in
    /// the middle of a sleep or an attempt: the attempt is cancelled (and
    /// awaited: one that ends in success anyway, its cancellation not
    /// honoured, is the retry's success), or with
    /// stop_in_flight::let_finish runs to its end (its success is the
    /// retry's: stop_reason::success; any other outcome ends it with
    /// stop_reason::condition). Replaces an earlier stop-when.
    retry_policy with_stop_when(std::shared_ptr<watchable> c, stop_in_flight f = stop_in_flight::cancel) const;
    /// No attempt starts while `c` is false; a pending sleep ends early when it
    /// turns true (not a server's Retry-After wait, which is never shortened).
    retry_policy with_attempt_when(std::shared_ptr<watchable> c) const;
    /// Every attempt asks `b` first: a rejected one is not made, and the retry
    /// ends with stop_reason::circuit_open (asked after the gate and the
    /// deadline, just before the attempt would start). Each attempt's outcome,
    /// as this policy classifies it, is recorded in `b` (cancelled ones are
    /// not). Share one breaker among the operations that call one dependency.
    retry_policy with_breaker(std::shared_ptr<circuit_breaker> b) const;

    const backoff& get_backoff() const noexcept { return d_->backoff_; }
    const stop_condition& get_stop() const noexcept { return d_->stop_; }
    std::optional<nanoseconds> attempt_timeout() const noexcept { return d_->attempt_timeout_; }
    nanoseconds max_delay() const noexcept { return d_->max_delay_.value_or(d_->backoff_.cap()); }
    const std::shared_ptr<retry_budget>& budget() const noexcept { return d_->budget_; }
    const retry_hooks& hooks() const noexcept { return d_->hooks_; }
    const std::shared_ptr<circuit_breaker>& breaker() const noexcept { return d_->breaker_; }
    /// A thrown exception as this policy classifies it (with_exception_classifier,
    /// else classify_exception()).
    classification classify(const std::exception_ptr& e) const;

private:
    friend class retry_state;
    friend class detail::retry_fsm;
    const detail::policy_data& data() const noexcept { return *d_; }
    explicit retry_policy(std::shared_ptr<const detail::policy_data> d) : d_(std::move(d)) {}
    template <class F>
    retry_policy modified(F&& f) const;
    std::shared_ptr<const detail::policy_data> d_;
};

/// The decisions of one retrying operation, apart from any I/O: what the next
/// attempt looks like, and after each outcome whether to retry, after which
/// delay, or to stop and why. The decision loop (detail/retry_fsm.hpp) uses it.
class retry_state {
public:
    /// Keeps a reference to `p`'s data: the policy must outlive it.
    explicit retry_state(const retry_policy& p);
    retry_state(retry_policy&&) = delete;

    /// Whether no attempt may start at `elapsed`: the stop condition's
    /// deadline has been reached (an attempt would get a zero timeout).
    bool out_of_time(nanoseconds elapsed) const;
    /// Called when attempt number attempts()+1 starts, `elapsed` since the start.
    attempt_context begin_attempt(nanoseconds elapsed);
    /// Called with the attempt's classification, `elapsed` since the start;
    /// `outcome` (if given) is what a custom backoff sees of the attempt.
    decision on_outcome(const classification& c, nanoseconds elapsed, const previous_outcome* outcome = nullptr);

    std::uint64_t attempts() const noexcept { return attempts_; }

private:
    friend class detail::retry_fsm;
    friend struct detail::retry_state_access;
    std::uint64_t draw();
    const detail::policy_data* p_;
    std::uint64_t attempts_ = 0;   // 64 bits: a retry-forever loop never wraps it
    std::uint32_t last_cost_ = 0;  // budget tokens the latest retry took
    bool seeded_ = false;          // (beside last_cost_: a pending async_retry holds one of these)
    nanoseconds previous_{};
    std::uint64_t rng_ = 0;
};

namespace detail {
/// For tests: seeds the attempt count (the counter's range is tested
/// without billions of real attempts).
struct retry_state_access {
    static void set_attempts(retry_state& s, std::uint64_t n) noexcept { s.attempts_ = n; }
};
}  // namespace detail

}  // namespace steadfast
