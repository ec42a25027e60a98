// !a, a && b, a || b: conditions derived from others that stay observable.
// A derived condition notifies only when its own value changes. All inputs
// must share one executor (std::invalid_argument otherwise).
//
// The operators work on `cond`, a thin handle, not on std::shared_ptr itself:
// overloading `!` for shared_ptr would hijack every `if (!ptr)` null check.
//
//   steadfast::cond online = probe, shutdown = sd;
//   auto stop = !online && shutdown;          // a cond; converts to condition_ptr
#pragma once

#include <steadfast/conditions/condition.hpp>

#include <memory>
#include <type_traits>

namespace steadfast {

namespace detail {
class derived_condition final : public condition {
public:
    enum class op { not_, and_, or_ };
    derived_condition(op o, condition_ptr a, condition_ptr b);

    /// Computed from the inputs at each read, never from a stored copy: while
    /// one input's change is being delivered, a derived condition that has not
    /// been told yet still reads right (`a && !a` is never true, not even for
    /// the subscribers notified first).
    bool value() const override { return compute(); }

private:
    bool compute() const;
    op op_;
    condition_ptr a_, b_;
    subscription sub_a_, sub_b_;
};

std::shared_ptr<derived_condition> combine(derived_condition::op o, const condition_ptr& a, const condition_ptr& b);
}  // namespace detail

/// A handle on a condition for composing with !, && and ||.
class cond {
public:
    cond() = default;
    template <class C, class = std::enable_if_t<std::is_base_of_v<condition, C>>>
    cond(std::shared_ptr<C> c) : c_(std::move(c)) {}  // NOLINT: implicit on purpose

    bool value() const { return c_->value(); }
    const condition_ptr& get() const noexcept { return c_; }
    condition* operator->() const noexcept { return c_.get(); }
    operator condition_ptr() const { return c_; }               // NOLINT
    operator std::shared_ptr<watchable>() const { return c_; }  // NOLINT: for retry policies

    // Hidden friends: found only for cond arguments, never for a shared_ptr.
    friend cond operator!(const cond& a) { return detail::combine(detail::derived_condition::op::not_, a.c_, nullptr); }
    friend cond operator&&(const cond& a, const cond& b) {
        return detail::combine(detail::derived_condition::op::and_, a.c_, b.c_);
    }
    friend cond operator||(const cond& a, const cond& b) {
        return detail::combine(detail::derived_condition::op::or_, a.c_, b.c_);
    }

private:
    condition_ptr c_;
};

}  // namespace steadfast
