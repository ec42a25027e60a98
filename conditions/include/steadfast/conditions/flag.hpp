// flag: a condition set and cleared from code, from any thread.
#pragma once

#include <steadfast/conditions/condition.hpp>

#include <boost/asio/dispatch.hpp>

namespace steadfast {

class flag : public condition {
public:
    flag(executor_type ex, std::string name, bool initial = false)
        : condition(std::move(ex), std::move(name), initial) {}

    /// Thread-safe: the change is made on the condition's executor (at once
    /// when called from it, else dispatched there).
    void set(bool v = true) {
        boost::asio::dispatch(get_executor(),
                              [self = std::static_pointer_cast<flag>(shared_from_this()), v] { self->assign(v); });
    }
    void clear() { set(false); }
};

inline std::shared_ptr<flag> make_flag(condition::executor_type ex, std::string name, bool initial = false) {
    return std::make_shared<flag>(std::move(ex), std::move(name), initial);
}

}  // namespace steadfast
