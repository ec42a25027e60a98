// One structured log line per notable event, as JSON on standard error:
//   {"ts":"2026-11-30T05:40:01.123Z","level":"info","app":"primary","event":"delivered","stream":"s","seq":12}
// Built on spdlog (Debian's libspdlog-dev): its async-safe sinks and level
// filtering; the line itself is a JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace steadfast::app {

enum class level { debug, info, warn, error };

/// Sets the program name put in every line and the minimum level (again
/// later, to change them).
void init_log(std::string_view app, level min = level::info);
void log(level l, std::string_view event, nlohmann::json fields = nlohmann::json::object());

}  // namespace steadfast::app
