// processors: how many stream processors run, and whether the replicator
// was told to stop. stopped() ends their sends and waits; idle() says that
// none runs after stop() (the owner waits for it before it lets go of what
// they use).
#pragma once

#include <steadfast/conditions.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <memory>

namespace steadfast::primary {

class processors {
public:
    explicit processors(const boost::asio::any_io_executor& ex)
        : stopped_(make_flag(ex, "stopped", false)), idle_(make_flag(ex, "processors-ended", false)) {}

    void started() {
        ++running_;
        idle_->clear();
    }
    void ended() {
        --running_;
        if (running_ == 0 && stopping_) idle_->set();
    }
    /// False when stop() was called before (it is idempotent).
    bool stop() {
        if (stopping_) return false;
        stopping_ = true;
        stopped_->set();
        if (running_ == 0) idle_->set();
        return true;
    }
    bool stopping() const noexcept { return stopping_; }
    cond stopped() const { return stopped_; }
    cond idle() const { return idle_; }

private:
    std::shared_ptr<flag> stopped_, idle_;
    std::size_t running_ = 0;
    bool stopping_ = false;
};

}  // namespace steadfast::primary
