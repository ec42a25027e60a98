// An event loop a part owns (the daemons', each embedded node's): an
// io_context whose pending handlers (suspended coroutines) can be destroyed
// while what they refer to still exists, and a run that survives a handler's
// throw (logged; std::terminate otherwise, on a thread of the node's own).
#pragma once

#include <common/log.hpp>

#include <boost/asio/io_context.hpp>

#include <string>
#include <utility>

namespace steadfast::app {

struct event_loop : boost::asio::io_context {
    using boost::asio::execution_context::shutdown;
    using boost::asio::io_context::io_context;

    /// run() until it returns; a handler's throw is logged as `event` and the
    /// loop goes on.
    void run_logged(const std::string& event) {
        for (;;) {
            try {
                run();
                return;
            } catch (const std::exception& failure) {
                log(level::error, event, {{"error", failure.what()}});
            } catch (...) {
                log(level::error, event, {{"error", "not a std::exception"}});
            }
        }
    }
};

}  // namespace steadfast::app
