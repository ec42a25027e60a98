// A folder of a test's own under the system's temporary directory, removed
// with everything in it when the test ends. Declare it before what keeps
// files open in it (a database): members are destroyed in reverse order.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

namespace steadfast::test {

struct scratch_dir {
    std::filesystem::path path;
    explicit scratch_dir(std::string_view name)
        : path(std::filesystem::temp_directory_path() /
               ("steadfast-" + std::string(name) + "-" + std::to_string(std::random_device{}()))) {}
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
};

}  // namespace steadfast::test
