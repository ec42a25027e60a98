// Envelope decoding: every required field, type, range and limit.
#include <steadfast/replication/envelope.hpp>

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

BOOST_AUTO_TEST_SUITE(replication_envelope)

BOOST_AUTO_TEST_CASE(single_and_batch) {
    auto r = envelope::decode(R"({"id":"a-1","stream":"orders","seq":1,"payload":{"x":[1,2]}})");
    auto& m = std::get<envelope::message>(std::get<envelope::decoded>(r));
    BOOST_TEST(m.id == "a-1");
    BOOST_TEST(m.seq == 1u);
    BOOST_TEST(m.epoch == 0u);
    BOOST_TEST(m.payload == R"({"x":[1,2]})");
    auto b = envelope::decode(R"({"messages":[{"id":"a","stream":"s","seq":7,"epoch":2,"payload":null},
                                              {"id":"b","stream":"t","seq":1,"payload":1},
                                              {"id":"c","stream":"s","seq":8,"payload":"x"}]})");
    auto& batch = std::get<envelope::batch>(std::get<envelope::decoded>(b));
    BOOST_TEST(batch.messages.size() == 3u);
    BOOST_TEST(batch.messages[0].epoch == 2u);
    // Round trip.
    auto again = envelope::decode(envelope::encode(batch));
    BOOST_TEST(std::get<envelope::batch>(std::get<envelope::decoded>(again)).messages[2].payload == "\"x\"");
    BOOST_TEST(envelope::encode(m) == R"({"id":"a-1","stream":"orders","seq":1,"epoch":0,"payload":{"x":[1,2]}})");
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
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":-3,"payload":1})").find("got a negative number") !=
               std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1.5,"payload":1})").find("got a fraction") !=
               std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":"1","payload":1})").find("got a string") != std::string::npos);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":99999999999999999999,"payload":1})").find("\"seq\" must be") ==
               0u);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1,"epoch":-1,"payload":1})").find("\"epoch\" must be") == 0u);
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1})") == "missing field \"payload\"");
    BOOST_TEST(error_of(R"({"id":"a","stream":"s","seq":1,"payload":1,"extra":2})") == "unknown field \"extra\"");
    BOOST_TEST(error_of(R"({"messages":[]})") == "\"messages\" must not be empty");
    BOOST_TEST(error_of(R"({"messages":{}})") == "\"messages\" must be an array, got an object");
    BOOST_TEST(error_of(R"({"messages":[1],"x":1})") == "a batch has only the field \"messages\"");
    BOOST_TEST(
        error_of(
            R"({"messages":[{"id":"a","stream":"s","seq":1,"payload":1},{"id":"b","stream":"s","seq":3,"payload":1}]})")
            .find("messages[1]: seq 3 of stream \"s\" does not follow 1") == 0u);
    BOOST_TEST(
        error_of(
            R"({"messages":[{"id":"a","stream":"s","seq":1,"payload":1},{"id":"a","stream":"t","seq":1,"payload":1}]})")
            .find("duplicate id") != std::string::npos);
    BOOST_TEST(error_of(R"({"messages":[{"id":"a","stream":"s","seq":1}]})") ==
               "messages[0]: missing field \"payload\"");
}

