// The secondary's wire decisions without sockets (issue 29): what is refused
// before the store, what a body decodes to, what an answer of the store
// becomes, GET /api/streams' query, and the fault-injection wrapper.
#include <secondary/faults.hpp>
#include <secondary/messages.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

using namespace steadfast;
namespace asio = boost::asio;

namespace {
http::request post(std::string body, std::string content_type = "application/json", std::string token = {}) {
    http::request r{"POST", "/api/messages", {}, std::move(body)};
    if (!content_type.empty()) r.set("Content-Type", content_type);
    if (!token.empty()) r.set("Authorization", "Bearer " + token);
    return r;
}
struct disk {
    asio::io_context ioc;
    std::uint64_t free_bytes = 1 << 30;
    app::storage_health health{
        ioc.get_executor(),
        {"/d", 1 << 20, std::chrono::milliseconds(1000),
         [this](const std::string&, std::string&) -> std::optional<std::uint64_t> { return free_bytes; }},
        {}};
};
}  // namespace

BOOST_AUTO_TEST_SUITE(secondary_messages)

BOOST_AUTO_TEST_CASE(refusals_come_in_the_contracts_order) {
    disk d;
    d.health.check_disk();
    const std::vector<std::string> tokens{"t1"};
    std::string reason;
    // The token first, even with the wrong type and a full disk.
    d.free_bytes = 10;
    auto r = secondary::refuse_messages(post("{}", "text/plain"), tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 401u);
    BOOST_TEST(reason == "unauthorized");
    r = secondary::refuse_messages(post("{}", "text/plain", "t1"), tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 415u);
    BOOST_TEST(reason == "content_type");
    // Far above the watermark at the last sample: not asked again at each
    // write (no system call), so the full disk is not seen yet...
    BOOST_TEST(!secondary::refuse_messages(post("{}", "application/json", "t1"), tokens, d.health, reason).has_value());
    // ...but within twice it, each write asks again.
    d.free_bytes = 3 << 19;  // 1.5 MiB, over the 1 MiB watermark
    d.health.check_disk();
    BOOST_TEST(!secondary::refuse_messages(post("{}", "application/json", "t1"), tokens, d.health, reason).has_value());
    d.free_bytes = 10;
    r = secondary::refuse_messages(post("{}", "application/json; charset=utf-8", "t1"), tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 503u);
    BOOST_TEST(*r->get("Retry-After") == "1");
    BOOST_TEST(r->body.find("insufficient storage") != std::string::npos);
    BOOST_TEST(reason == "storage");
    d.free_bytes = 1 << 30;
    BOOST_TEST(!secondary::refuse_messages(post("{}", "application/json", "t1"), tokens, d.health, reason).has_value());
    // Without tokens, none is needed.
    BOOST_TEST(!secondary::refuse_messages(post("{}"), {}, d.health, reason).has_value());
}

// No 400 for what is wrong with the request rather than its messages: a
// primary dead-letters what a 400 answers. A header doubled on the way, a
// query parameter a proxy adds: retried as a link error, or let through.
BOOST_AUTO_TEST_CASE(what_is_wrong_with_the_request_is_never_a_400) {
    disk d;
    const std::vector<std::string> tokens{"t1"};
    std::string reason;
    auto twice = post("{}", "application/json", "t1");
    twice.headers.push_back({"Authorization", "Bearer nope"});
    auto r = secondary::refuse_messages(twice, tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 401u);
    BOOST_TEST(reason == "unauthorized");
    auto types = post("{}", "application/json", "t1");
    types.headers.push_back({"Content-Type", "application/json"});
    r = secondary::refuse_messages(types, tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 415u);
    BOOST_TEST(reason == "content_type");
    auto coded = post("{}", "application/json", "t1");
    coded.set("Content-Encoding", "gzip");
    r = secondary::refuse_messages(coded, tokens, d.health, reason);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->status == 415u);
    BOOST_TEST(reason == "content_type");
    auto query = post("{}", "application/json", "t1");
    query.target = "/api/messages?via=lb";
    BOOST_TEST(!secondary::refuse_messages(query, tokens, d.health, reason).has_value());
}

