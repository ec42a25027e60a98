// Classification: what an attempt's outcome means for the retry.
//
// Every outcome (a returned value, an error code, a thrown exception, a timeout)
// becomes a `classification`: success, retryable, permanent or cancelled, with
// the error and an optional server-suggested delay (such as Retry-After).
// Cancellation is never retried.
#pragma once

#include <steadfast/engine/error.hpp>

#include <boost/system/result.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>

namespace steadfast {

namespace detail {
class retry_fsm;
}

using std::chrono::nanoseconds;

enum class verdict { success, retryable, permanent, cancelled };

struct classification {
    verdict kind = verdict::success;
    error_code ec;
    /// Replaces the backoff's delay for the next retry, never shortened (see
    /// retry_policy::with_max_delay and with_pushback).
    std::optional<nanoseconds> delay_hint;

    static classification success() noexcept { return {}; }
    static classification retryable(error_code ec, std::optional<nanoseconds> hint = {}) noexcept {
        return {verdict::retryable, ec, hint};
    }
    static classification permanent(error_code ec) noexcept { return {verdict::permanent, ec, {}}; }
    static classification cancelled(error_code ec) noexcept { return {verdict::cancelled, ec, {}}; }
};

/// The outcome of the attempt before, as the next attempt sees it
/// (attempt_context::previous) and a custom backoff (backoff::custom):
/// how it was classified, what it threw, or what it returned.
class previous_outcome {
public:
    /// Kind, error and server hint of the outcome.
    const classification& how() const noexcept { return how_; }
    /// The exception the attempt threw, if it threw.
    const std::exception_ptr& exception() const noexcept { return exception_; }
    /// The value the attempt returned, if it returned one of type `T` (the
    /// attempt's value type, such as an HTTP reply); nullptr otherwise. Valid
    /// while the next attempt or the backoff runs.
    template <class T>
    const T* value() const noexcept {
        return type_ && *type_ == typeid(T) ? static_cast<const T*>(value_) : nullptr;
    }

private:
    friend class detail::retry_fsm;
    classification how_;
    std::exception_ptr exception_;
    const void* value_ = nullptr;
    const std::type_info* type_ = nullptr;
};

/// !ec: success; operation_aborted: cancelled; errors that retrying cannot
/// fix (host_not_found, access_denied, invalid_argument, bad_descriptor,
/// operation_not_supported, ...): permanent; anything else: retryable.
classification classify_error(error_code ec) noexcept;

/// The default for thrown exceptions: a system_error is classified by its code
/// (so operation_aborted is "cancelled"); any other exception is retryable with
/// error::exception_thrown.
classification classify_exception(const std::exception_ptr& e) noexcept;

/// What an attempt can return to say precisely what happened: a value, or an
/// error that is retryable (optionally with a delay hint) or permanent.
template <class T = void>
class attempt_result {
public:
    attempt_result(T value) : value_(std::move(value)) {}  // NOLINT: implicit success

    static attempt_result retry(error_code ec, std::optional<nanoseconds> hint = {}) {
        return attempt_result(classification::retryable(ec, hint));
    }
    static attempt_result fail(error_code ec) { return attempt_result(classification::permanent(ec)); }

    bool has_value() const noexcept { return value_.has_value(); }
    T& value() & { return value_.value(); }
    const T& value() const& { return value_.value(); }
    T&& value() && { return std::move(value_).value(); }
    const classification& outcome() const noexcept { return class_; }

private:
    explicit attempt_result(classification c) : class_(c) {}
    std::optional<T> value_;
    classification class_;
};

template <>
class attempt_result<void> {
public:
    attempt_result() = default;
    static attempt_result ok() { return {}; }
    static attempt_result retry(error_code ec, std::optional<nanoseconds> hint = {}) {
        return attempt_result(classification::retryable(ec, hint));
    }
    static attempt_result fail(error_code ec) { return attempt_result(classification::permanent(ec)); }
    bool has_value() const noexcept { return class_.kind == verdict::success; }
    const classification& outcome() const noexcept { return class_; }

private:
    explicit attempt_result(classification c) : class_(c) {}
    classification class_;
};

/// The classifier used when none is given: error codes and
/// boost::system::result by their error, attempt_result by what it says, any
/// other value is a success.
struct default_classifier {
    classification operator()(const error_code& ec) const noexcept { return classify_error(ec); }
    template <class T>
    classification operator()(const boost::system::result<T, error_code>& r) const noexcept {
        return r.has_value() ? classification::success() : classify_error(r.error());
    }
    template <class T>
    classification operator()(const attempt_result<T>& r) const noexcept {
        return r.outcome();
    }
    template <class T>
    classification operator()(const T&) const noexcept {
        return classification::success();
    }
};

/// Pairs an attempt function with its own classifier of returned values:
///   co_await retry(policy, classified(send, http_classifier{}));
template <class Fn, class Classifier>
struct classified_attempt {
    Fn fn;
    Classifier classify;
};

template <class Fn, class Classifier>
classified_attempt<std::decay_t<Fn>, std::decay_t<Classifier>> classified(Fn&& fn, Classifier&& c) {
    return {std::forward<Fn>(fn), std::forward<Classifier>(c)};
}

}  // namespace steadfast