BOOST_AUTO_TEST_CASE(size_and_depth_limits) {
    envelope::limits l;
    l.max_body_bytes = 64;
    BOOST_TEST(error_of(std::string(100, ' '), l).find("over the limit of 64") != std::string::npos);
    std::string deep =
        R"({"id":"a","stream":"s","seq":1,"payload":)" + std::string(100, '[') + std::string(100, ']') + "}";
    BOOST_TEST(error_of(deep).find("nested deeper than 64") != std::string::npos);
    std::string huge_deep(200'000, '[');
    BOOST_TEST(error_of(huge_deep).find("nested deeper") != std::string::npos);  // no stack overflow
    l = {};
    l.max_id_bytes = 4;
    BOOST_TEST(error_of(R"({"id":"abcdef","stream":"s","seq":1,"payload":1})", l).find("longer than 4") !=
               std::string::npos);
}

// The documented maxima are allowed, one more is not: a 128-byte stream
// name and a batch of exactly max_batch messages pass.
BOOST_AUTO_TEST_CASE(limits_at_their_exact_boundary) {
    BOOST_TEST(envelope::valid_stream_name(std::string(128, 's')));
    BOOST_TEST(!envelope::valid_stream_name(std::string(129, 's')));
    BOOST_TEST(!envelope::valid_stream_name(""));
    auto one = [](const std::string& stream) {
        return R"({"id":"a","stream":")" + stream + R"(","seq":1,"payload":1})";
    };
    BOOST_TEST(error_of(one(std::string(128, 's'))).empty());
    BOOST_TEST(error_of(one(std::string(129, 's'))).find("stream") != std::string::npos);
    auto batch = [](int n) {
        std::string b = R"({"messages":[)";
        for (int i = 1; i <= n; ++i) {
            if (i > 1) b += ',';
            b +=
                R"({"id":"m)" + std::to_string(i) + R"(","stream":"s","seq":)" + std::to_string(i) + R"(,"payload":1})";
        }
        return b + "]}";
    };
    envelope::limits l;
    l.max_batch = 3;
    BOOST_TEST(error_of(batch(3), l).empty());
    BOOST_TEST(error_of(batch(4), l) == "a batch holds at most 3 messages");
    auto d = envelope::decode(batch(3), l);
    BOOST_REQUIRE(std::holds_alternative<envelope::decoded>(d));
    // A body of exactly max_body_bytes passes; one byte more does not.
    l = {};
    const std::string exact = one("s");
    l.max_body_bytes = exact.size();
    BOOST_TEST(error_of(exact, l).empty());
    l.max_body_bytes = exact.size() - 1;
    BOOST_TEST(error_of(exact, l).find("over the limit") != std::string::npos);
    // The default: 10,000 pass, 10,001 do not.
    BOOST_TEST(error_of(batch(10'000)).empty());
    BOOST_TEST(error_of(batch(10'001)) == "a batch holds at most 10000 messages");
}

BOOST_AUTO_TEST_CASE(payloads_travel_byte_for_byte) {
    // Number spelling, key order, escapes and inner whitespace are kept.
    const std::string payload = R"({"b":12345678901234567890123, "a":"\u00e9x\"\\","z":[1.0,2e5,-0.0],"k":{}})";
    auto r = envelope::decode(R"({"id":"i","stream":"s","seq":3,"payload":)" + payload + "}");
    auto& m = std::get<envelope::message>(std::get<envelope::decoded>(r));
    BOOST_TEST(m.payload == payload);
    const std::string again = envelope::encode(m);
    BOOST_TEST(again == R"({"id":"i","stream":"s","seq":3,"epoch":0,"payload":)" + payload + "}");
    BOOST_TEST(envelope::encoded_size(m.id, m.stream, m.seq, m.epoch, m.payload.size()) == again.size());
    // In a batch too, with escaped keys and whitespace between tokens.
    auto b = envelope::decode(
        "{ \"messages\" : [ { \"p\\u0061yload\" : [ 1.50 ] , \"id\":\"x\",\"stream\":\"s\",\"seq\":1 } ] }");
    auto& batch = std::get<envelope::batch>(std::get<envelope::decoded>(b));
    BOOST_TEST(batch.messages[0].payload == "[ 1.50 ]");
    BOOST_TEST(error_of(R"({"id":"a","id":"b","stream":"s","seq":1,"payload":1})") == "duplicate field \"id\"");
}

BOOST_AUTO_TEST_CASE(valid_json_the_fast_validator_refuses_is_still_valid) {
    // simdjson refuses integers beyond 64 bits; nlohmann, the reference,
    // accepts them: the payload is kept as it was written.
    for (const std::string payload :
         {"123456789012345678901234567890", "[-123456789012345678901234567890,1]", "{\"x\":12345678901234567890123}"}) {
        auto r = envelope::decode(R"({"id":"i","stream":"s","seq":1,"payload":)" + payload + "}");
        BOOST_TEST_REQUIRE(std::holds_alternative<envelope::decoded>(r), payload);
        BOOST_TEST(std::get<envelope::message>(std::get<envelope::decoded>(r)).payload == payload);
        BOOST_TEST(std::holds_alternative<std::string_view>(envelope::check_payload(payload, 100)), payload);
    }
    // A NUL byte: nlohmann's lexer takes it for the end of the input, so
    // "1\0junk" passed at the primary and was refused by the secondary.
    const std::string nul("1\0junk", 6);
    BOOST_TEST(std::holds_alternative<envelope::payload_error>(envelope::check_payload(nul, 100)));
    BOOST_TEST(error_of(R"({"id":"i","stream":"s","seq":1,"payload":)" + nul + "}").find("NUL byte") !=
               std::string::npos);
    BOOST_TEST(error_of(std::string(R"({"id":"i","stream":"s","seq":1,"payload":"a)") + '\0' + "\"}").find("NUL") !=
               std::string::npos);
    // And what both refuse is refused with nlohmann's words.
    for (const char* bad : {"[1,]", "{\"a\" 1}", "\"\xff\"", "01", "[\"\\ud800\"]", "\"\x01\"", "1e400"}) {
        const auto e = error_of(std::string(R"({"id":"i","stream":"s","seq":1,"payload":)") + bad + "}");
        BOOST_TEST(e.rfind("malformed JSON", 0) == 0, bad << ": " << e);
    }
}

BOOST_AUTO_TEST_CASE(depth_counts_per_envelope) {
    auto nested = [](std::size_t n) { return std::string(n, '[') + std::string(n, ']'); };
    // 63 levels of payload + the envelope = 64: accepted alone and in a batch.
    const std::string one = R"({"id":"a","stream":"s","seq":1,"payload":)" + nested(63) + "}";
    BOOST_TEST(error_of(one) == "");
    BOOST_TEST(error_of(R"({"messages":[)" + one + "]}") == "");
    BOOST_TEST(
        error_of(R"({"id":"a","stream":"s","seq":1,"payload":)" + nested(64) + "}").find("nested deeper than 64") !=
        std::string::npos);
    // /publish applies the same rule to a bare payload.
    const auto overhead = envelope::encoded_size("id", "s", UINT64_MAX, 0, 0);
    BOOST_TEST(std::holds_alternative<std::string_view>(envelope::check_payload(nested(63), overhead)));
    BOOST_TEST(std::get<envelope::payload_error>(envelope::check_payload(nested(64), overhead)).status == 400u);
    BOOST_TEST(std::get<envelope::payload_error>(envelope::check_payload("{", overhead)).status == 400u);
    BOOST_TEST(std::get<std::string_view>(envelope::check_payload("  {\"a\" : 1}\n", overhead)) == "{\"a\" : 1}");
    // Size: an envelope of exactly the limit passes, one byte more is 413.
    const std::size_t room = (1u << 20) - overhead;
    const std::string fits = "\"" + std::string(room - 2, 'x') + "\"";
    BOOST_TEST(std::holds_alternative<std::string_view>(envelope::check_payload(fits, overhead)));
    BOOST_TEST(std::get<envelope::payload_error>(envelope::check_payload(fits + " 1", overhead)).status == 413u);
    BOOST_TEST(error_of(R"({"id":"id","stream":"s","seq":18446744073709551615,"payload":)" + fits + "}") == "");
}

BOOST_AUTO_TEST_CASE(what_the_scanner_cannot_see_is_refused) {
    // nlohmann's accept() skips a byte order mark; the scanner would not.
    const auto overhead = envelope::encoded_size("id", "s", 1, 0, 0);
    BOOST_TEST(std::get<envelope::payload_error>(envelope::check_payload("\xEF\xBB\xBF{\"a\":1}", overhead)).status ==
               400u);
    BOOST_TEST(std::get<envelope::payload_error>(envelope::check_payload(" \xEF\xBB\xBF[1]", overhead)).status == 400u);
    BOOST_TEST(
        error_of("\xEF\xBB\xBF{\"id\":\"a\",\"stream\":\"s\",\"seq\":1,\"payload\":1}").find("byte order mark") !=
        std::string::npos);
    // A tombstone's reason may echo any bytes: it stays valid JSON.
    const std::string t = envelope::encode_tombstone("i", "400 last read: '\xEF\x22\xff'");
    BOOST_TEST(error_of(R"({"id":"i","stream":"s","seq":1,"payload":)" + t + "}") == "");
    BOOST_TEST(envelope::is_tombstone(t));
    // A publisher may not write that shape (handlers skip it as a dead
    // letter's), even padded; what is_tombstone does not take for one passes.
    for (const std::string& forged :
         {t, "  " + t, std::string(R"({"steadfast_dead_letter":{"id":"x","reason":"r"}})")}) {
        const auto checked = envelope::check_payload(forged, overhead);
        const auto* e = std::get_if<envelope::payload_error>(&checked);
        BOOST_TEST_REQUIRE(e != nullptr, forged);
        BOOST_TEST(e->status == 400u);
        BOOST_TEST(e->what.find("reserved") != std::string::npos, e->what);
    }
    for (const std::string& fine : {std::string(R"({"steadfast_dead_letter": {"id":"x"}})"),
                                    std::string(R"({"note":{"steadfast_dead_letter":{"id":"x"}}})")}) {
        BOOST_TEST(std::holds_alternative<std::string_view>(envelope::check_payload(fine, overhead)), fine);
        BOOST_TEST(!envelope::is_tombstone(fine));
    }
}

BOOST_AUTO_TEST_CASE(answers_round_trip) {
    using k = envelope::rejection::kind;
    auto r = envelope::decode_rejection(envelope::encode(envelope::rejection{k::conflict, "s.1", 0, 7, 0}));
    BOOST_TEST((r.what == k::conflict));
    BOOST_TEST(r.stream == "s.1");
    BOOST_TEST(r.seq == 7u);
    r = envelope::decode_rejection(envelope::encode(envelope::rejection{k::gap, "s", 0, 0, 12}));
    BOOST_TEST((r.what == k::gap));
    BOOST_TEST(r.expected == 12u);
    r = envelope::decode_rejection(envelope::encode(envelope::rejection{k::stale_epoch, "", 9, 0, 0}));
    BOOST_TEST((r.what == k::stale_epoch));
    BOOST_TEST(r.epoch == 9u);
    BOOST_TEST((envelope::decode_rejection(R"({"error":"stale_epoch","epoch":"x"})").what == k::stale_epoch));
    BOOST_TEST((envelope::decode_rejection(R"({"error":"gap"})").what == k::unknown));
    BOOST_TEST((envelope::decode_rejection("<html>").what == k::unknown));
    BOOST_TEST(
        envelope::encode_results({{1, envelope::apply_status::applied}, {2, envelope::apply_status::duplicate}}) ==
        R"({"results":[{"seq":1,"status":"applied"},{"seq":2,"status":"duplicate"}]})");
    std::string line;
    envelope::encode_dump_line(line, "s", 2, "i\"d", "[1.0]");
    BOOST_TEST(line == "{\"stream\":\"s\",\"seq\":2,\"id\":\"i\\\"d\",\"payload\":[1.0]}\n");
    // Line breaks between a payload's tokens print as spaces: one message a line.
    line.clear();
    envelope::encode_dump_line(line, "s", 3, "x", "{ \"a\" :\r\n\t[1,\n2] }");
    BOOST_TEST(line == "{\"stream\":\"s\",\"seq\":3,\"id\":\"x\",\"payload\":{ \"a\" :  \t[1, 2] }}\n");
}

BOOST_AUTO_TEST_CASE(repair_requests_round_trip_and_refuse_nonsense) {
    const envelope::repair_request in{"orders.eu", "sec-\"1", 5, 9};
    std::string why;
    auto out = envelope::decode_repair_request(envelope::encode(in), why);
    BOOST_TEST_REQUIRE(out.has_value());
    BOOST_TEST(out->stream == "orders.eu");
    BOOST_TEST(out->consumer == "sec-\"1");
    BOOST_TEST(out->from == 5u);
    BOOST_TEST(out->to == 9u);
    BOOST_TEST(envelope::repair_subject("steadfast") == "_steadfast.repair.steadfast");
    // A hole of one message: from == to.
    auto single = envelope::decode_repair_request(envelope::encode(envelope::repair_request{"a", "c", 7, 7}), why);
    BOOST_TEST_REQUIRE(single.has_value(), why);
    BOOST_TEST(single->from == 7u);
    BOOST_TEST(single->to == 7u);
    BOOST_TEST(!envelope::decode_repair_request(
        envelope::encode(envelope::repair_request{"a", std::string(129, 'c'), 1, 2}), why));
    BOOST_TEST(why.find("128") != std::string::npos);
    for (const char* bad :
         {"", "[1]", R"({"repair":1})", R"({"repair":{"stream":"a b","from":1,"to":2}})",
          R"({"repair":{"stream":"a","from":0,"to":2}})", R"({"repair":{"stream":"a","from":3,"to":2}})",
          R"({"repair":{"stream":"a","from":-1,"to":2}})", R"({"repair":{"stream":"a","to":2}})"}) {
        why.clear();
        BOOST_TEST(!envelope::decode_repair_request(bad, why).has_value(), bad);
        BOOST_TEST(!why.empty(), bad);
    }
}

// GET /api/streams' page: round trip, and anything else is not a page (an
// older secondary's 404 body, a proxy's), so that a primary falls back.
BOOST_AUTO_TEST_CASE(positions_pages_round_trip_and_refuse_other_bodies) {
    envelope::positions_page p;
    p.streams = {{"a", 3}, {"b.c", 18446744073709551615ull}, {"z_-9", 0}};
    p.more = true;
    const auto text = envelope::encode(p);
    BOOST_TEST(text == R"({"streams":[{"stream":"a","last_seq":3},{"stream":"b.c","last_seq":18446744073709551615},)"
                       R"({"stream":"z_-9","last_seq":0}],"more":true})");
    auto back = envelope::decode_positions(text);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(back->more);
    BOOST_REQUIRE(back->streams.size() == 3u);
    BOOST_TEST(back->streams[1].stream == "b.c");
    BOOST_TEST(back->streams[1].last_seq == 18446744073709551615ull);
    BOOST_TEST(envelope::encode(envelope::positions_page{}) == R"({"streams":[],"more":false})");
    for (const char* bad : {R"({"error":"no such path: /api/streams"})", "<html>", R"({"streams":[],"more":1})",
                            R"({"streams":{},"more":false})", R"({"streams":[{"stream":"a"}],"more":false})",
                            R"({"streams":[{"stream":1,"last_seq":2}],"more":false})",
                            R"({"streams":[{"stream":"a","last_seq":-2}],"more":false})", R"({"streams":[]})"})
        BOOST_TEST(!envelope::decode_positions(bad).has_value(), bad);
}

BOOST_AUTO_TEST_SUITE_END()
