#include "outbox_health.hpp"

#include <common/log.hpp>

namespace steadfast::primary {

using app::level;

outbox_health::outbox_health(boost::asio::any_io_executor ex, const std::string& dir, std::uint64_t min_free,
                             metrics& m, notes n)
    : m_(m),
      notes_(std::move(n)),
      storage_(std::move(ex), {dir, min_free}, [this](bool ok, const std::string& why) { changed(ok, why); }) {
    m_.storage_ok.Set(1);
}

void outbox_health::publish_failed(const std::string& stream, const std::string& error) {
    ++failed_;
    storage_.commit_failed(error);  // checks the watermark again
    // (Held back: counted in the next line, or in storage_recovered.)
    app::log_limited(
        failures_logged_, level::error, "publish_failed",
        {{"stream", stream}, {"error", error}, {"note", notes_.failed + "; at most one such line a second"}});
}

void outbox_health::changed(bool ok, const std::string& why) {
    m_.storage_ok.Set(ok ? 1 : 0);
    if (!ok) {
        nlohmann::json f = storage_.failure_fields(why);
        if (why == app::storage_health::low_disk_space) f["note"] = notes_.disk_low;
        app::log(level::error, app::storage_health::storage_failed, std::move(f));
        return;
    }
    app::log(level::info, "storage_recovered", {{"failed_publishes", failed_}});
    failed_ = 0;
    failures_logged_.reset();
}

}  // namespace steadfast::primary
