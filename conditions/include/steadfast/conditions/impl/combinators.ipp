#pragma once
#include <steadfast/conditions/combinators.hpp>

#include <stdexcept>

namespace steadfast {
namespace detail {

namespace {
std::string derived_name(derived_condition::op o, const condition_ptr& a, const condition_ptr& b) {
    switch (o) {
        case derived_condition::op::not_:
            return "!" + a->name();
        case derived_condition::op::and_:
            return "(" + a->name() + " && " + b->name() + ")";
        case derived_condition::op::or_:
            return "(" + a->name() + " || " + b->name() + ")";
    }
    return {};
}
bool initial(derived_condition::op o, const condition_ptr& a, const condition_ptr& b) {
    switch (o) {
        case derived_condition::op::not_:
            return !a->value();
        case derived_condition::op::and_:
            return a->value() && b->value();
        case derived_condition::op::or_:
            return a->value() || b->value();
    }
    return false;
}
}  // namespace

derived_condition::derived_condition(op o, condition_ptr a, condition_ptr b)
    : condition(a->get_executor(), derived_name(o, a, b), initial(o, a, b)),
      op_(o),
      a_(std::move(a)),
      b_(std::move(b)) {
    a_->subscribe(sub_a_, [this](bool) { assign(compute()); });
    if (b_) b_->subscribe(sub_b_, [this](bool) { assign(compute()); });
}

bool derived_condition::compute() const {
    switch (op_) {
        case op::not_:
            return !a_->value();
        case op::and_:
            return a_->value() && b_->value();
        case op::or_:
            return a_->value() || b_->value();
    }
    return false;
}

std::shared_ptr<derived_condition> combine(derived_condition::op o, const condition_ptr& a, const condition_ptr& b) {
    // Checked before construction: the base's arguments read both inputs.
    if (a == nullptr || (o != derived_condition::op::not_ && b == nullptr))
        throw std::invalid_argument("steadfast: a condition combinator got an empty cond");
    if (b != nullptr && b->get_executor() != a->get_executor())
        throw std::invalid_argument("steadfast: conditions \"" + a->name() + "\" and \"" + b->name() +
                                    "\" run on different executors and cannot be combined");
    return std::make_shared<derived_condition>(o, a, b);
}

}  // namespace detail

}  // namespace steadfast
