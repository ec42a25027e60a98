// The primary's HTTP link (replication/src/primary/http_link.cpp) against a
// secondary stand-in on loopback, through the link_host it reports to: when
// the probe checks again after a failure (50 ms while nothing listens, the
// default's 50 to 200 ms after any other failure), that a send whose
// connection is refused asks for a check at once, and that a new secondary
// instance wakes the streams waiting for a ladder step only after a refused
// send (a balancer's secondaries show a new instance at every check).
#include <primary/link.hpp>

#include <steadfast/conditions/flag.hpp>
#include <steadfast/replication/conditions.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <steadfast_test/scratch_dir.hpp>
#include <steadfast_test/threaded_server.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;

namespace {
// A secondary stand-in on its own thread, on `port` (0: any): GET /health
// answers `health` with the instance `instance`; POST /api/messages 200.
struct fake_secondary {
    std::mutex m;
    unsigned health = 200;
    std::string health_body = R"({"status":"ok"})";
    std::string instance = "one";
    int posts = 0;
    std::chrono::milliseconds post_delay{0};  // before each POST's answer
    steadfast_test::threaded_server server;   // last: stopped before the state its routes use
    const std::uint16_t port = server.port;

    explicit fake_secondary(std::uint16_t at = 0) : server(routes(), {}, at) {}
    http::router routes() {
        http::router r;
        r.add("GET", "/health", [this](http::request&) -> asio::awaitable<http::response> {
            std::lock_guard l(m);
            auto res = http::response::json(health, health_body);
            res.set("X-Steadfast-Instance", instance);
            co_return res;
        });
        r.add("POST", "/api/messages", [this](http::request&) -> asio::awaitable<http::response> {
            std::chrono::milliseconds delay;
            {
                std::lock_guard l(m);
                ++posts;
                delay = post_delay;
            }
            if (delay.count() > 0) {
                asio::steady_timer t(co_await asio::this_coro::executor, delay);
                co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            }
            co_return http::response::json(200, "{}");
        });
        return r;
    }
    void set(unsigned status, std::string id) {
        std::lock_guard l(m);
        health = status;
        instance = std::move(id);
    }
};

// What the link asked of the primary.
struct recording_host final : primary::link_host {
    explicit recording_host(asio::any_io_executor ex) : up(make_flag(std::move(ex), "online", true)) {}
    std::shared_ptr<flag> up;
    std::vector<std::string> retried;  // retry_now's reasons
    int checks_asked = 0;              // check_secondary_soon's calls

    bool stopping() const override { return false; }
    cond online() const override { return up; }
    std::optional<std::uint64_t> acked_max(const std::string&) const override { return std::nullopt; }
    std::optional<std::string> blocked(const std::string&) const override { return std::nullopt; }
    bool resend_last(const std::string&, std::uint64_t) override { return false; }
    void retry_now(const char* why) override { retried.emplace_back(why); }
    void check_secondary_soon() override { ++checks_asked; }
    void outbox_read_failed(const std::string&, const std::string&) override {}
};

struct fixture {
    test::scratch_dir scratch{"http-link"};  // removed after the members below
    asio::io_context ioc;
    std::optional<app::database> db;
    std::optional<primary::outbox> out;
    std::optional<app::db_worker> worker;
    primary::metrics m;
    std::vector<std::string> tokens;
    replication::primary_config o;
    std::optional<recording_host> host;
    std::shared_ptr<flag> stop_flag;  // the link's stop (shutdown, demotion)
    std::optional<primary::link_env> env;
    std::unique_ptr<primary::link> link;

