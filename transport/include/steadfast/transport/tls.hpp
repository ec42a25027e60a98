// TLS settings of the HTTP client and server (OpenSSL through Asio's ssl and
// Beast's ssl_stream; neither appears in this header).
#pragma once

#include <string>

namespace steadfast::http {

/// A client's TLS (https:// URLs). The server's certificate chain is verified
/// against `ca_file` (PEM; empty: the system's trust store) and its name
/// against the URL's host, or `server_name` when set (also sent as SNI, unless
/// it is an IP address). With `cert_file` and `key_file` the client presents a
/// certificate (mutual TLS). TLS 1.2 or later.
struct tls_client_options {
    std::string ca_file;
    std::string cert_file, key_file;
    std::string server_name;
};

/// A server's TLS: its certificate chain and key (PEM). With `client_ca_file`
/// every client must present a certificate signed by that CA (mutual TLS);
/// a client without one fails the handshake. TLS 1.2 or later.
struct tls_server_options {
    std::string cert_file, key_file;
    std::string client_ca_file;
};

/// Loads the files as the client or server would, so that a daemon can refuse
/// a bad path or PEM at start. Throws std::invalid_argument naming the file
/// and what is wrong with it.
void check_tls(const tls_client_options& o);
void check_tls(const tls_server_options& o);

/// Why the first certificate in `cert_file` is not valid now ("expired on
/// Dec  3 22:00:00 2026 GMT", "not valid before ..."), or "" when it is (or
/// cannot be read: check_tls says so).
std::string certificate_validity_problem(const std::string& cert_file);

}  // namespace steadfast::http
