// The primary's request combiner (apps/primary/combiner.hpp) against a small
// HTTP server on loopback that records what each request carried: streams'
// batches share requests once each stream has proved itself, never two of a
// stream in one request, and each stream gets its own answer (a 409 naming
// one stream, a 400 of a shared request, a stop while waiting or in flight).
#include <primary/combiner.hpp>

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <steadfast_test/threaded_server.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;

namespace {
// A secondary stand-in on its own thread: answers each POST after `delay`
// with what `answer` says for the streams it carried (200 by default).
struct fake_secondary {
    using answer_fn = std::function<http::response(const std::vector<std::string>& streams)>;
    std::mutex m;
    std::vector<std::vector<std::string>> requests;  // the streams of each request, in order
    answer_fn answer = [](const std::vector<std::string>&) { return http::response::json(200, "{}"); };
    std::chrono::milliseconds delay{30};
    std::string slow_stream;  // a request carrying it is answered after slow_delay
    std::chrono::milliseconds slow_delay{0};
    steadfast_test::threaded_server server{routes()};  // last: stopped before the state its routes use
    const std::uint16_t port = server.port;

    http::router routes() {
        http::router r;
        r.add("POST", "/api/messages", [this](http::request& q) -> asio::awaitable<http::response> {
            std::vector<std::string> streams;
            auto d = envelope::decode(q.body);
            if (auto* one = std::get_if<envelope::decoded>(&d)) {
                if (auto* m1 = std::get_if<envelope::message>(one)) streams.push_back(m1->stream);
                if (auto* b = std::get_if<envelope::batch>(one))
                    for (const auto& m1 : b->messages) streams.push_back(m1.stream);
            }
            auto wait = delay;
            {
                std::lock_guard l(m);
                requests.push_back(streams);
                if (std::find(streams.begin(), streams.end(), slow_stream) != streams.end()) wait = slow_delay;
            }
            asio::steady_timer t(co_await asio::this_coro::executor, wait);
            co_await t.async_wait(asio::use_awaitable);
            std::lock_guard l(m);
            co_return answer(streams);
        });
        return r;
    }
    std::vector<std::vector<std::string>> seen() {
        std::lock_guard l(m);
        return requests;
    }
    void forget() {
        std::lock_guard l(m);
        requests.clear();
    }
};

// The primary's side: a pool of `connections` to the fake, a combiner, and
// one message a stream sent at once from every stream.
struct fixture {
    fake_secondary sec;
    asio::io_context ioc;
    std::optional<http::client_pool> pool;
    std::shared_ptr<flag> stop = make_flag(ioc.get_executor(), "stop");
    std::optional<primary::combiner> comb;