    fixture() {
        db.emplace(scratch.path.string(), "primary.db", "steadfast-primary", app::sync_mode::off);
        out.emplace(*db);
        worker.emplace(*db);
        o.quick_retries = 1;
        host.emplace(ioc.get_executor());
    }
    ~fixture() {
        // The database thread first: a job the link queued (a recheck's
        // read) refers to it and must not run once it is gone (UBSan saw
        // one, once in a CI run). Its answer is posted, run below.
        worker->stop();
        link.reset();
        ioc.run_for(100ms);  // what the link left posted (a recheck's end)
        worker.reset();
    }
    // The link to a secondary at `port` (built once).
    primary::link& to(std::uint16_t port) {
        if (!link) {
            o.secondary = "http://127.0.0.1:" + std::to_string(port);
            stop_flag = make_flag(ioc.get_executor(), "stop");
            env.emplace(primary::link_env{o, ioc.get_executor(), *out, *worker, stop_flag,
                                          make_demoted(ioc.get_executor(), 0), tokens, m});
            link = primary::make_link(*env, *host);
        }
        return *link;
    }
    template <class T>
    T run(asio::awaitable<T> a) {
        auto f = asio::co_spawn(ioc, std::move(a), asio::use_future);
        ioc.restart();
        while (f.wait_for(0s) != std::future_status::ready) ioc.run_for(10ms);
        return f.get();
    }
    bool check() { return run(link->probe()); }
    primary::decision send_one() {
        std::vector<primary::pending_message> batch{{1, "id-1", R"({"n":1})", 0}};
        std::chrono::nanoseconds server_wait{0};
        const auto quick = retry_policy{}.with_stop(stop::max_attempts(1));
        return run(link->send("s", batch, quick, server_wait));
    }
    // The probe's waits after the failing check just made, for the 1st to 5th failure in a row.
    std::vector<std::chrono::nanoseconds> waits() const {
        std::vector<std::chrono::nanoseconds> w;
        std::chrono::nanoseconds prev{0};
        const auto b = link->probe_backoff();
        for (std::uint64_t n = 1; n <= 5; ++n) w.push_back(prev = b.base_delay(n, prev));
        return w;
    }
};

// A port nothing listens on (bound, then closed).
std::uint16_t closed_port() {
    asio::io_context ioc;
    asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_http_link)

BOOST_FIXTURE_TEST_CASE(a_refused_check_is_followed_in_50_ms_any_other_failure_by_the_default, fixture) {
    const std::vector<std::chrono::nanoseconds> every_50ms(5, 50ms);
    std::vector<std::chrono::nanoseconds> fallback;  // link::probe_backoff's
    {
        std::chrono::nanoseconds prev{0};
        const auto b = backoff::exponential(50ms, 1.5, 200ms);
        for (std::uint64_t n = 1; n <= 5; ++n) fallback.push_back(prev = b.base_delay(n, prev));
    }
    BOOST_REQUIRE(fallback != every_50ms);

    std::optional<fake_secondary> sec;
    sec.emplace();
    const auto port = sec->port;
    to(port);
    sec->set(503, "one");  // a secondary whose storage fails: a check costs it work
    BOOST_TEST(!check());
    BOOST_TEST(link->offline_error() == R"(HTTP 503: {"status":"ok"})");
    BOOST_TEST(waits() == fallback);

    sec.reset();  // nothing listens: restarting
    BOOST_TEST(!check());
    BOOST_TEST(link->offline_error().find("connect") != std::string::npos);
    BOOST_TEST(waits() == every_50ms);

    sec.emplace(port);  // back, answering 200
    BOOST_TEST(check());
    BOOST_TEST(link->offline_error().empty());
    BOOST_TEST(waits() == fallback);  // a pass forgets the refusal

    sec.reset();
    BOOST_TEST(!check());
    BOOST_TEST(waits() == every_50ms);
    sec.emplace(port);
    sec->set(503, "one");
    BOOST_TEST(!check());
    BOOST_TEST(waits() == fallback);
}

// Why the secondary is offline says what a failed check's answer said: its
// body, on one line and cut short (another server's page).
BOOST_FIXTURE_TEST_CASE(a_failed_check_tells_what_the_answer_said, fixture) {
    fake_secondary sec;
    {
        std::lock_guard l(sec.m);
        sec.health = 404;
        sec.health_body = "<html>\r\n  <title>Not Found</title>\n" + std::string(300, 'x');
    }
    to(sec.port);
    BOOST_TEST(!check());
    const std::string said = "<html> <title>Not Found</title> ";
    BOOST_TEST(link->offline_error() == "HTTP 404: " + said + std::string(160 - said.size(), 'x') + "...");
    {
        // Cut between characters (an "é" at bytes 160-161 is left out
        // whole), a byte that is not UTF-8 as "?": valid UTF-8 for /health's
        // JSON whatever the server sent.
        std::lock_guard l(sec.m);
        sec.health_body = "\xffok" + std::string(156, 'a') + "\xc3\xa9 and more";
    }
    BOOST_TEST(!check());
    BOOST_TEST(link->offline_error() == "HTTP 404: ?ok" + std::string(156, 'a') + "...");
    {
        std::lock_guard l(sec.m);
        sec.health_body = "caf\xc3\xa9 \x01";
    }
    BOOST_TEST(!check());
    BOOST_TEST(link->offline_error() == "HTTP 404: caf\xc3\xa9 ?");
    {
        std::lock_guard l(sec.m);
        sec.health = 503;
        sec.health_body.clear();
    }
    BOOST_TEST(!check());
    BOOST_TEST(link->offline_error() == "HTTP 503");  // nothing said: the status alone
    nlohmann::json j = nlohmann::json::object();
    link->health(j);  // the primary's /health says it too, while it lasts
    BOOST_TEST(j.value("secondary_error", "") == "HTTP 503");
    {
        std::lock_guard l(sec.m);
        sec.health = 200;
    }
    BOOST_TEST(check());
    j = nlohmann::json::object();
    link->health(j);
    BOOST_TEST(!j.contains("secondary_error"));
}

BOOST_FIXTURE_TEST_CASE(a_refused_send_asks_for_a_check_at_once, fixture) {
    to(closed_port());
    const auto d = send_one();
    BOOST_TEST((d.what == primary::verdict::redeliver));
    BOOST_TEST(!d.no_answer_in_time);  // nothing listens: not a slow secondary
    BOOST_TEST(d.reason.find("connect: ") != std::string::npos, d.reason);
    BOOST_TEST(host->checks_asked == 1);
    BOOST_TEST(host->retried.empty());
}

BOOST_FIXTURE_TEST_CASE(an_answered_send_asks_for_nothing, fixture) {
    fake_secondary sec;
    to(sec.port);
    const auto d = send_one();
    BOOST_TEST((d.what == primary::verdict::ack));
    BOOST_TEST(host->checks_asked == 0);
}

BOOST_FIXTURE_TEST_CASE(a_new_instance_wakes_the_ladder_only_after_a_refused_send, fixture) {
    std::optional<fake_secondary> sec;
    sec.emplace();
    const auto port = sec->port;
    to(port);
    BOOST_TEST(check());  // first seen: nothing is waiting for it
    sec->set(200, "two");
    BOOST_TEST(check());  // another instance (a balancer's), no send refused
    BOOST_TEST(host->retried.empty());

    sec.reset();  // restarted, too briefly for the probe to see it down
    send_one();
    BOOST_TEST(host->checks_asked >= 1);
    sec.emplace(port);
    sec->set(200, "three");
    BOOST_TEST(check());
    BOOST_TEST(host->retried == std::vector<std::string>{"secondary_restarted"});

    sec->set(200, "four");  // once: the refusal was answered by that check
    BOOST_TEST(check());
    BOOST_TEST(host->retried.size() == 1u);

    // A refused send and the same instance back: not a restart, no wake.
    sec.reset();
    send_one();
    sec.emplace(port);
    sec->set(200, "four");
    BOOST_TEST(check());
    BOOST_TEST(host->retried.size() == 1u);
}

// Shutdown or demotion (the link's stop) ends a send in flight to a
// secondary that takes 3 s to answer, with the quick retries' policy as the
// primary builds it (the link lets an attempt finish: the combiner cancels
// the request). Nothing else would end it before the answer (the attempt
// timeout is an hour): a send that ends within 2 s of a stop at 0.2 s was
// cut short, one that waited for the answer took 3 s.
BOOST_FIXTURE_TEST_CASE(a_stop_ends_a_send_in_flight, fixture) {
    fake_secondary sec;
    sec.post_delay = 3s;
    o.attempt_timeout = 1h;
    to(sec.port);
    const auto quick = link->quick(retry_policy{}.with_stop(stop::max_attempts(3)).with_stop_when(env->stop));
    std::vector<primary::pending_message> batch{{1, "id-1", R"({"n":1})", 0}};
    std::chrono::nanoseconds server_wait{0};
    asio::steady_timer later(ioc, 200ms);
    later.async_wait([this](boost::system::error_code) { stop_flag->set(); });
    const auto t0 = std::chrono::steady_clock::now();
    const auto d = run(link->send("s", batch, quick, server_wait));
    const auto took = std::chrono::steady_clock::now() - t0;
    BOOST_TEST((d.what == primary::verdict::stop));
    BOOST_TEST(took < 2s, "the send ended after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                                  << " ms: it waited for the answer");
    std::lock_guard l(sec.m);
    BOOST_TEST(sec.posts == 1);  // sent once, not again after the stop
}

// A secondary that answers after the attempt's timeout is slow, not missing
// (decide.hpp's no_answer_in_time, the hint about --attempt-timeout); one that
// reads the request and closes without an answer is neither.
BOOST_FIXTURE_TEST_CASE(an_answer_after_the_attempt_timeout_is_no_answer_in_time, fixture) {
    fake_secondary sec;
    sec.post_delay = 1500ms;
    o.attempt_timeout = 300ms;
    to(sec.port);
    const auto d = send_one();
    BOOST_TEST((d.what == primary::verdict::redeliver));
    BOOST_TEST(d.link_error.label() == "transport");
    BOOST_TEST(d.no_answer_in_time);
    BOOST_TEST(d.reason.find("read: ") != std::string::npos, d.reason);
    BOOST_TEST(primary::hint_for(d).find("--attempt-timeout") != std::string_view::npos);
}

BOOST_FIXTURE_TEST_CASE(a_request_read_and_closed_unanswered_is_not_a_timeout, fixture) {
    // A stand-in that takes each connection, reads the request and closes it.
    asio::io_context sioc;
    asio::ip::tcp::acceptor acceptor(sioc, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = acceptor.local_endpoint().port();
    std::thread closer([&] {
        for (;;) {
            boost::system::error_code ec;
            asio::ip::tcp::socket s(sioc);
            acceptor.accept(s, ec);
            if (ec) return;  // the acceptor closed: the test is over
            char buf[4096];
            s.read_some(asio::buffer(buf), ec);
            s.close(ec);
        }
    });
    o.attempt_timeout = 5s;  // longer than the test: a timeout would be the wrong answer
    to(port);
    const auto d = send_one();
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);  // wakes the blocking accept
    closer.join();
    boost::system::error_code ignored;
    acceptor.close(ignored);
    BOOST_TEST((d.what == primary::verdict::redeliver));
    BOOST_TEST(!d.no_answer_in_time, d.reason);
    BOOST_TEST(d.reason.find("read: ") != std::string::npos, d.reason);
}

BOOST_AUTO_TEST_SUITE_END()
