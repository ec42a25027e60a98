// Random ids in hex, from the system's random device: a data directory's
// instance (the primary's message ids) and a secondary's run (its
// X-Steadfast-Instance header).
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace steadfast::app {

inline std::string random_hex(std::size_t digits) {
    std::random_device rd;
    static constexpr char hex[] = "0123456789abcdef";
    std::string id;
    id.reserve(digits);
    for (std::size_t i = 0; i < digits; ++i) id += hex[rd() % 16];
    return id;
}

}  // namespace steadfast::app
