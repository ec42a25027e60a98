#pragma once
#include <steadfast/engine/error.hpp>

#include <string>

namespace steadfast {

std::string_view to_string(stop_reason r) noexcept {
    switch (r) {
        case stop_reason::success:
            return "success";
        case stop_reason::attempts_exhausted:
            return "attempts_exhausted";
        case stop_reason::deadline:
            return "deadline";
        case stop_reason::permanent:
            return "permanent";
        case stop_reason::cancelled:
            return "cancelled";
        case stop_reason::budget:
            return "budget";
        case stop_reason::condition:
            return "condition";
        case stop_reason::pushback:
            return "pushback";
        case stop_reason::circuit_open:
            return "circuit_open";
        case stop_reason::limited:
            return "limited";
    }
    return "unknown";
}

namespace {
class category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "steadfast"; }
    std::string message(int ev) const override {
        switch (static_cast<error>(ev)) {
            case error::attempts_exhausted:
                return "retry gave up: attempts exhausted";
            case error::deadline_exceeded:
                return "retry gave up: deadline exceeded";
            case error::permanent_failure:
                return "retry gave up: permanent failure";
            case error::cancelled:
                return "retry cancelled";
            case error::budget_exhausted:
                return "retry gave up: retry budget exhausted";
            case error::condition_met:
                return "retry stopped: stop condition met";
            case error::attempt_timeout:
                return "attempt timed out";
            case error::exception_thrown:
                return "attempt threw an exception";
            case error::pushback:
                return "retry stopped: the server asked for a longer wait than the policy allows";
            case error::circuit_open:
                return "retry stopped: the circuit breaker is open";
            case error::queue_full:
                return "the limit's queue is full";
        }
        return "unknown steadfast error " + std::to_string(ev);
    }
};
}  // namespace

const boost::system::error_category& error_category() noexcept {
    static const category_impl c;
    return c;
}

error_code to_error_code(stop_reason r) noexcept {
    switch (r) {
        case stop_reason::success:
            return {};
        case stop_reason::attempts_exhausted:
            return error::attempts_exhausted;
        case stop_reason::deadline:
            return error::deadline_exceeded;
        case stop_reason::permanent:
            return error::permanent_failure;
        case stop_reason::cancelled:
            return error::cancelled;
        case stop_reason::budget:
            return error::budget_exhausted;
        case stop_reason::condition:
            return error::condition_met;
        case stop_reason::pushback:
            return error::pushback;
        case stop_reason::circuit_open:
            return error::circuit_open;
        case stop_reason::limited:
            return error::queue_full;
    }
    return error::permanent_failure;
}

}  // namespace steadfast
