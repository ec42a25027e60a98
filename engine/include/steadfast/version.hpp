// steadfast's version: the one place it is written. CMake reads it from here
// (project(VERSION)), the binaries print it (--version) and export it
// (steadfast_build_info).
#pragma once

#define STEADFAST_VERSION_MAJOR 0
#define STEADFAST_VERSION_MINOR 2
#define STEADFAST_VERSION_PATCH 0
#define STEADFAST_VERSION_STRING "0.2.0"

namespace steadfast {
inline constexpr const char* version = STEADFAST_VERSION_STRING;
}  // namespace steadfast