    explicit fixture(std::size_t connections = 2, primary::combiner::limits limits = {}) {
        http::client::options o;
        o.port = std::to_string(sec.port);
        pool.emplace(ioc.get_executor(), o, connections);
        comb.emplace(
            ioc.get_executor(), *pool, limits,
            [](std::string body, std::string key) {
                http::request r{"POST", "/api/messages", {{"Content-Type", "application/json"}}, std::move(body)};
                r.set("Idempotency-Key", std::move(key));
                return r;
            },
            cond(stop));
    }
    // Sends one message on each of `streams` (seq `seq`), all at once; each
    // stream's outcome.
    std::map<std::string, http::outcome> send_all(const std::vector<std::string>& streams, std::uint64_t seq) {
        std::map<std::string, http::outcome> got;
        std::vector<std::string> lists, keys;
        for (const auto& s : streams) {
            std::string e;
            envelope::encode_to(e, s + "-" + std::to_string(seq), s, seq, 1, "{\"n\":1}");
            lists.push_back(std::move(e));
            keys.push_back(s + "-" + std::to_string(seq));
        }
        for (std::size_t i = 0; i < streams.size(); ++i)
            asio::co_spawn(ioc, comb->send(streams[i], lists[i], 1, keys[i]),
                           [&got, s = streams[i]](std::exception_ptr e, http::outcome o) {
                               BOOST_REQUIRE(!e);
                               got.emplace(s, std::move(o));
                           });
        ioc.restart();
        ioc.run_for(10s);
        return got;
    }
    // Starts one message's send on each of `streams` (seq `seq`) without
    // running the loop; each outcome lands in `got`, with the time it came.
    std::deque<std::string> held;  // the sends' strings, alive until they complete
    std::map<std::string, std::chrono::steady_clock::time_point> answered_at;
    void start(const std::vector<std::string>& streams, std::uint64_t seq, std::map<std::string, http::outcome>& got) {
        for (const auto& s : streams) {
            const auto& name = held.emplace_back(s);
            auto& e = held.emplace_back();
            envelope::encode_to(e, s + "-" + std::to_string(seq), s, seq, 1, "{\"n\":1}");
            const auto& key = held.emplace_back(s + "-" + std::to_string(seq));
            asio::co_spawn(ioc, comb->send(name, e, 1, key), [this, &got, s](std::exception_ptr x, http::outcome o) {
                BOOST_REQUIRE(!x);
                answered_at[s] = std::chrono::steady_clock::now();
                got.emplace(s, std::move(o));
            });
        }
    }
};

std::vector<std::string> names(int n) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) v.push_back("s" + std::to_string(i));
    return v;
}
long ms(std::chrono::steady_clock::duration d) {  // (Boost.Test prints no durations)
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}
unsigned status_of(const http::outcome& o) {
    return o.has_response() ? o.res().status : 0;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(primary_combiner)

BOOST_FIXTURE_TEST_CASE(proven_streams_share_requests_and_each_gets_its_answer, fixture) {
    const auto streams = names(12);
    // Round 1: no stream has proved itself: each goes by itself, two at a
    // time (two connections).
    auto first = send_all(streams, 1);
    BOOST_TEST(first.size() == 12u);
    for (const auto& [s, o] : first) BOOST_TEST(status_of(o) == 200u, s);
    for (const auto& r : sec.seen()) BOOST_TEST(r.size() == 1u);
    BOOST_TEST(sec.seen().size() == 12u);
    // Round 2: all proved: while one request is in flight the others wait
    // and go together.
    sec.forget();
    auto second = send_all(streams, 2);
    BOOST_TEST(second.size() == 12u);
    for (const auto& [s, o] : second) BOOST_TEST(status_of(o) == 200u, s);
    const auto reqs = sec.seen();
    BOOST_TEST(reqs.size() < 12u);
    std::size_t widest = 0, carried = 0;
    for (const auto& r : reqs) {
        widest = std::max(widest, r.size());
        carried += r.size();
        BOOST_TEST(std::set<std::string>(r.begin(), r.end()).size() == r.size());  // one batch of a stream
    }
    BOOST_TEST(widest >= 2u);
    BOOST_TEST(carried == 12u);
    BOOST_TEST(comb->requests() == 12u + reqs.size());
}

BOOST_FIXTURE_TEST_CASE(a_409_is_the_named_streams_and_the_others_are_sent_again, fixture) {
    const auto streams = names(6);
    send_all(streams, 1);  // prove them
    sec.forget();
    // s3 has a gap whenever it shares a request (nothing of that request is
    // applied); alone, it is applied.
    sec.answer = [](const std::vector<std::string>& in) {
        if (in.size() > 1 && std::find(in.begin(), in.end(), "s3") != in.end())
            return http::response::json(
                409, envelope::encode(envelope::rejection{envelope::rejection::kind::gap, "s3", 0, 0, 9}));
        return http::response::json(200, "{}");
    };
    auto got = send_all(streams, 2);
    BOOST_TEST(got.size() == 6u);
    BOOST_TEST(status_of(got["s3"]) == 409u);
    for (const auto& s : streams)
        if (s != "s3") BOOST_TEST(status_of(got[s]) == 200u, s);
    const auto reqs = sec.seen();
    bool shared_with_s3 = false;
    for (const auto& r : reqs)
        shared_with_s3 = shared_with_s3 || (r.size() > 1 && std::count(r.begin(), r.end(), "s3"));
    BOOST_TEST(shared_with_s3);  // it did share, and the others still got their 200
}

BOOST_FIXTURE_TEST_CASE(a_400_of_a_shared_request_is_found_out_part_by_part, fixture) {
    const auto streams = names(6);
    send_all(streams, 1);
    sec.forget();
    // Any request carrying s4 is refused (as a message the secondary cannot take).
    sec.answer = [](const std::vector<std::string>& in) {
        if (std::find(in.begin(), in.end(), "s4") != in.end()) return http::response::error(400, "bad message");
        return http::response::json(200, "{}");
    };
    auto got = send_all(streams, 2);
    BOOST_TEST(status_of(got["s4"]) == 400u);
    for (const auto& s : streams)
        if (s != "s4") BOOST_TEST(status_of(got[s]) == 200u, s);
    // s4's answer came from a request of its own.
    const auto reqs = sec.seen();
    BOOST_TEST(std::count(reqs.begin(), reqs.end(), std::vector<std::string>{"s4"}) >= 1);
}

struct one_connection : fixture {
    one_connection() : fixture(1) {}
};

// A stop ends every send: the ones waiting in the queue, and the one in
// flight (its request cancelled: the quick retries around a send let it
// finish rather than cancel it themselves).
BOOST_FIXTURE_TEST_CASE(a_stop_ends_the_waiting_sends_and_the_one_in_flight, one_connection) {
    const auto streams = names(6);
    send_all(streams, 1);
    sec.forget();
    sec.delay = 2s;
    // s0 takes the one connection; the others wait for it; all are stopped
    // (s0 too: not its answer 2 s later).
    asio::steady_timer t(ioc, 100ms);
    t.async_wait([this](boost::system::error_code) { stop->set(); });
    auto got = send_all(streams, 2);
    BOOST_TEST(got.size() == 6u);
    for (const auto& s : streams)
        BOOST_TEST((!got[s].has_response() && got[s].error().ec == asio::error::operation_aborted), s);
    BOOST_TEST((got["s0"].error().phase == http::phase::read));  // in flight: sent, then cancelled
    BOOST_TEST(got["s0"].error().request_sent);
    BOOST_TEST(sec.seen().size() == 1u);  // nothing was sent after the stop
}

// A send after the stop goes nowhere: the stop's cancel of the pool is past.
BOOST_FIXTURE_TEST_CASE(a_send_after_the_stop_goes_nowhere, fixture) {
    stop->set();
    auto got = send_all({"s0"}, 1);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST((!got["s0"].has_response() && got["s0"].error().ec == asio::error::operation_aborted));
    BOOST_TEST(sec.seen().empty());
}

// --linger: while streams share requests, a request waits for more to join;
// patience (a send that waited this long starts another request) well above it.
primary::combiner::limits lingering(std::chrono::milliseconds linger, std::size_t messages = 10'000) {
    primary::combiner::limits l;
    l.linger = linger;
    l.patience = 10s;
    l.slow = 5s;  // a stall of the machine does not leave a stream unproven
    l.messages = messages;
    return l;
}
struct lingers : fixture {
    lingers() : fixture(2, lingering(400ms)) {
        sec.delay = 5ms;
        send_all(names(6), 1);  // each by itself: proved
        send_all(names(6), 2);  // shared: from here on, a request lingers
        sec.forget();
    }
};

BOOST_FIXTURE_TEST_CASE(a_shared_request_waits_linger_for_the_streams_that_come_meanwhile, lingers) {
    std::map<std::string, http::outcome> got;
    const auto t0 = std::chrono::steady_clock::now();
    start({"s0", "s1", "s2"}, 3, got);
    asio::steady_timer later(ioc, 100ms);  // within the linger: they join
    later.async_wait([&](boost::system::error_code) { start({"s3", "s4", "s5"}, 3, got); });
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 6u);
    for (const auto& [s, o] : got) BOOST_TEST(status_of(o) == 200u, s);
    const auto reqs = sec.seen();
    BOOST_TEST_REQUIRE(reqs.size() == 1u);  // at once, s0 would have gone by itself
    BOOST_TEST(reqs[0].size() == 6u);
    BOOST_TEST(ms(answered_at["s0"] - t0) >= 400);  // it waited the linger out
}

