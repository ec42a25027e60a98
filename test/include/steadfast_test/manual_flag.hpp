// A stop-when condition or gate for the engine's own tests, set by hand (the
// conditions library has the real ones).
#pragma once

#include <steadfast/engine/watchable.hpp>

#include <string>
#include <utility>

namespace steadfast_test {

struct manual_flag final : steadfast::watchable {
    explicit manual_flag(std::string name = "flag") : watchable(std::move(name)) {}
    bool value() const override { return v_; }
    void set(bool v) {
        if (v == v_) return;
        v_ = v;
        notify(v);
    }
    bool v_ = false;
};

}  // namespace steadfast_test
