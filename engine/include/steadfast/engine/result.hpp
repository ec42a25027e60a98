// retry_result<R>: how a retrying operation ended.
#pragma once

#include <steadfast/engine/error.hpp>
#include <steadfast/engine/policy.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <type_traits>
#include <variant>

namespace steadfast {

template <class R>
class retry_result;
namespace detail {
// The drivers fill a result in; users only read it.
struct result_access {
    template <class R>
    static retry_summary& summary(retry_result<R>& r) noexcept {
        return r.summary_;
    }
    template <class R>
    static std::optional<R>& value(retry_result<R>& r) noexcept {
        return r.value_;
    }
    template <class R>
    static std::exception_ptr& exception(retry_result<R>& r) noexcept {
        return r.exception_;
    }
};
}  // namespace detail

/// `R` is what one attempt returns (std::monostate for void attempts).
/// On success value() is the successful attempt's value. On failure
/// has_value() tells whether the last attempt returned a value (such as an
/// HTTP 503 response) rather than throwing or timing out.
template <class R>
class retry_result {
public:
    using value_type = R;

    bool ok() const noexcept { return summary_.reason == stop_reason::success; }
    explicit operator bool() const noexcept { return ok(); }

    stop_reason reason() const noexcept { return summary_.reason; }
    /// The stop reason as an error code (steadfast::error), {} on success.
    error_code error() const noexcept { return to_error_code(summary_.reason); }
    std::uint64_t attempts() const noexcept { return summary_.attempts; }
    std::chrono::nanoseconds elapsed() const noexcept { return summary_.elapsed; }
    /// The last attempt's error ({} when it succeeded).
    error_code last_error() const noexcept { return summary_.last_error; }
    /// The exception the last attempt threw, if it threw.
    const std::exception_ptr& last_exception() const noexcept { return exception_; }
    const retry_summary& summary() const noexcept { return summary_; }

    bool has_value() const noexcept { return value_.has_value(); }
    R& value() & { return value_.value(); }
    const R& value() const& { return value_.value(); }
    R&& value() && { return std::move(value_).value(); }

private:
    friend struct detail::result_access;
    retry_summary summary_;
    std::optional<R> value_;
    std::exception_ptr exception_;
};

}  // namespace steadfast