BOOST_FIXTURE_TEST_CASE(a_stream_by_itself_lingers_once_then_goes_at_once, lingers) {
    std::map<std::string, http::outcome> first;
    const auto t0 = std::chrono::steady_clock::now();
    start({"s0"}, 3, first);  // the last request was shared: this one lingers, alone
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(first.size() == 1u);
    BOOST_TEST(ms(answered_at["s0"] - t0) >= 400);
    BOOST_TEST(sec.seen().size() == 1u);
    std::map<std::string, http::outcome> got;
    const auto t1 = std::chrono::steady_clock::now();
    start({"s0"}, 4, got);  // the last request held one stream: no wait
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 1u);
    BOOST_TEST(status_of(got["s0"]) == 200u);
    BOOST_TEST(ms(answered_at["s0"] - t1) < 300);  // (a wait would be 400 ms at least)
    BOOST_TEST(sec.seen().size() == 2u);
}

// The others of a request that a 409 named one stream in go again at once,
// not after another linger.
BOOST_FIXTURE_TEST_CASE(the_parts_sent_again_after_a_409_do_not_linger, lingers) {
    sec.answer = [](const std::vector<std::string>& in) {
        if (in.size() > 1 && std::find(in.begin(), in.end(), "s3") != in.end())
            return http::response::json(
                409, envelope::encode(envelope::rejection{envelope::rejection::kind::gap, "s3", 0, 0, 9}));
        return http::response::json(200, "{}");
    };
    std::map<std::string, http::outcome> got;
    const auto t0 = std::chrono::steady_clock::now();
    start(names(6), 3, got);  // one linger, the shared request, its 409
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 6u);
    BOOST_TEST(status_of(got["s3"]) == 409u);
    for (const auto& s : names(6))
        if (s != "s3") BOOST_TEST(status_of(got[s]) == 200u, s);
    const auto reqs = sec.seen();
    BOOST_TEST_REQUIRE(reqs.size() == 2u);
    BOOST_TEST(reqs[1].size() == 5u);
    BOOST_TEST(ms(answered_at["s0"] - t0) >= 400);
    BOOST_TEST(ms(answered_at["s0"] - t0) < 700);  // (a second linger would end at 800 ms at least)
}

