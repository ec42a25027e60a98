#include "daemon.hpp"

#include "../common/options.hpp"
#include "../common/token_reload.hpp"
#include <common/token.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>

namespace asio = boost::asio;

namespace steadfast::secondary {

using app::level;

int serve(const options& o) {
    if (o.tls) app::warn_invalid_certificate(o.tls->cert_file, "--tls-cert (served on --listen)");
    // Before the service: its database thread's last completions are posted
    // here, so the loop outlives it.
    asio::io_context ioc{1};
    service_hooks hooks;
    hooks.ended = [&ioc] { ioc.stop(); };
    service* served = nullptr;  // set before start(), which wraps the handler
    hooks.wrap_messages = [&](http::router::handler inner) {
        return with_faults(std::move(inner), o.faults, ioc.get_executor(),
                           [&served](const std::string& r) { served->series().reject(r); });
    };
    service s(o, ioc.get_executor(),
              o.token_file.empty() ? std::vector<std::string>{} : app::read_token_file(o.token_file), {},
              std::move(hooks));
    served = &s;
    s.start();
    app::token_reloader reload(ioc.get_executor(), o.token_file, s.tokens());
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        app::log(level::info, "shutting_down", {{"signal", sig}});
        s.stop();
    });
    ioc.run();
    app::log(level::info, "stopped");
    return 0;
}

}  // namespace steadfast::secondary
