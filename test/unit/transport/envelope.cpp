// Envelope decoding: every required field, type, range and limit.
#include <steadfast/transport/envelope.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

using namespace steadfast;

namespace {
std::string error_of(const std::string& body, const envelope::limits& l = {}) {
    auto r = envelope::decode(body, l);
    if (auto* e = std::get_if<envelope::decode_error>(&r)) return e->what;
    return "";
}
}  // namespace

BOOST_AUTO_TEST_SUITE(transport_envelope)

BOOST_AUTO_TEST_CASE(single_and_batch) {
    auto r = envelope::decode(R"({"id":"a-1","stream":"orders","seq":1,"payload":{"x":[1,2]}})");
    auto& m = std::get<envelope::message>(std::get<envelope::decoded>(r));
    BOOST_TEST(m.id == "a-1");
    BOOST_TEST(m.seq == 1u);
    BOOST_TEST(m.epoch == 0u);
    BOOST_TEST(m.payload["x"][1] == 2);
    auto b = envelope::decode(R"({"messages":[{"id":"a","stream":"s","seq":7,"epoch":2,"payload":null},
                                              {"id":"b","stream":"t","seq":1,"payload":1},
                                              {"id":"c","stream":"s","seq":8,"payload":"x"}]})");
    auto& batch = std::get<envelope::batch>(std::get<envelope::decoded>(b));
    BOOST_TEST(batch.messages.size() == 3u);
    BOOST_TEST(batch.messages[0].epoch == 2u);
    // Round trip.
    auto again = envelope::decode(envelope::encode(batch));
    BOOST_TEST(std::get<envelope::batch>(std::get<envelope::decoded>(again)).messages[2].payload == "x");
    BOOST_TEST(envelope::encode(m) == R"({"epoch":0,"id":"a-1","payload":{"x":[1,2]},"seq":1,"stream":"orders"})");
}

BOOST_AUTO_TEST_CASE(every_kind_of_bad_input_is_named) {
    BOOST_TEST(error_of("{").find("malformed JSON") == 0u);
    BOOST_TEST(error_of("[1]") == "an envelope must be a JSON object, got an array");
    BOOST_TEST(error_of(R"({"stream":"s","seq":1,"payload":1})") == "missing field \"id\"");
    BOOST_TEST(error_of(R"({"id":5,"stream":"s","seq":1,"payload":1})") == "\"id\" must be a string, got a number");
    BOOST_TEST(error_of(R"({"id":"","stream":"s","seq":1,"payload":1})") == "\"id\" must not be empty");
    BOOST_TEST(error_of(R"({"id":"a","seq":1,"payload":1})") == "missing field \"stream\"");
    BOOST_TEST(error_of(R"({"id":"a","stream":"a b","seq":1,"payload":1})").find("\"stream\" must be") == 0u);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","payload":1})") == "missing field \"seq\"");
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":0,"payload":1})").find("got 0") != std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":-3,"payload":1})").find("got a negative number") != std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1.5,"payload":1})").find("got a fraction") != std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":"1","payload":1})").find("got a string") != std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":99999999999999999999,"payload":1})").find("\"seq\" must be") == 0u);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1,"epoch":-1,"payload":1})").find("\"epoch\" must be") == 0u);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1})") == "missing field \"payload\"");
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1,"payload":1,"extra":2})") == "unknown field \"extra\"");
    BOOST_TEST(error_of(R"({"messages":[]})") == "\"messages\" must not be empty");
    BOOST_TEST(error_of(R"({"messages":{}})") == "\"messages\" must be an array, got an object");
    BOOST_TEST(error_of(R"({"messages":[1],"x":1})") == "a batch has only the field \"messages\"");
    BOOST_TEST(error_of(R"({"messages":[{"id":"a","stream":"s","seq":1,"payload":1},{"id":"b","stream":"s","seq":3,"payload":1}]})")
                   .find("messages[1]: seq 3 of stream \"s\" does not follow 1") == 0u);
    BOOST_TEST(error_of(R"({"messages":[{"id":"a","stream":"s","seq":1,"payload":1},{"id":"a","stream":"t","seq":1,"payload":1}]})")
                   .find("duplicate id") != std::string::npos);
    BOOST_TEST(error_of(R"({"messages":[{"id":"a","stream":"s","seq":1}]})") == "messages[0]: missing field \"payload\"");
}

BOOST_AUTO_TEST_CASE(size_and_depth_limits) {
    envelope::limits l;
    l.max_body_bytes = 64;
    BOOST_TEST(error_of(std::string(100, ' '), l).find("over the limit of 64") != std::string::npos);
    std::string deep = R"({"id":"a","stream":"s","seq":1,"payload":)" + std::string(100, '[') + std::string(100, ']') + "}";
    BOOST_TEST(error_of(deep).find("nested deeper than 64") != std::string::npos);
    std::string huge_deep(200'000, '[');
    BOOST_TEST(error_of(huge_deep).find("nested deeper") != std::string::npos);  // no stack overflow
    l = {};
    l.max_id_bytes = 4;
    BOOST_TEST(error_of(R"({"id":"abcdef","stream":"s","seq":1,"payload":1})", l).find("longer than 4") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