BOOST_FIXTURE_TEST_CASE(a_stop_ends_a_linger_and_nothing_is_sent, lingers) {
    std::map<std::string, http::outcome> got;
    start({"s0", "s1"}, 3, got);
    asio::steady_timer t(ioc, 50ms);
    t.async_wait([this](boost::system::error_code) { stop->set(); });
    const auto t0 = std::chrono::steady_clock::now();
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 2u);
    for (const auto& [s, o] : got) BOOST_TEST((!o.has_response() && o.error().ec == asio::error::operation_aborted), s);
    BOOST_TEST(sec.seen().empty());
    BOOST_TEST(ms(std::chrono::steady_clock::now() - t0) < 300);  // not the linger's 400 ms
}

// A send that waited `patience` behind a slow request starts a request of its
// own, at once: not after a linger too.
struct lingers_past_patience : fixture {
    lingers_past_patience() : fixture(2, patient(lingering(400ms))) {
        sec.delay = 5ms;
        send_all(names(6), 1);
        send_all(names(6), 2);  // shared: from here on, a request lingers
        sec.forget();
    }
    static primary::combiner::limits patient(primary::combiner::limits l) {
        l.patience = 100ms;
        return l;
    }
};

BOOST_FIXTURE_TEST_CASE(a_request_started_after_patience_does_not_linger, lingers_past_patience) {
    sec.slow_stream = "s0";
    sec.slow_delay = 2s;
    std::map<std::string, http::outcome> got;
    // After 100 ms (patience, under the linger) s0, s2 and s3 go together:
    // shared, so a request lingers from here on; s0 makes it answer in 2 s.
    start({"s0", "s2", "s3"}, 3, got);
    asio::steady_timer later(ioc, 600ms);
    std::chrono::steady_clock::time_point t1;
    later.async_wait([&](boost::system::error_code) {
        t1 = std::chrono::steady_clock::now();
        start({"s1"}, 3, got);  // queued behind s0's request: after 100 ms, a request of its own
    });
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 4u);
    BOOST_TEST(status_of(got["s1"]) == 200u);
    const auto reqs = sec.seen();
    BOOST_TEST_REQUIRE(reqs.size() == 2u);
    BOOST_TEST(reqs[0].size() == 3u);
    BOOST_TEST(ms(answered_at["s1"] - t1) >= 100);
    BOOST_TEST(ms(answered_at["s1"] - t1) < 400);               // (with a linger: 500 ms at least)
    BOOST_TEST(ms(answered_at["s0"] - answered_at["s1"]) > 0);  // s0's slow request answered last
}

