// The classification table, Retry-After parsing, routing and address parsing: no sockets.
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;

namespace {
verdict kind_of(unsigned status) {
    return http::classify(http::outcome{http::response::error(status, "x")}, {}).kind;
}
verdict kind_of(error_code ec, bool sent, bool repeatable) {
    return http::classify(http::outcome{http::transport_error{ec, http::phase::read, sent, {}}},
                          {.retry_500 = true, .repeatable = repeatable})
        .kind;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(transport_classify)

BOOST_AUTO_TEST_CASE(statuses) {
    for (unsigned s : {200u, 201u, 202u, 204u}) BOOST_TEST((kind_of(s) == verdict::success));
    for (unsigned s : {408u, 429u, 500u, 502u, 503u, 504u}) BOOST_TEST((kind_of(s) == verdict::retryable), s);
    for (unsigned s : {301u, 400u, 401u, 403u, 404u, 409u, 413u, 415u, 422u, 501u, 505u})
        BOOST_TEST((kind_of(s) == verdict::permanent), s);
}

// The edges of the table: 199 and 300 are not successes, 299 is.
BOOST_AUTO_TEST_CASE(status_boundaries) {
    BOOST_TEST((kind_of(299u) == verdict::success));
    BOOST_TEST((kind_of(300u) == verdict::permanent));
    BOOST_TEST((kind_of(199u) == verdict::permanent));
    BOOST_TEST((kind_of(407u) == verdict::permanent));
    BOOST_TEST((kind_of(505u) == verdict::permanent));
    // 500 only when the options say so.
    BOOST_TEST((http::classify(http::outcome{http::response::error(500, "x")}, {.retry_500 = false}).kind ==
                verdict::permanent));
}

// Every transient network error, one by one: retryable unsent, and sent
// only when the request may be repeated. (A connection the peer closed,
// eof, is the commonest: a restarted server.)
BOOST_AUTO_TEST_CASE(each_transient_error) {
    namespace e = asio::error;
    for (error_code ec :
         {error_code(e::connection_refused), error_code(e::connection_reset), error_code(e::connection_aborted),
          error_code(e::broken_pipe), error_code(e::timed_out), error_code(e::network_unreachable),
          error_code(e::host_unreachable), error_code(e::network_down), error_code(e::network_reset),
          error_code(e::eof), error_code(e::try_again), error_code(e::host_not_found_try_again),
          error_code(boost::beast::error::timeout), error_code(boost::beast::http::error::end_of_stream),
          error_code(boost::beast::http::error::partial_message)}) {
        BOOST_TEST((kind_of(ec, false, false) == verdict::retryable), ec.message());
        BOOST_TEST((kind_of(ec, true, true) == verdict::retryable), ec.message());
        BOOST_TEST((kind_of(ec, true, false) == verdict::permanent), ec.message());
    }
    // Not transient: permanent even unsent.
    for (error_code ec : {error_code(e::host_not_found), error_code(e::access_denied), error_code(e::no_data)})
        BOOST_TEST((kind_of(ec, false, true) == verdict::permanent), ec.message());
    BOOST_TEST((kind_of(e::operation_aborted, false, true) == verdict::cancelled));
}

BOOST_AUTO_TEST_CASE(transport_failures) {
    // Not sent: always retryable.
    BOOST_TEST((kind_of(asio::error::connection_refused, false, false) == verdict::retryable));
    BOOST_TEST((kind_of(boost::beast::error::timeout, false, false) == verdict::retryable));
    BOOST_TEST((kind_of(asio::error::host_not_found_try_again, false, false) == verdict::retryable));
    // Sent: only when the request may be repeated.
    for (error_code ec :
         {error_code(asio::error::connection_reset), error_code(asio::error::broken_pipe),
          error_code(boost::beast::error::timeout), error_code(boost::beast::http::error::partial_message),
          error_code(boost::beast::http::error::bad_version)}) {
        BOOST_TEST((kind_of(ec, true, true) == verdict::retryable), ec.message());
        BOOST_TEST((kind_of(ec, true, false) == verdict::permanent), ec.message());
    }
    BOOST_TEST((kind_of(asio::error::host_not_found, false, true) == verdict::permanent));
    BOOST_TEST((kind_of(asio::error::operation_aborted, true, true) == verdict::cancelled));
    // Idempotent methods and Idempotency-Key make a request repeatable.
    http::outcome reset{http::transport_error{asio::error::connection_reset, http::phase::read, true, {}}};
    BOOST_TEST((http::make_classifier(http::request{"PUT", "/", {}, {}})(reset).kind == verdict::retryable));
    BOOST_TEST((http::make_classifier(http::request{"POST", "/", {}, {}})(reset).kind == verdict::permanent));
    BOOST_TEST((http::make_classifier(http::request{"POST", "/", {{"idempotency-key", "k"}}, {}})(reset).kind ==
                verdict::retryable));
}

BOOST_AUTO_TEST_CASE(retry_after_forms) {
    const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
    auto secs = [](auto d) { return std::chrono::duration_cast<std::chrono::seconds>(*d).count(); };
    BOOST_TEST(secs(http::parse_retry_after("120", now)) == 120);
    BOOST_TEST(secs(http::parse_retry_after(" 0 ", now)) == 0);
    BOOST_TEST(secs(http::parse_retry_after("Sun, 06 Nov 1994 08:51:37 GMT", now)) == 120);
    BOOST_TEST(secs(http::parse_retry_after("Sunday, 06-Nov-94 08:50:37 GMT", now)) == 60);
    BOOST_TEST(secs(http::parse_retry_after("Sun Nov  6 08:49:47 1994", now)) == 10);
    BOOST_TEST(secs(http::parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", now)) == 0);  // past
    BOOST_TEST(!http::parse_retry_after("soon", now).has_value());
    BOOST_TEST(!http::parse_retry_after("-5", now).has_value());
    BOOST_TEST(!http::parse_retry_after("Sun, 06 Foo 1994 08:49:37 GMT", now).has_value());
    BOOST_TEST(secs(http::parse_retry_after("99999999999999999999999", now)) > 3600);  // absurd: the caller bounds it
    // A 503 carries its Retry-After as the delay hint.
    auto r = http::response::error(503, "busy");
    r.set("Retry-After", "7");
    auto c = http::classify(http::outcome{r}, {});
    BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(*c.delay_hint).count() == 7);
}

BOOST_AUTO_TEST_CASE(routing_and_addresses) {
    http::router r;
    r.add("GET", "/health", {}).add("POST", "/publish", {});
    http::response err;
    BOOST_TEST(r.find("POST", "/publish?stream=a", err) != nullptr);
    BOOST_TEST(r.find("GET", "/publish", err) == nullptr);
    BOOST_TEST(err.status == 405u);
    BOOST_TEST(*err.get("allow") == "POST");
    BOOST_TEST(r.find("GET", "/nope", err) == nullptr);
    BOOST_TEST(err.status == 404u);
    BOOST_TEST(*http::query_param("/publish?a=1&stream=orders", "stream") == "orders");
    BOOST_TEST(!http::query_param("/publish", "stream").has_value());

    auto [h, p] = http::parse_listen_address("127.0.0.1:8080");
    BOOST_TEST(h == "127.0.0.1");
    BOOST_TEST(p == 8080);
    BOOST_TEST(http::parse_listen_address("[::1]:9").first == "::1");
    BOOST_CHECK_THROW(http::parse_listen_address("127.0.0.1"), std::invalid_argument);
    BOOST_CHECK_THROW(http::parse_listen_address("127.0.0.1:70000"), std::invalid_argument);
    BOOST_CHECK_THROW(http::parse_listen_address("127.0.0.1:http"), std::invalid_argument);

    auto o = http::client::from_url("http://127.0.0.1:9000");
    BOOST_TEST(o.host == "127.0.0.1");
    BOOST_TEST(o.port == "9000");
    BOOST_TEST(http::client::from_url("https://x:1").tls.has_value());  // https: TLS (see transport_tls)
    BOOST_CHECK_THROW(http::client::from_url("ftp://x:1"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://x:0"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://:80"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(urls_and_query_parameters_are_decoded) {
    BOOST_TEST(*http::query_param("/publish?stream=a%2Eb", "stream") == "a.b");
    BOOST_TEST(*http::query_param("/publish?x=1&stream=%6Frders&y", "stream") == "orders");
    BOOST_TEST(*http::query_param("/publish?stream=a+b", "stream") == "a b");  // refused later by the name check
    BOOST_TEST(*http::query_param("/publish?stream=", "stream") == "");
    BOOST_TEST(!http::query_param("/publish?streams=a", "stream").has_value());
    BOOST_TEST(http::query_param_count("/publish?stream=a&x=1&stream=b", "stream") == 2u);
    BOOST_TEST(http::query_param_count("/publish?stream=%61", "stream") == 1u);
    BOOST_TEST(http::query_param_count("/publish?streams=a", "stream") == 0u);
    BOOST_TEST(http::query_param_count("/publish?stream=a&stream=b&x=%zz", "stream") == 2u);  // not origin-form
    BOOST_TEST(http::query_param_count("/publish?stream=a&x=%zz", "stream") == 1u);
    // Not valid origin-form: the raw value, for the caller's check to refuse.
    BOOST_TEST(*http::query_param("/publish?stream=a b", "stream") == "a b");
    // What /publish refuses by name: anything but the known names, exactly spelt, each once.
    BOOST_TEST(http::unknown_query_params("/publish", {"stream"}) == "");
    BOOST_TEST(http::unknown_query_params("/publish?", {"stream"}) == "");
    BOOST_TEST(http::unknown_query_params("/publish?stream=a&", {"stream"}) == "");
    BOOST_TEST(http::unknown_query_params("/publish?stream=a", {"stream"}) == "");
    BOOST_TEST(http::unknown_query_params("/publish?strem=a", {"stream"}) == "strem");
    BOOST_TEST(http::unknown_query_params("/publish?STREAM=a", {"stream"}) == "STREAM");
    BOOST_TEST(http::unknown_query_params("/publish?x=1&stream=a&y&x=2", {"stream"}) == "x, y");
    BOOST_TEST(http::unknown_query_params("/publish?%73tream=a", {"stream"}) == "");  // decoded: "stream"
    BOOST_TEST(http::unknown_query_params("/publish?=a", {"stream"}) == "\"\"");
    BOOST_TEST(http::unknown_query_params("/publish?x=%zz&stream=a", {"stream"}) == "x");  // not origin-form

    auto v6 = http::client::from_url("http://[::1]:9000/");
    BOOST_TEST(v6.host == "::1");
    BOOST_TEST(v6.port == "9000");
    BOOST_TEST(http::client::from_url("http://example.org").port == "80");
    BOOST_TEST(http::client::from_url("HTTPS://Example.org").port == "443");
    BOOST_TEST(http::client::from_url("http://www%2Droot.example/").host == "www-root.example");
    BOOST_CHECK_THROW(http::client::from_url("http://user:pw@example.org"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://example.org/api"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://example.org/?q=1"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://example.org:99999"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("http://[::1"), std::invalid_argument);
    BOOST_CHECK_THROW(http::client::from_url("127.0.0.1:9000"), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
