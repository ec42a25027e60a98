#include "listen.hpp"

namespace steadfast::app {

boost::asio::ip::tcp::endpoint listen(http::server& server, const std::string& host, std::uint16_t port) {
    try {
        return server.listen(host, port);
    } catch (const boost::system::system_error& e) {
        if (e.code() == boost::system::errc::address_not_available) throw;
        throw config_error(e.what());
    }
}

}  // namespace steadfast::app
