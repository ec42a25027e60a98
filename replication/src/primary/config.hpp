// What every part of the primary shares: its settings (primary_config, as
// the embedding program or the daemon's flags set them) and the wall clock.
#pragma once

#include <steadfast/replication/primary_node.hpp>

#include <cstdint>
#include <string_view>

namespace steadfast::primary {

using replication::primary_config;

/// Milliseconds since the epoch (the outbox's timestamps).
std::int64_t now_ms();

/// Over JetStream a stream's name becomes subject tokens: no empty one.
bool valid_subject_tokens(std::string_view stream);

}  // namespace steadfast::primary
