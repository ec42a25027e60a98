// What the engine says is wrong with a value, in a user's words: the engine
// names itself in its exceptions ("steadfast::backoff: ...") for a library's
// caller; a daemon's user gave a flag, and the pair's options a ladder.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace steadfast::app {

inline std::string engine_reason(const std::exception& e) {
    std::string_view why = e.what();
    constexpr std::string_view engine = "steadfast::backoff: ";
    if (why.substr(0, engine.size()) == engine) why.remove_prefix(engine.size());
    return std::string(why);
}

}  // namespace steadfast::app
