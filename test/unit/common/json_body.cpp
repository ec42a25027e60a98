// The header checks of a JSON body (common/json_body.hpp), shared by the
// primary's /publish and the secondary's /api/messages: the content type,
// an encoding that is not decoded, and headers given twice.
#include <common/json_body.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace steadfast;
using steadfast::app::refuse_json_body;

namespace {
http::request with(std::vector<http::header> headers) {
    http::request r;
    r.method = "POST";
    r.headers = std::move(headers);
    r.body = "{}";
    return r;
}
// The answer's status and body ("" and 0: let through).
std::pair<unsigned, std::string> answer(const http::request& r, std::initializer_list<std::string_view> once = {}) {
    auto a = refuse_json_body(r, once);
    return a ? std::pair{a->status, a->body} : std::pair{0u, std::string()};
}
bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(app_json_body)

BOOST_AUTO_TEST_CASE(a_body_without_a_length_is_411) {
    auto r = with({{"Content-Type", "application/json"}});
    r.body.clear();
    const auto [status, body] = answer(r);
    BOOST_TEST(status == 411u);
    BOOST_TEST(has(body, "Content-Length is required"), body);
    BOOST_TEST(refuse_json_body(r)->get("Connection").value_or("") == "close");  // the rest is no request
    r.headers.push_back({"Content-Length", "0"});  // said to be empty: the JSON check says why not
    BOOST_TEST(answer(r).first == 0u);
    r.headers = {{"Content-Type", "application/json"}, {"Transfer-Encoding", "chunked"}};
    BOOST_TEST(answer(r).first == 0u);
}

BOOST_AUTO_TEST_CASE(json_is_let_through_with_or_without_parameters) {
    BOOST_TEST(answer(with({{"Content-Type", "application/json"}})).first == 0u);
    BOOST_TEST(answer(with({{"content-type", "Application/JSON; charset=utf-8"}})).first == 0u);
    BOOST_TEST(answer(with({{"Content-Type", "application/json"}, {"Content-Encoding", "identity"}})).first == 0u);
    BOOST_TEST(answer(with({{"Content-Type", "application/json"}, {"Content-Encoding", " Identity "}})).first == 0u);
    BOOST_TEST(answer(with({{"Content-Type", "application/json"}, {"Content-Encoding", ""}})).first == 0u);
    BOOST_TEST(
        answer(with({{"Content-Type", "application/json"}, {"Idempotency-Key", "k"}}), {"Idempotency-Key"}).first ==
        0u);
}

BOOST_AUTO_TEST_CASE(another_or_no_content_type_is_415) {
    for (const auto& r :
         {with({}), with({{"Content-Type", "text/plain"}}), with({{"Content-Type", "application/jsonx"}})}) {
        const auto [status, body] = answer(r);
        BOOST_TEST(status == 415u);
        BOOST_TEST(has(body, "Content-Type must be application/json"), body);
    }
}

BOOST_AUTO_TEST_CASE(an_encoded_body_is_415_naming_the_encoding) {
    auto [status, body] = answer(with({{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}));
    BOOST_TEST(status == 415u);
    BOOST_TEST(has(body, "Content-Encoding \\\"gzip\\\" is not supported"), body);
    std::tie(status, body) = answer(
        with({{"Content-Encoding", "identity"}, {"Content-Type", "application/json"}, {"content-encoding", "br"}}));
    BOOST_TEST(status == 415u);
    BOOST_TEST(has(body, "\\\"br\\\""), body);
    // What is echoed is cut and printable.
    std::tie(status, body) =
        answer(with({{"Content-Type", "application/json"}, {"Content-Encoding", std::string(100, 'x') + "\x01"}}));
    BOOST_TEST(status == 415u);
    BOOST_TEST(has(body, std::string(40, 'x') + "\\\" is not"), body);
}

BOOST_AUTO_TEST_CASE(a_header_given_twice_is_400_naming_it) {
    auto [status, body] = answer(with({{"Content-Type", "application/json"}, {"Content-Type", "text/plain"}}));
    BOOST_TEST(status == 415u);  // (a 400 would read as the message's fault to a primary)
    BOOST_TEST(has(body, "Content-Type is given more than once"), body);
    std::tie(status, body) = answer(with({{"Content-Type", "text/plain"}, {"content-type", "application/json"}}));
    BOOST_TEST(status == 415u);  // whichever comes first
    std::tie(status, body) =
        answer(with({{"Content-Type", "application/json"}, {"Idempotency-Key", "a"}, {"idempotency-key", "b"}}),
               {"Idempotency-Key"});
    BOOST_TEST(status == 400u);
    BOOST_TEST(has(body, "Idempotency-Key is given more than once"), body);
    // Not named: not counted.
    BOOST_TEST(answer(with({{"Content-Type", "application/json"}, {"X-Trace", "a"}, {"X-Trace", "b"}})).first == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
