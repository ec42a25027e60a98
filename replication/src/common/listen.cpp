#include "listen.hpp"

#include "log.hpp"
#include "token.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace steadfast::app {

boost::asio::ip::tcp::endpoint listen(http::server& server, const std::string& host, std::uint16_t port) {
    try {
        return server.listen(host, port);
    } catch (const boost::system::system_error& e) {
        if (e.code() == boost::system::errc::address_not_available) throw;
        throw config_error(e.what());
    }
}

void report_accept_failures(http::server::options& so) {
    so.accept_failed = [limiter = std::make_shared<log_limiter>()](const boost::system::error_code& ec) {
        const auto held = limiter->allow();
        if (!held) return;
        // The system's errors by number, the category by its address: out
        // of descriptors, UBSan cannot check an access to a polymorphic
        // object it has not seen before (its check opens a pipe), and
        // reports one.
        const bool system = &ec.category() == &boost::system::system_category();
        const bool descriptors = system && (ec.value() == EMFILE || ec.value() == ENFILE);
        log(level::error, "accept_failed",
            {{"error", system ? std::string(std::strerror(ec.value())) : ec.message()},
             {"also_failed_since_last_line", *held},
             {"hint", descriptors ? "out of file descriptors: raise the limit (LimitNOFILE in the unit, ulimit -n) or "
                                    "lower --max-connections; new connections wait until one is free"
                                  : "new connections wait in the backlog; accepting is tried again every 50 ms"}});
    };
}

void refuse_unauthorized_at_header(http::server::options& so, std::function<const std::vector<std::string>&()> tokens,
                                   std::function<void()> refused) {
    so.before_continue = [tokens = std::move(tokens), refused = std::move(refused),
                          open = so.reserved_paths](const http::request& header) -> std::optional<http::response> {
        if (std::find(open.begin(), open.end(), http::path_of(header.target)) != open.end()) return std::nullopt;
        auto denied = refuse_unauthorized(header, tokens());
        if (denied && refused) refused();
        return denied;
    };
}

}  // namespace steadfast::app
