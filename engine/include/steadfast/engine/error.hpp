// Error codes and stop reasons of the retry engine.
//
// Expected failures are values: a retry that gives up reports a stop_reason and
// the matching steadfast::error code; nothing on that path throws.
#pragma once

#include <boost/system/error_code.hpp>

#include <string_view>
#include <type_traits>

namespace steadfast {

using boost::system::error_code;

/// Why a retry ended. `success` is the only non-failure reason.
enum class stop_reason : unsigned char {
    success = 0,
    attempts_exhausted,  // the stop condition's attempt limit was reached
    deadline,            // the stop condition's elapsed-time limit was reached
    permanent,           // an attempt failed in a way that retrying cannot fix
    cancelled,           // per-operation cancellation, or the io_context stopped
    budget,              // the shared retry budget had no tokens left
    condition,           // a stop-when condition became true
    pushback,            // the server asked for a longer wait (Retry-After) than the policy's maximum delay
    circuit_open,        // the policy's circuit breaker rejected the next attempt (none was made)
    limited,             // a pipeline's rate or concurrency limit had no room in its queue (no attempt was made)
};

std::string_view to_string(stop_reason r) noexcept;

/// Error codes produced by the engine itself (category "steadfast").
enum class error {
    attempts_exhausted = 1,
    deadline_exceeded,
    permanent_failure,
    cancelled,
    budget_exhausted,
    condition_met,
    attempt_timeout,   // an attempt overran its per-attempt timeout
    exception_thrown,  // an attempt threw an exception that carried no error code
    pushback,          // the server's requested wait is longer than the policy allows
    circuit_open,      // the circuit breaker rejected the call
    queue_full,        // a concurrency or rate limit's queue had no room for another waiter
};

const boost::system::error_category& error_category() noexcept;

inline error_code make_error_code(error e) noexcept {
    return {static_cast<int>(e), error_category()};
}

/// The error code that stands for a failed stop reason ({} for success).
error_code to_error_code(stop_reason r) noexcept;

}  // namespace steadfast

template <>
struct boost::system::is_error_code_enum<steadfast::error> : std::true_type {};
