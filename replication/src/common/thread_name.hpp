// Names the calling thread, so that `top -H`, `ps -L` and perf tell the
// event loop, the database thread and a reader apart (Linux: at most 15
// characters; longer names are cut).
#pragma once

#include <pthread.h>

#include <string>

namespace steadfast::app {

inline void name_this_thread(const std::string& name) {
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace steadfast::app
