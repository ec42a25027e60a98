#include "token_reload.hpp"

#include <common/log.hpp>
#include <common/token.hpp>

#include <csignal>
#include <exception>

namespace steadfast::app {

token_reloader::token_reloader(boost::asio::any_io_executor ex, std::string path, std::vector<std::string>& tokens,
                               std::function<void()> after)
    : signals_(ex, SIGHUP), path_(std::move(path)), tokens_(tokens), after_(std::move(after)) {
    arm();
}

token_reloader::~token_reloader() {
    boost::system::error_code ec;
    signals_.clear(ec);            // Asio puts back SIG_DFL here...
    std::signal(SIGHUP, SIG_IGN);  // ...and SIGHUP during the rest of shutdown is ignored
}

void token_reloader::arm() {
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
        if (ec) return;  // shutting down
        if (path_.empty()) {
            if (!after_) log(level::warn, "sighup_ignored", {{"reason", "no --token-file to reload"}});
        } else {
            try {
                auto fresh = read_token_file(path_);
                const auto count = fresh.size();
                tokens_ = std::move(fresh);
                log(level::info, "tokens_reloaded", {{"file", path_}, {"tokens", count}});
            } catch (const std::exception& e) {
                log(level::error, "tokens_reload_failed",
                    {{"error", e.what()}, {"tokens_in_use", tokens_.size()}, {"note", "the tokens in use stay"}});
            }
        }
        if (after_) after_();
        arm();
    });
}

}  // namespace steadfast::app
