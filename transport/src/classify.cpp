// The HTTP failure classification table (README "Failure classification").
#include <steadfast/transport/classify.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

#include <string>

namespace steadfast::http {

namespace {
class status_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "http-status"; }
    std::string message(int ev) const override { return "HTTP status " + std::to_string(ev); }
};

bool is_transient_network_error(const error_code& ec) {
    namespace e = boost::asio::error;
    return ec == e::connection_refused || ec == e::connection_reset || ec == e::connection_aborted ||
           ec == e::broken_pipe || ec == e::timed_out || ec == e::network_unreachable || ec == e::host_unreachable ||
           ec == e::network_down || ec == e::network_reset || ec == e::eof || ec == e::try_again ||
           ec == e::host_not_found_try_again || ec == boost::beast::error::timeout ||
           ec == boost::beast::http::error::end_of_stream || ec == boost::beast::http::error::partial_message ||
           // TLS: the peer closed without close_notify (a restart, a proxy). Any
           // other TLS error (a certificate, a name, a protocol mismatch) is
           // permanent: retrying cannot fix the configuration.
           ec == boost::asio::ssl::error::stream_truncated ||
           // A garbage answer: the parser's errors. Retrying may well get a good one.
           ec.category() ==
               make_error_code(boost::beast::http::error::bad_version).category();  // the whole http::error category
}
}  // namespace

bool is_tls_error(const error_code& ec) noexcept {
    // OpenSSL's own errors only: the TLS stream's stream_truncated is a
    // dropped connection like any other.
    return ec && ec.category() == boost::asio::error::get_ssl_category();
}

error_code status_error(unsigned status) {
    static const status_category_impl cat;
    return {static_cast<int>(status), cat};
}

classification classify(const outcome& o, const classifier_options& opts, std::chrono::system_clock::time_point now) {
    if (o.has_response()) {
        const response& r = o.res();
        if (r.status >= 200 && r.status < 300) return classification::success();
        const bool retryable = r.status == 408 || r.status == 429 || r.status == 502 || r.status == 503 ||
                               r.status == 504 || (r.status == 500 && opts.retry_500);
        if (!retryable) return classification::permanent(status_error(r.status));
        std::optional<std::chrono::nanoseconds> hint;
        if (auto ra = r.get("Retry-After")) hint = parse_retry_after(*ra, now);
        return classification::retryable(status_error(r.status), hint);
    }
    const transport_error& t = o.error();
    if (t.ec == boost::asio::error::operation_aborted) return classification::cancelled(t.ec);
    if (t.ec == boost::asio::error::host_not_found || t.ec == boost::asio::error::no_data ||
        t.ec == boost::asio::error::service_not_found)
        return classification::permanent(t.ec);
    if (!is_transient_network_error(t.ec)) return classification::permanent(t.ec);
    if (t.request_sent && !opts.repeatable) return classification::permanent(t.ec);
    return classification::retryable(t.ec);
}

std::function<classification(const outcome&)> make_classifier(const request& req, classifier_options opts) {
    opts.repeatable = opts.repeatable || is_idempotent_method(req.method) || req.get("Idempotency-Key").has_value();
    return [opts](const outcome& o) { return classify(o, opts); };
}

}  // namespace steadfast::http
