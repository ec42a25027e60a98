// !a, a && b, a || b: conditions derived from others that stay observable.
// A derived condition notifies only when its own value changes. All inputs
// must share one executor (std::invalid_argument otherwise).
#pragma once

#include <steadfast/conditions/condition.hpp>

namespace steadfast {

namespace detail {
class derived_condition final : public condition {
public:
    enum class op { not_, and_, or_ };
    derived_condition(op o, condition_ptr a, condition_ptr b);

private:
    bool compute() const;
    op op_;
    condition_ptr a_, b_;
    subscription sub_a_, sub_b_;
};
}  // namespace detail

condition_ptr operator!(const condition_ptr& a);
condition_ptr operator&&(const condition_ptr& a, const condition_ptr& b);
condition_ptr operator||(const condition_ptr& a, const condition_ptr& b);

}  // namespace steadfast
