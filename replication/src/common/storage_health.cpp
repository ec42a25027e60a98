#include "storage_health.hpp"

#include <nlohmann/json.hpp>

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

namespace steadfast::app {

std::optional<std::uint64_t> available_bytes(const std::string& dir, std::string& error) {
    struct statvfs v {};
    if (::statvfs(dir.c_str(), &v) != 0) {
        error = "statvfs(\"" + dir + "\"): " + std::strerror(errno);
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(v.f_bavail) * static_cast<std::uint64_t>(v.f_frsize);
}

storage_health::storage_health(boost::asio::any_io_executor ex, settings s, on_change cb)
    : s_(std::move(s)), cb_(std::move(cb)), timer_(std::move(ex)) {}

void storage_health::start() {
    stopped_ = false;
    check_disk();
    if (s_.min_free > 0) arm();
}

void storage_health::stop() {
    stopped_ = true;
    timer_.cancel();
}

void storage_health::arm() {
    timer_.expires_after(s_.every);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || stopped_) return;
        check_disk();
        arm();
    });
}

bool storage_health::check_disk() {
    std::string error;
    const auto free = s_.free_space(s_.dir, error);
    // A filesystem that cannot say how full it is is not called full: the
    // commits themselves still tell.
    if (!free) return disk_low_;
    available_ = *free;
    if (s_.min_free == 0) return false;
    update(available_ < s_.min_free, commit_failing_, low_disk_space);
    return disk_low_;
}

bool storage_health::disk_low_now() {
    if (s_.min_free == 0) return false;
    if (disk_low_ || available_ / 2 < s_.min_free) return check_disk();
    return false;
}

void storage_health::commit_failed(const std::string& error) {
    update(disk_low_, true, error);
    check_disk();  // a full disk is the likeliest cause: its answer (507/503) follows from this
}

void storage_health::commit_ok() {
    update(disk_low_, false, {});
}

void storage_health::update(bool disk_low, bool commit_failing, const std::string& why) {
    const bool was = ok();
    disk_low_ = disk_low;
    commit_failing_ = commit_failing;
    if (ok() != was && cb_) cb_(ok(), ok() ? std::string{} : why);
}

std::string storage_health::low_message() const {
    return "the data directory's filesystem has " + std::to_string(available_) +
           " bytes free, under --min-free-space (" + std::to_string(s_.min_free) +
           " bytes): nothing is stored until space is freed";
}

nlohmann::json storage_health::failure_fields(const std::string& why) const {
    if (why != low_disk_space) return {{"error", why}};
    return {{"error", "low disk space"}, {"available", available_}, {"min_free_space", s_.min_free}};
}

}  // namespace steadfast::app
