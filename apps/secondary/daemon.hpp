// steadfast-secondary serving: the library's service (secondary/service.hpp)
// in a process of its own: its event loop, signals, the token file's reload,
// and fault injection around the messages' handler.
#pragma once

#include "faults.hpp"
#include <common/log.hpp>
#include <secondary/service.hpp>

#include <string>

namespace steadfast::secondary {

/// The daemon's settings: the service's and its own.
struct options : service_options {
    std::string token_file;
    fault_options faults;  // --fault-rate, --fault-status, --drop-rate, --delay
    app::level log_level = app::level::info;
};

/// Serves until SIGTERM or SIGINT; the exit code.
int serve(const options& o);

}  // namespace steadfast::secondary