// Thousands of new streams, each going by itself (none has proved itself):
// the sends waiting in the queue share one patience timer. Waited on one
// timer each, they woke every `patience`, each, and the loop spent its time
// on their wake-ups (20,000 streams took 86 s to deliver one message each).
struct many_new_streams : fixture {
    many_new_streams() : fixture(2, patient()) { sec.delay = 2ms; }
    static primary::combiner::limits patient() {
        primary::combiner::limits l;
        l.patience = 20ms;
        return l;
    }
};

BOOST_FIXTURE_TEST_CASE(sends_waiting_behind_each_other_share_one_patience_timer, many_new_streams) {
    std::map<std::string, http::outcome> got;
    start(names(300), 1, got);
    ioc.restart();
    ioc.run_for(60s);
    BOOST_TEST_REQUIRE(got.size() == 300u);
    for (const auto& [s, o] : got) BOOST_TEST(status_of(o) == 200u, s);
    BOOST_TEST(sec.seen().size() == 300u);  // each by itself
    // One look at the queue a patience at most while it holds anything (a
    // timer a waiting send would look 300 times a patience).
    BOOST_TEST(comb->patience_checks() > 0u);
    BOOST_TEST(comb->patience_checks() <= comb->requests());
}

struct lingers_full : fixture {
    // One connection: the lingering sender is the only one, so only the full
    // queue itself can end its wait.
    lingers_full() : fixture(1, lingering(2s, 4)) {  // a request holds 4 messages at most
        sec.delay = 5ms;
        send_all(names(4), 1);
        send_all(names(4), 2);  // s0 alone, s1-s3 shared: lingering from here (2 s)
        sec.forget();
    }
};

BOOST_FIXTURE_TEST_CASE(a_full_request_goes_without_lingering, lingers_full) {
    std::map<std::string, http::outcome> got;
    const auto t0 = std::chrono::steady_clock::now();
    start(names(4), 3, got);
    ioc.restart();
    ioc.run_for(10s);
    BOOST_TEST_REQUIRE(got.size() == 4u);
    for (const auto& [s, o] : got) BOOST_TEST(status_of(o) == 200u, s);
    BOOST_TEST(sec.seen().size() == 1u);
    BOOST_TEST(ms(answered_at["s3"] - t0) < 1000);  // (a linger would be 2 s)
}

BOOST_AUTO_TEST_SUITE_END()
