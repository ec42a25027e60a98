// TLS contexts from tls_client_options / tls_server_options, with errors that
// name the file (OpenSSL's own messages say "No such file" without a path).
#include "tls_context.hpp"

#include <boost/system/system_error.hpp>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <stdexcept>

namespace steadfast::http {

namespace ssl = boost::asio::ssl;

namespace {
// Runs `load`, turning a failure into invalid_argument naming `what` and `path`.
template <class Load>
void load_file(const char* what, const std::string& path, Load load) {
    if (!std::ifstream(path)) throw std::invalid_argument(std::string(what) + " \"" + path + "\": cannot be read");
    try {
        load();
    } catch (const boost::system::system_error& e) {
        throw std::invalid_argument(std::string(what) + " \"" + path + "\": " + e.code().message());
    }
}

ssl::context base_context(ssl::context::method m) {
    ssl::context ctx(m);
    // TLS 1.2 and later only; no compression, no renegotiation.
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                    ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression);
    return ctx;
}
}  // namespace

namespace detail {

ssl::context make_client_context(const tls_client_options& o) {
    ssl::context ctx = base_context(ssl::context::tls_client);
    ctx.set_verify_mode(ssl::verify_peer);
    if (o.ca_file.empty()) {
        ctx.set_default_verify_paths();
    } else {
        load_file("TLS CA file", o.ca_file, [&] { ctx.load_verify_file(o.ca_file); });
    }
    if (o.cert_file.empty() != o.key_file.empty())
        throw std::invalid_argument("a TLS client certificate needs both a certificate file and a key file");
    if (!o.cert_file.empty()) {
        load_file("TLS client certificate", o.cert_file, [&] { ctx.use_certificate_chain_file(o.cert_file); });
        load_file("TLS client key", o.key_file, [&] { ctx.use_private_key_file(o.key_file, ssl::context::pem); });
    }
    return ctx;
}

ssl::context make_server_context(const tls_server_options& o) {
    if (o.cert_file.empty() || o.key_file.empty())
        throw std::invalid_argument("a TLS server needs both a certificate file and a key file");
    ssl::context ctx = base_context(ssl::context::tls_server);
    load_file("TLS certificate", o.cert_file, [&] { ctx.use_certificate_chain_file(o.cert_file); });
    load_file("TLS key", o.key_file, [&] { ctx.use_private_key_file(o.key_file, ssl::context::pem); });
    if (!o.client_ca_file.empty()) {
        load_file("TLS client CA file", o.client_ca_file, [&] { ctx.load_verify_file(o.client_ca_file); });
        ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    return ctx;
}

}  // namespace detail

std::string certificate_validity_problem(const std::string& cert_file) {
    BIO* bio = BIO_new_file(cert_file.c_str(), "r");
    if (!bio) return {};
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!cert) return {};
    auto when = [](const ASN1_TIME* t) {
        std::string out;
        BIO* m = BIO_new(BIO_s_mem());
        if (m && ASN1_TIME_print(m, t) == 1) {
            char* data = nullptr;
            const long n = BIO_get_mem_data(m, &data);
            if (n > 0) out.assign(data, static_cast<std::size_t>(n));
        }
        BIO_free(m);
        return out;
    };
    std::string problem;
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
        problem = "expired on " + when(X509_get0_notAfter(cert));
    else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0)
        problem = "not valid before " + when(X509_get0_notBefore(cert));
    X509_free(cert);
    return problem;
}

void check_tls(const tls_client_options& o) {
    (void)detail::make_client_context(o);
}
void check_tls(const tls_server_options& o) {
    (void)detail::make_server_context(o);
}

}  // namespace steadfast::http
