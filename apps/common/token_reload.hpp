// SIGHUP reloads --token-file: the way to rotate a bearer token without a
// restart (see read_token_file). A bad file (unreadable, no token) is logged
// and the tokens in use stay. Without --token-file, SIGHUP is logged and
// ignored: it never ends the process.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/signal_set.hpp>

#include <string>
#include <vector>

namespace steadfast::app {

class token_reloader {
public:
    /// `tokens` is replaced on each good reload; read it on `ex` only.
    token_reloader(boost::asio::any_io_executor ex, std::string path, std::vector<std::string>& tokens);
    /// Leaves SIGHUP ignored (Asio would restore the default action, which ends the process).
    ~token_reloader();
    token_reloader(const token_reloader&) = delete;
    token_reloader& operator=(const token_reloader&) = delete;

private:
    void arm();
    boost::asio::signal_set signals_;
    std::string path_;
    std::vector<std::string>& tokens_;
};

}  // namespace steadfast::app
