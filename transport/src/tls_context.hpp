// The OpenSSL contexts behind tls_client_options and tls_server_options
// (private to the transport: Asio's ssl headers stay out of public ones).
#pragma once

#include <steadfast/transport/tls.hpp>

#include <boost/asio/ssl/context.hpp>

namespace steadfast::http::detail {

/// Throw std::invalid_argument naming the file that could not be used.
boost::asio::ssl::context make_client_context(const tls_client_options& o);
boost::asio::ssl::context make_server_context(const tls_server_options& o);

}  // namespace steadfast::http::detail
