// Bearer tokens (common/token.hpp): the token file's rules (trimming,
// comments, a BOM, CRLF; refusals naming the file, the line and the byte),
// the tokens' own checks, the comparison (the whole token, no more and no
// less; the scheme's case ignored) and the 401 answers.
#include <common/token.hpp>

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace steadfast;
using steadfast::app::bearer_matches;
using steadfast::app::check_tokens;
using steadfast::app::constant_time_equal;
using steadfast::app::read_token_file;
using steadfast::app::refuse_unauthorized;

namespace {
// A token file with `content`, removed with the fixture.
struct token_file {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("steadfast-token-test-" + std::to_string(::getpid()));
    explicit token_file(const std::string& content) { std::ofstream(path, std::ios::binary) << content; }
    ~token_file() { std::filesystem::remove(path); }
};

// The message read_token_file() throws for `content` (empty: it did not throw).
std::string refusal(const std::string& content) {
    token_file f(content);
    try {
        read_token_file(f.path.string());
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return {};
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

http::request with_auth(std::string value) {
    http::request r;
    r.set("Authorization", std::move(value));
    return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(app_token)

BOOST_AUTO_TEST_CASE(a_token_file_is_trimmed_and_its_comments_skipped) {
    token_file f("\xEF\xBB\xBF# rotation: new first\r\n  new-token \t\r\n\n\t# old one, until Friday\nold-token\r\n");
    const auto t = read_token_file(f.path.string());
    BOOST_TEST(t == (std::vector<std::string>{"new-token", "old-token"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_token_file_without_a_token_is_refused_by_name) {
    const auto why = refusal("# only a comment\n\n   \n");
    BOOST_TEST(has(why, "holds no token"), why);
    BOOST_TEST(has(why, "steadfast-token-test-"), why);
    const auto missing = std::string("/nonexistent/steadfast-token");
    try {
        read_token_file(missing);
        BOOST_FAIL("a missing file was read");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(has(e.what(), "cannot read --token-file \"" + missing + "\""), e.what());
    }
}

BOOST_AUTO_TEST_CASE(a_byte_that_cannot_travel_in_a_header_is_refused_naming_line_and_byte) {
    auto why = refusal(
        "good\nba\x01"
        "d\n");
    BOOST_TEST(has(why, "line 2"), why);
    BOOST_TEST(has(why, "byte 0x01"), why);
    why = refusal("caf\xC3\xA9\n");  // UTF-8 is not a bearer token
    BOOST_TEST(has(why, "line 1"), why);
    BOOST_TEST(has(why, "byte 0xc3"), why);
    why = refusal(std::string("t\0k\n", 4));  // a UTF-16 file, say
    BOOST_TEST(has(why, "byte 0x00"), why);
    why = refusal("x\x7f\n");
    BOOST_TEST(has(why, "byte 0x7f"), why);
    BOOST_TEST(refusal("~!\"#$%&'()*+,-./0189:;<=>?@AZ[\\]^_`az{|}\n").empty());  // every printable byte but space
}

BOOST_AUTO_TEST_CASE(two_tokens_on_one_line_are_refused) {
    const auto why = refusal("one two\n");
    BOOST_TEST(has(why, "line 1"), why);
    BOOST_TEST(has(why, "cannot hold spaces"), why);
    BOOST_TEST(has(refusal("one\ttwo\n"), "byte 0x09"));  // a tab is a control character
}

BOOST_AUTO_TEST_CASE(tokens_given_directly_are_checked) {
    BOOST_CHECK_NO_THROW(check_tokens({"a", "b-c_d.e~f"}, "--token"));
    auto why = [](std::vector<std::string> t) {
        try {
            check_tokens(t, "--token");
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    BOOST_TEST(has(why({"ok", ""}), "--token[1] is empty"));
    BOOST_TEST(has(why({"a b"}), "--token[0]: byte 0x20"));
    BOOST_TEST(has(why({"line\n"}), "--token[0]: byte 0x0a"));
    BOOST_TEST(has(why({"x\x80"}), "byte 0x80"));
}

BOOST_AUTO_TEST_CASE(the_whole_token_and_nothing_more) {
    BOOST_TEST(constant_time_equal("secret", "secret"));
    BOOST_TEST(!constant_time_equal("secre", "secret"));    // a prefix
    BOOST_TEST(!constant_time_equal("secretX", "secret"));  // the token and more
    BOOST_TEST(!constant_time_equal("", "secret"));
    BOOST_TEST(!constant_time_equal("secret", ""));
    BOOST_TEST(!constant_time_equal("secreT", "secret"));  // the last byte
    BOOST_TEST(!constant_time_equal("Secret", "secret"));  // the first byte
    BOOST_TEST(!constant_time_equal(std::string("sec\0et", 6), "secret"));
}

BOOST_AUTO_TEST_CASE(the_bearer_scheme_is_matched_without_case) {
    BOOST_TEST(bearer_matches("Bearer secret", "secret"));
    BOOST_TEST(bearer_matches("bearer secret", "secret"));
    BOOST_TEST(bearer_matches("BEARER secret", "secret"));
    BOOST_TEST(!bearer_matches("Bearer secret2", "secret"));
    BOOST_TEST(!bearer_matches("Bearer SECRET", "secret"));   // the token itself is case-sensitive
    BOOST_TEST(bearer_matches("Bearer   secret", "secret"));  // RFC 6750: 1*SP
    BOOST_TEST(!bearer_matches("Bearer secret ", "secret"));
    BOOST_TEST(!bearer_matches("Bearer\tsecret", "secret"));
    BOOST_TEST(!bearer_matches("Basic secret", "secret"));
    BOOST_TEST(!bearer_matches("Bearersecret", "secret"));
    BOOST_TEST(!bearer_matches("secret", "secret"));
    BOOST_TEST(!bearer_matches("Bearer ", "secret"));
    BOOST_TEST(!bearer_matches("Bearer    ", "secret"));
    BOOST_TEST(!bearer_matches("", "secret"));
    BOOST_TEST(!bearer_matches("Bearer", "secret"));
}

BOOST_AUTO_TEST_CASE(any_of_several_tokens_is_accepted) {
    const std::vector<std::string> tokens{"new", "old"};
    BOOST_TEST(bearer_matches("Bearer new", tokens));
    BOOST_TEST(bearer_matches("Bearer old", tokens));
    BOOST_TEST(!bearer_matches("Bearer older", tokens));
    BOOST_TEST(!bearer_matches("Bearer ne", tokens));
    BOOST_TEST(!bearer_matches("Bearer new", std::vector<std::string>{}));
}

BOOST_AUTO_TEST_CASE(the_401_answers) {
    const std::vector<std::string> tokens{"secret"};
    BOOST_TEST(!refuse_unauthorized(http::request{}, {}).has_value());  // no token set: open
    BOOST_TEST(!refuse_unauthorized(with_auth("Bearer secret"), tokens).has_value());
    auto r = refuse_unauthorized(http::request{}, tokens);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 401u);
    BOOST_TEST(has(r->body, "missing bearer token"), r->body);
    BOOST_TEST(r->get("WWW-Authenticate").value_or("") == "Bearer");
    r = refuse_unauthorized(with_auth("Bearer wrong"), tokens);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 401u);
    BOOST_TEST(has(r->body, "wrong bearer token"), r->body);
    BOOST_TEST(r->get("WWW-Authenticate").value_or("") == "Bearer");
}

BOOST_AUTO_TEST_CASE(two_authorization_headers_are_refused_whichever_comes_first) {
    const std::vector<std::string> tokens{"secret"};
    for (const auto& [first, second] : {std::pair{"Bearer secret", "Bearer wrong"},
                                        {"Bearer wrong", "Bearer secret"},
                                        {"Bearer secret", "Bearer secret"}}) {
        http::request req;
        req.headers.push_back({"Authorization", first});
        req.headers.push_back({"authorization", second});
        auto r = refuse_unauthorized(req, tokens);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST(r->status == 401u);  // (a 400 would read as the message's fault to a primary)
        BOOST_TEST(has(r->body, "Authorization is given more than once"), r->body);
        BOOST_TEST(r->get("WWW-Authenticate").value_or("") == "Bearer");
    }
    http::request open;  // no token set: nothing to disagree about
    open.headers = {{"Authorization", "a"}, {"Authorization", "b"}};
    BOOST_TEST(!refuse_unauthorized(open, {}).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
