#include "retention.hpp"

#include <common/log.hpp>
#include <common/release_memory.hpp>
#include <primary/config.hpp>

#include <algorithm>

namespace steadfast::primary {

using namespace std::chrono_literals;

void retention::start() {
    timer_.expires_after(std::clamp<std::chrono::milliseconds>(retain_ / 4, 100ms, 10s));
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || stopped_) return;
        purge();
        start();
    });
}

void retention::purge() {
    if (retired_ >= 100) {
        retired_ = 0;
        app::release_free_memory();
    }
    const std::int64_t cutoff = now_ms() - retain_.count();
    worker_.post(
        [this, cutoff](app::database&) {
            out_.purge(cutoff);
            return true;
        },
        [](const app::db_failure* err) {
            if (err) app::log(app::level::error, "purge_failed", {{"error", err->what}});
        });
}

}  // namespace steadfast::primary