BOOST_AUTO_TEST_CASE(bodies_decode_or_name_the_fault) {
    auto ok = secondary::decode_messages(R"({"id":"a-1","stream":"a","seq":1,"payload":{"x":1}})", 1 << 20);
    BOOST_TEST(std::holds_alternative<envelope::decoded>(ok));
    auto bad = secondary::decode_messages(R"({"id":"a-1","stream":"a","payload":1})", 1 << 20);
    BOOST_REQUIRE(std::holds_alternative<http::response>(bad));
    BOOST_TEST(std::get<http::response>(bad).status == 400u);
    BOOST_TEST(std::get<http::response>(bad).body.find("seq") != std::string::npos);
    auto big = secondary::decode_messages(
        R"({"id":"a-1","stream":"a","seq":1,"payload":")" + std::string(3000, 'x') + "\"}", 1024);
    BOOST_REQUIRE(std::holds_alternative<http::response>(big));
    BOOST_TEST(std::get<http::response>(big).status == 400u);
}

BOOST_AUTO_TEST_CASE(store_answers_become_http_answers) {
    secondary::store::answer a;
    a.status = 409;
    a.body = R"({"error":"gap","stream":"a","expected":3})";
    auto r = secondary::answer_of(app::db_result<secondary::store::answer>(a));
    BOOST_TEST(r.status == 409u);
    BOOST_TEST(r.body == a.body);
    auto failed = secondary::answer_of(app::db_result<secondary::store::answer>(
        app::db_failure{app::make_db_error_code(SQLITE_IOERR), "disk I/O error"}));
    BOOST_TEST(failed.status == 503u);
    BOOST_TEST(*failed.get("Retry-After") == "1");
    BOOST_TEST(failed.body.find("disk I/O error") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(page_queries_are_checked) {
    auto q = secondary::parse_page_query("/api/streams");
    BOOST_REQUIRE(std::holds_alternative<secondary::page_query>(q));
    BOOST_TEST(std::get<secondary::page_query>(q).after == "");
    BOOST_TEST(std::get<secondary::page_query>(q).limit == 1000u);
    q = secondary::parse_page_query("/api/streams?after=a.b&limit=10000");
    BOOST_REQUIRE(std::holds_alternative<secondary::page_query>(q));
    BOOST_TEST(std::get<secondary::page_query>(q).after == "a.b");
    BOOST_TEST(std::get<secondary::page_query>(q).limit == 10000u);
    for (const char* bad :
         {"/api/streams?limit=0", "/api/streams?limit=10001", "/api/streams?limit=x", "/api/streams?limit=-1",
          "/api/streams?after=a&after=b", "/api/streams?aftr=a", "/api/streams?limit=1&limit=2"}) {
        auto b = secondary::parse_page_query(bad);
        BOOST_TEST(std::holds_alternative<http::response>(b), bad);
        if (auto* r = std::get_if<http::response>(&b)) BOOST_TEST(r->status == 400u, bad);
    }
}

// The wrapper: the inner handler is reached only past the coin tosses; a
// certain drop or fault never reaches it, and is reported.
BOOST_AUTO_TEST_CASE(faults_wrap_a_handler) {
    asio::io_context ioc;
    int reached = 0;
    http::router::handler inner = [&](http::request&) -> asio::awaitable<http::response> {
        ++reached;
        co_return http::response::json(200, "{}");
    };
    std::vector<std::string> reported;
    auto run = [&](const http::router::handler& h) {
        std::optional<http::response> out;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                http::request req{"POST", "/api/messages", {}, {}};
                out = co_await h(req);
            },
            asio::detached);
        ioc.restart();
        ioc.run();
        return *out;
    };
    auto report = [&](const std::string& r) { reported.push_back(r); };
    // Nothing configured: the handler itself, unwrapped.
    auto plain = secondary::with_faults(inner, {}, ioc.get_executor(), report);
    BOOST_TEST(run(plain).status == 200u);
    BOOST_TEST(reached == 1);
    auto drop = secondary::with_faults(inner, {.drop_rate = 1.0}, ioc.get_executor(), report, 7);
    BOOST_TEST(run(drop).drop_connection);
    auto fault = secondary::with_faults(inner, {.fault_rate = 1.0, .fault_status = 429}, ioc.get_executor(), report, 7);
    auto f = run(fault);
    BOOST_TEST(f.status == 429u);
    BOOST_TEST(*f.get("Retry-After") == "1");
    BOOST_TEST(reached == 1);
    BOOST_TEST((reported == std::vector<std::string>{"injected_drop", "injected_fault"}));
    // A rate between: over 200 calls, some of each (the seed fixes which).
    auto half = secondary::with_faults(inner, {.fault_rate = 0.5}, ioc.get_executor(), report, 11);
    int faults = 0;
    for (int i = 0; i < 200; ++i) faults += run(half).status == 503u;
    BOOST_TEST(faults > 50);
    BOOST_TEST(faults < 150);
    BOOST_TEST(reached == 1 + (200 - faults));
}

BOOST_AUTO_TEST_SUITE_END()
