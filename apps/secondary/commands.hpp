// The secondary's offline commands: `dump`, `status` (read-only, beside a
// running server or on a read-only copy) and `set-fence` (the server stopped).
#pragma once

#include <cstdint>
#include <string>

namespace steadfast::secondary {

/// Every applied message, one JSON line each, in apply order.
int dump(const std::string& dir);
/// One JSON line: the fence, each stream's last seq, the count applied.
int status(const std::string& dir);
/// Sets the epoch fence (lowers one raised by mistake), logged.
int set_fence(const std::string& dir, std::uint64_t epoch);

}  // namespace steadfast::secondary
