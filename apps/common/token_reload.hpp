// SIGHUP reloads --token-file: the way to rotate a bearer token without a
// restart (see read_token_file). A bad file (unreadable, no token) is logged
// and the tokens in use stay. Without --token-file, SIGHUP is logged and
// ignored: it never ends the process. The owner may add what else SIGHUP
// does (the primary: every stream waiting for a ladder step tries again).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <string>
#include <vector>

namespace steadfast::app {

class token_reloader {
public:
    /// `tokens` is replaced on each good reload; read it on `ex` only.
    /// `after` (if any) runs on `ex` after every SIGHUP, reloaded or not.
    token_reloader(boost::asio::any_io_executor ex, std::string path, std::vector<std::string>& tokens,
                   std::function<void()> after = {});
    /// Leaves SIGHUP ignored (Asio would restore the default action, which ends the process).
    ~token_reloader();
    token_reloader(const token_reloader&) = delete;
    token_reloader& operator=(const token_reloader&) = delete;

private:
    void arm();
    boost::asio::signal_set signals_;
    std::string path_;
    std::vector<std::string>& tokens_;
    std::function<void()> after_;
};

}  // namespace steadfast::app
