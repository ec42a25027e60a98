// The names the pair gives NATS (a JetStream stream, a subject prefix, a
// durable consumer): one token, so that no name becomes a wildcard or a
// second level.
#pragma once

#include <string_view>

namespace steadfast::app {

/// 1 to 64 characters of A-Z a-z 0-9 _ -.
inline bool valid_nats_name(std::string_view v) {
    return !v.empty() && v.size() <= 64 &&
           v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") ==
               std::string_view::npos;
}

}  // namespace steadfast::app
