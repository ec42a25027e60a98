// The embeddable nodes (steadfast/replication/primary_node.hpp and
// secondary_node.hpp) against each other over loopback HTTP, in one process:
// publish completes with the seq once durable and the secondary applies each
// stream in order through the application's handler, exactly once, inside
// its transaction; the transactional outbox commits the application's rows
// with the message or neither; refusals name their cause and store nothing;
// a cancelled publish not yet taken stores nothing; a handler that throws is
// retried, never skipped; a restarted primary goes on from its outbox.
#include <steadfast/replication/primary_node.hpp>
#include <steadfast/replication/secondary_node.hpp>
#include <steadfast/transport/http.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <steadfast_test/hooked_executor.hpp>
#include <steadfast_test/scratch_dir.hpp>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
using namespace steadfast;
using namespace std::chrono_literals;
using replication::publish_error;

namespace {

// What the secondary's handler saw, per stream, in order.
struct applied_log {
    std::mutex m;
    std::map<std::string, std::vector<std::uint64_t>> seqs;
    std::map<std::string, std::vector<std::string>> payloads;
    std::size_t total() {
        std::lock_guard l(m);
        std::size_t n = 0;
        for (auto& [s, v] : seqs) n += v.size();
        return n;
    }
};

std::int64_t count_rows(sqlite3* db, const char* sql) {
    sqlite3_stmt* st = nullptr;
    BOOST_REQUIRE_EQUAL(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
    std::int64_t n = -1;
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string what = err ? err : "?";
        sqlite3_free(err);
        throw std::runtime_error(what);
    }
}

// Waits (on the test's thread) until `pred` holds, for at most 20 s.
template <class Pred>
bool eventually(Pred pred) {
    for (int i = 0; i < 2000; ++i) {
        if (pred()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return pred();
}

// `make` must throw std::invalid_argument whose text holds every one of
// `parts`; `accepted` says what went wrong if it does not throw.
void refused_naming(const std::function<void()>& make, std::initializer_list<std::string> parts,
                    const std::string& accepted) {
    try {
        make();
        BOOST_ERROR(accepted);
    } catch (const std::invalid_argument& e) {
        for (const auto& part : parts) BOOST_TEST(std::string(e.what()).find(part) != std::string::npos, e.what());
    }
}

// What the process writes to stderr (the log) meanwhile.
struct stderr_capture {
    std::filesystem::path file;
    int saved = -1;
    explicit stderr_capture(std::filesystem::path f) : file(std::move(f)) {
        std::fflush(stderr);
        saved = ::dup(2);
        const int fd = ::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
        ::dup2(fd, 2);
        ::close(fd);
    }
    std::string finish() {
        std::fflush(stderr);
        ::dup2(saved, 2);
        ::close(saved);
        std::ifstream in(file);
        return {std::istreambuf_iterator<char>(in), {}};
    }
};

// Holds the primary's database thread with a transaction until release()
// (or the hold's end): what is started meanwhile waits behind it.
class database_hold {
public:
    explicit database_hold(replication::primary_node& primary) {
        primary.async_transaction(
            [f = flags_](sqlite3*) {
                f->held = true;
                while (!f->released) std::this_thread::sleep_for(1ms);
            },
            asio::detached);
    }
    ~database_hold() { release(); }
    database_hold(const database_hold&) = delete;
    database_hold& operator=(const database_hold&) = delete;
    /// Whether the transaction came to hold the thread (within 20 s).
    bool holding() {
        return eventually([this] { return flags_->held.load(); });
    }
    void release() { flags_->released = true; }

private:
    struct flags {
        std::atomic<bool> held{false}, released{false};
    };
    std::shared_ptr<flags> flags_ = std::make_shared<flags>();
};

// The replica's table, in the order the rows were written: "stream:seq".
std::vector<std::string> mirror_rows(const std::filesystem::path& db_file) {
    sqlite3* db = nullptr;
    std::vector<std::string> rows;
    if (sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return rows;
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT stream, seq FROM mirror ORDER BY n", -1, &st, nullptr);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        rows.push_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) + ":" +
                       std::to_string(sqlite3_column_int64(st, 1)));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rows;
}

struct pair_fixture {
    test::scratch_dir scratch{"nodes"};
    applied_log log;
    std::atomic<int> fail_next{0};           // the handler throws this many times more...
    std::atomic<std::uint64_t> fail_seq{0};  // ...at this seq (0: any), after its write
    std::unique_ptr<replication::secondary_node> secondary;
    replication::primary_config pc;

    pair_fixture() {
        start_secondary();
        pc.data = (scratch.path / "outbox").string();
        pc.fsync = false;
        pc.ladder = "200ms";
        pc.max_backoff = 100ms;
        pc.schema = "CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, what TEXT)";
    }
    // The replica on its store (again: after secondary.reset()), and the
    // primary's config pointed at it.
    void start_secondary(std::uint32_t apply_attempts = 3) {
        replication::secondary_config sc;
        sc.data = (scratch.path / "replica").string();
        sc.fsync = false;
        sc.apply_attempts = apply_attempts;
        sc.schema = "CREATE TABLE IF NOT EXISTS mirror(n INTEGER PRIMARY KEY, stream TEXT, seq INTEGER, payload TEXT)";
        secondary = std::make_unique<replication::secondary_node>(sc, [this](sqlite3* db, const envelope::message& m) {
            exec(db, "INSERT INTO mirror(stream, seq, payload) VALUES('" + m.stream + "'," + std::to_string(m.seq) +
                         ",'" + m.payload + "')");
            if (fail_next > 0 && (fail_seq == 0 || fail_seq == m.seq)) {
                --fail_next;
                throw std::runtime_error("the application is not ready");
            }
            std::lock_guard l(log.m);
            log.seqs[m.stream].push_back(m.seq);
            log.payloads[m.stream].push_back(m.payload);
        });
        pc.secondary = "http://127.0.0.1:" + std::to_string(secondary->local_endpoint().port());
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(replication_nodes)

BOOST_FIXTURE_TEST_CASE(publishes_are_applied_in_order_once, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::map<std::string, std::vector<std::uint64_t>> got;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 60; ++i) {
                const std::string stream = "s" + std::to_string(i % 3);
                auto seq =
                    co_await primary.async_publish(stream, "{\"i\":" + std::to_string(i) + "}", asio::use_awaitable);
                got[stream].push_back(seq);
            }
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    ioc.run();
    for (auto& [stream, seqs] : got) {
        BOOST_TEST_REQUIRE(seqs.size() == 20u);
        for (std::size_t k = 0; k < seqs.size(); ++k) BOOST_TEST(seqs[k] == k + 1);  // each stream's own seqs
    }
    BOOST_TEST_REQUIRE(eventually([&] { return log.total() == 60; }));
    std::lock_guard l(log.m);
    for (auto& [stream, seqs] : log.seqs) {
        BOOST_TEST_REQUIRE(seqs.size() == 20u);
        for (std::size_t k = 0; k < seqs.size(); ++k) BOOST_TEST(seqs[k] == k + 1);
    }
    BOOST_TEST(log.payloads["s1"][0] == "{\"i\":1}");
    BOOST_TEST(eventually([&] { return primary.pending() == 0; }));
    BOOST_TEST(primary.secondary_online());
    BOOST_TEST(log.payloads["s2"][19] == "{\"i\":59}");
}

BOOST_FIXTURE_TEST_CASE(a_batch_is_stored_in_order_or_not_at_all, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::vector<std::tuple<boost::system::error_code, std::uint64_t>> results;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto tok = asio::as_tuple(asio::use_awaitable);
            std::vector<std::string> first{"1", "2", "3"}, bad{"4", "{oops", "6"}, second{" 7 ", "8"}, none;
            results.push_back(co_await primary.async_publish_batch("b", first, tok));
            results.push_back(co_await primary.async_publish_batch("b", bad, tok));
            results.push_back(co_await primary.async_publish_batch("b", second, tok));
            results.push_back(co_await primary.async_publish_batch("b", none, tok));
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(results.size() == 4u);
    BOOST_TEST(!std::get<0>(results[0]));
    BOOST_TEST(std::get<1>(results[0]) == 3u);  // the last one's seq
    BOOST_TEST((std::get<0>(results[1]) == publish_error::invalid_payload));
    BOOST_TEST(!std::get<0>(results[2]));
    BOOST_TEST(std::get<1>(results[2]) == 5u);  // nothing of the refused batch took a seq
    BOOST_TEST((std::get<0>(results[3]) == publish_error::invalid_payload));
    BOOST_TEST_REQUIRE(eventually([&] { return log.total() == 5; }));
    std::lock_guard l(log.m);
    BOOST_TEST(log.payloads["b"] == (std::vector<std::string>{"1", "2", "3", "7", "8"}),
               boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(transactional_writes_commit_with_the_message_or_not_at_all, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::vector<std::tuple<boost::system::error_code, std::uint64_t>> results;
    auto writes_order = [](int id) {
        return [id](sqlite3* db) { exec(db, "INSERT INTO orders VALUES(" + std::to_string(id) + ",'book')"); };
    };
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto tok = asio::as_tuple(asio::use_awaitable);
            results.push_back(co_await primary.async_publish_with("orders", "{\"order\":1}", writes_order(1), tok));
            // The same primary key again: the application's write fails, so
            // no message is stored and the seq is not used.
            results.push_back(co_await primary.async_publish_with("orders", "{\"order\":1}", writes_order(1), tok));
            results.push_back(co_await primary.async_publish_with(
                "orders", "{\"order\":2}",
                [](sqlite3*) {
                    throw boost::system::system_error(
                        make_error_code(boost::system::errc::resource_unavailable_try_again), "out of stock");
                },
                tok));
            // Writes that try to end the node's transaction (their own
            // ROLLBACK, its refusal ignored) and go on writing: nothing of
            // them is stored, not even what they wrote after it.
            results.push_back(co_await primary.async_publish_with(
                "orders", "{\"order\":9}",
                [](sqlite3* db) {
                    sqlite3_exec(db, "INSERT INTO orders VALUES(8,'pen')", nullptr, nullptr, nullptr);
                    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
                    sqlite3_exec(db, "INSERT INTO orders VALUES(9,'pen')", nullptr, nullptr, nullptr);
                },
                tok));
            results.push_back(co_await primary.async_publish_with("orders", "{\"order\":3}", writes_order(3), tok));
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(results.size() == 5u);
    BOOST_TEST((std::get<0>(results[3]) == publish_error::writes_failed), std::get<0>(results[3]).message());
    results.erase(results.begin() + 3);
    BOOST_TEST(!std::get<0>(results[0]));
    BOOST_TEST(std::get<1>(results[0]) == 1u);
    // UNIQUE constraint: the test's exec throws a std::runtime_error.
    BOOST_TEST((std::get<0>(results[1]) == publish_error::writes_failed), std::get<0>(results[1]).message());
    // The application's own error code comes back as it was thrown.
    BOOST_TEST((std::get<0>(results[2]) == boost::system::errc::resource_unavailable_try_again),
               std::get<0>(results[2]).message());
    BOOST_TEST(!std::get<0>(results[3]));
    BOOST_TEST(std::get<1>(results[3]) == 2u);  // nothing of the failed ones took a seq
    BOOST_TEST_REQUIRE(eventually([&] { return log.total() == 2; }));
    {
        std::lock_guard l(log.m);
        BOOST_TEST(log.payloads["orders"] == (std::vector<std::string>{"{\"order\":1}", "{\"order\":3}"}),
                   boost::test_tools::per_element());
    }
    // The application's rows: exactly the two whose message was stored.
    sqlite3* db = nullptr;
    BOOST_REQUIRE_EQUAL(sqlite3_open((scratch.path / "outbox" / "primary.db").c_str(), &db), SQLITE_OK);
    BOOST_TEST(count_rows(db, "SELECT count(*) FROM orders") == 2);
    BOOST_TEST(count_rows(db, "SELECT sum(id) FROM orders") == 4);
    sqlite3_close(db);
}

BOOST_FIXTURE_TEST_CASE(writes_that_would_end_the_transaction_fail_alone, pair_fixture) {
    // An application's COMMIT, ROLLBACK, BEGIN, or RELEASE / ROLLBACK TO of
    // the node's savepoint is refused when prepared: its publish fails and
    // keeps nothing, and the publishes sharing its group commit (held behind
    // one transaction so that they group) are stored as if it were not there.
    stderr_capture log_of(scratch.path / "stderr.log");
    asio::io_context ioc;
    // Each statement, and how the log names it once refused ("": it fails
    // without a refusal: a RELEASE of its own savepoint, twice).
    const std::vector<std::pair<std::string, std::string>> cases{
        {"COMMIT", "COMMIT"},
        {"ROLLBACK", "ROLLBACK"},
        {"RELEASE steadfast_job", "RELEASE steadfast_job"},
        {"ROLLBACK TO Steadfast_Job", "ROLLBACK TO Steadfast_Job"},
        {"SAVEPOINT steadfast_job; RELEASE steadfast_job; RELEASE steadfast_job", "SAVEPOINT steadfast_job"},
        {"BEGIN", "BEGIN"},
        {"END", "COMMIT"},  // (SQLite's name for it)
        {"PRAGMA query_only=1", "PRAGMA query_only=1"},
        {"PRAGMA synchronous=OFF", "PRAGMA synchronous=OFF"},
        {"CREATE TEMP TABLE streams(x)", "a statement naming \"streams\""},
        {"DELETE FROM outbox", "a statement naming \"outbox\""},
        {"SAVEPOINT job; RELEASE job; RELEASE job", ""},
    };
    std::vector<std::string> endings;
    for (const auto& c : cases) endings.push_back(c.first);
    std::vector<boost::system::error_code> guilty(endings.size() + 1);
    std::vector<std::pair<boost::system::error_code, std::uint64_t>> innocent;
    std::vector<std::pair<boost::system::error_code, std::uint64_t>> own_savepoints;
    {
        replication::primary_node primary(ioc.get_executor(), pc);
        database_hold hold(primary);
        BOOST_REQUIRE(hold.holding());
        auto plain = [&](std::size_t i) {
            primary.async_publish(
                "plain", "{\"n\":" + std::to_string(i) + "}",
                [&](boost::system::error_code ec, std::uint64_t seq) { innocent.emplace_back(ec, seq); });
        };
        for (std::size_t i = 0; i < endings.size(); ++i) {
            plain(i);
            primary.async_publish_with(
                "orders", "{\"bad\":" + std::to_string(i) + "}",
                [sql = endings[i], i](sqlite3* db) {
                    exec(db, "INSERT INTO orders VALUES(" + std::to_string(100 + i) + ",'pen')");
                    exec(db, sql);  // refused: throws
                },
                [&guilty, i](boost::system::error_code ec, std::uint64_t) { guilty[i] = ec; });
        }
        // One that ignores the refusal and returns as if its COMMIT worked.
        primary.async_publish_with(
            "orders", "{\"bad\":\"quiet\"}",
            [](sqlite3* db) {
                exec(db, "INSERT INTO orders VALUES(200,'pen')");
                sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
                exec(db, "INSERT INTO orders VALUES(201,'pen')");
            },
            [&guilty, n = endings.size()](boost::system::error_code ec, std::uint64_t) { guilty[n] = ec; });
        // Savepoints of its own are its to release or roll back.
        primary.async_publish_with(
            "orders", "{\"good\":1}",
            [](sqlite3* db) {
                exec(db,
                     "SAVEPOINT mine; INSERT INTO orders VALUES(1,'book'); RELEASE mine; SAVEPOINT job; "
                     "INSERT INTO orders VALUES(2,'undone'); ROLLBACK TO job; RELEASE job");
            },
            [&](boost::system::error_code ec, std::uint64_t seq) { own_savepoints.emplace_back(ec, seq); });
        plain(endings.size());
        std::this_thread::sleep_for(100ms);  // all queued behind the held transaction: one group
        hold.release();
        ioc.run();
    }
    const std::string stderr_text = log_of.finish();
    for (std::size_t i = 0; i <= endings.size(); ++i) {
        const std::string sql = i < endings.size() ? endings[i] : "COMMIT (its refusal ignored)";
        BOOST_TEST((guilty[i] == publish_error::writes_failed), sql << ": " << guilty[i].message());
    }
    for (const auto& [sql, named] : cases)
        if (!named.empty())
            BOOST_TEST(
                stderr_text.find("tried " + http::json_escape(named) + ", which was refused") != std::string::npos,
                sql << " in " << stderr_text);
    BOOST_TEST_REQUIRE(innocent.size() == endings.size() + 1);
    for (std::size_t i = 0; i < innocent.size(); ++i) {
        BOOST_TEST(!innocent[i].first, innocent[i].first.message());
        BOOST_TEST(innocent[i].second == i + 1);
    }
    BOOST_TEST_REQUIRE(own_savepoints.size() == 1u);
    BOOST_TEST(!own_savepoints[0].first, own_savepoints[0].first.message());
    BOOST_TEST(own_savepoints[0].second == 1u);  // the first of "orders" stored: none of the refused took a seq
    // The application's rows: only the one its own savepoint kept.
    sqlite3* db = nullptr;
    BOOST_REQUIRE_EQUAL(sqlite3_open((scratch.path / "outbox" / "primary.db").c_str(), &db), SQLITE_OK);
    BOOST_TEST(count_rows(db, "SELECT count(*) FROM orders") == 1);
    BOOST_TEST(count_rows(db, "SELECT sum(id) FROM orders") == 1);
    // Stopped cleanly: the outbox's tail was folded, every message in `outbox`.
    BOOST_TEST(count_rows(db, "SELECT count(*) FROM outbox_tail") == 0);
    BOOST_TEST(count_rows(db, "SELECT count(*) FROM outbox") == static_cast<std::int64_t>(endings.size() + 2));
    BOOST_TEST(count_rows(db,
                          "SELECT count(*) FROM (SELECT stream FROM outbox UNION ALL SELECT stream FROM outbox_tail) "
                          "WHERE stream='plain'") == static_cast<std::int64_t>(endings.size() + 1));
    BOOST_TEST(count_rows(db,
                          "SELECT count(*) FROM (SELECT stream FROM outbox UNION ALL SELECT stream FROM outbox_tail) "
                          "WHERE stream='orders'") == 1);
    sqlite3_close(db);
}

BOOST_FIXTURE_TEST_CASE(refusals_name_their_cause_and_store_nothing, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::vector<boost::system::error_code> errors;
    std::uint64_t last = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto tok = asio::as_tuple(asio::use_awaitable);
            auto [e1, s1] = co_await primary.async_publish("bad stream", "{}", tok);
            auto [e2, s2] = co_await primary.async_publish("ok", "{not json", tok);
            auto [e3, s3] = co_await primary.async_publish("ok", "\"" + std::string(1 << 20, 'a') + "\"", tok);
            // The shape of a dead letter's tombstone is the primary's alone.
            auto [e5, s5] = co_await primary.async_publish(
                "ok", envelope::encode_tombstone("forged", "a publisher's, not a dead letter"), tok);
            auto [e4, s4] = co_await primary.async_publish("ok", "  [1,2] \n", tok);
            errors = {e1, e2, e3, e4, e5};
            last = s4;
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(errors.size() == 5u);
    BOOST_TEST((errors[4] == publish_error::invalid_payload));
    BOOST_TEST((errors[0] == publish_error::invalid_stream));
    BOOST_TEST((errors[1] == publish_error::invalid_payload));
    BOOST_TEST((errors[2] == publish_error::too_large));
    BOOST_TEST(!errors[3]);
    BOOST_TEST(last == 1u);  // the refused ones took no seq
    BOOST_TEST_REQUIRE(eventually([&] { return log.total() == 1; }));
    {
        std::lock_guard l(log.m);
        BOOST_TEST(log.payloads["ok"][0] == "[1,2]");  // stored without the blanks around it
    }
    BOOST_TEST(errors[0].message().find("stream") != std::string::npos);
    BOOST_TEST(std::string(errors[0].category().name()) == "steadfast.replication");
    primary.stop();
    asio::io_context ioc2;
    boost::system::error_code after_stop;
    primary.async_publish("ok", "1", [&](boost::system::error_code ec, std::uint64_t) { after_stop = ec; });
    // The completion goes to the primary's executor (ioc), not ioc2.
    ioc.restart();
    ioc.run();
    BOOST_TEST((after_stop == publish_error::stopped));
}

BOOST_FIXTURE_TEST_CASE(completions_run_on_the_callers_executor_even_after_the_node_is_gone, pair_fixture) {
    asio::io_context ioc;
    std::size_t completed = 0, on_caller = 0;
    {
        replication::primary_node primary(ioc.get_executor(), pc);
        for (int i = 0; i < 50; ++i)
            primary.async_publish("d", std::to_string(i), [&](boost::system::error_code ec, std::uint64_t seq) {
                ++completed;
                if (!ec && seq > 0 && ioc.get_executor().running_in_this_thread()) ++on_caller;
            });
        BOOST_TEST(completed == 0u);  // never inline
    }                                 // destroyed at once: outstanding publishes still complete
    ioc.run();
    BOOST_TEST(completed == 50u);
    BOOST_TEST(on_caller == 50u);
}

BOOST_FIXTURE_TEST_CASE(a_disk_under_the_watermark_refuses_publishes, pair_fixture) {
    asio::io_context ioc;
    auto c = pc;
    c.min_free_bytes = std::uint64_t{1} << 62;  // more than any disk has
    replication::primary_node primary(ioc.get_executor(), c);
    boost::system::error_code ec;
    primary.async_publish("d", "1", [&](boost::system::error_code e, std::uint64_t) { ec = e; });
    ioc.run();
    BOOST_TEST((ec == publish_error::disk_low), ec.message());
}

BOOST_FIXTURE_TEST_CASE(config_errors_are_named, pair_fixture) {
    asio::io_context ioc;
    auto c = pc;
    c.secondary = "ftp://x";
    BOOST_CHECK_THROW(replication::primary_node(ioc.get_executor(), c), std::invalid_argument);
    c = pc;
    c.ladder = "10ms";
    refused_naming([&] { replication::primary_node p(ioc.get_executor(), c); }, {"ladder"},
                   "a 10ms ladder step was accepted");
    c = pc;
    c.data.clear();
    BOOST_CHECK_THROW(replication::primary_node(ioc.get_executor(), c), std::invalid_argument);
    c = pc;
    c.retain = std::chrono::milliseconds(-1);
    BOOST_CHECK_THROW(replication::primary_node(ioc.get_executor(), c), std::invalid_argument);
    // NATS settings with an HTTP secondary, or ones that cannot work.
    c = pc;
    c.nats.token = "t";
    BOOST_CHECK_THROW(replication::primary_node(ioc.get_executor(), c), std::invalid_argument);
    c = pc;
    c.secondary = "tls://127.0.0.1:1";
    c.nats.ca_file = "/nonexistent/ca.pem";
    refused_naming([&] { replication::primary_node p(ioc.get_executor(), c); }, {"/nonexistent/ca.pem"},
                   "an unreadable NATS CA file was accepted");
    {
        replication::secondary_config sc;
        sc.data = (scratch.path / "bad-replica").string();
        sc.listen = "127.0.0.1:0";
        sc.nats.user = "u";  // without a source, and without a password
        BOOST_CHECK_THROW(replication::secondary_node{sc}, std::invalid_argument);
    }
    // A token travels in an HTTP header: a newline (a line read with its
    // end), a space or nothing at all is refused by name, on both sides.
    for (const std::string& bad :
         {std::string("good\n"), std::string("good\r\nX-Injected: 1"), std::string("a b"), std::string()}) {
        c = pc;
        c.tokens = {"fine", bad};
        refused_naming([&] { replication::primary_node p(ioc.get_executor(), c); }, {"tokens[1]"},
                       "the token \"" + bad + "\" was accepted");
        replication::secondary_config sc;
        sc.data = (scratch.path / "bad-replica").string();
        sc.tokens = {bad};
        refused_naming([&] { replication::secondary_node n{sc}; }, {"secondary_config: tokens[0]"},
                       "the secondary took the token \"" + bad + "\"");
    }
    // Two nodes on one outbox: the second is refused, naming the directory.
    replication::primary_node first(ioc.get_executor(), pc);
    try {
        replication::primary_node second(ioc.get_executor(), pc);
        BOOST_FAIL("a second primary_node opened the same outbox");
    } catch (const std::runtime_error& e) {
        BOOST_TEST(std::string(e.what()).find("in use by another node of this process") != std::string::npos, e.what());
    }
}

BOOST_FIXTURE_TEST_CASE(a_schema_that_touches_the_nodes_own_tables_is_refused_by_name, pair_fixture) {
    asio::io_context ioc;
    auto refused = [](const std::function<void()>& make, const std::string& name) {
        refused_naming(make, {"\"" + name + "\" is one of the node's own tables"},
                       "a schema touching " + name + " was run");
    };
    for (const auto& [sql, name] : std::vector<std::pair<std::string, std::string>>{
             {"CREATE TABLE IF NOT EXISTS streams(x)", "streams"},
             {"CREATE TABLE orders2(id INTEGER); CREATE INDEX mine ON META(value)", "meta"},
             {"CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END", "meta"},
             {"CREATE TABLE publish_keys_at(x)", "publish_keys_at"},
             {"CREATE TABLE publish_keys_stream(x)", "publish_keys_stream"},
             {"INSERT INTO meta(key, value) VALUES('x', 'y')", "meta"}}) {
        auto c = pc;
        c.schema = pc.schema + ";" + sql;
        refused([&] { replication::primary_node p(ioc.get_executor(), c); }, name);
    }
    // A rename to one of them, a virtual table of that name (the node's
    // tables exist when the schema runs): SQLite's own refusal, as a bad
    // setting naming the table.
    for (const auto& [sql, name] : std::vector<std::pair<std::string, std::string>>{
             {"CREATE TABLE mine(x); ALTER TABLE mine RENAME TO streams", "streams"},
             {"CREATE VIRTUAL TABLE outbox USING rtree(id, a, b)", "outbox"}}) {
        auto c = pc;
        c.schema = sql;
        refused_naming([&] { replication::primary_node p(ioc.get_executor(), c); }, {"primary_config::schema", name},
                       "a schema making " + name + " was run");
    }
    // So is SQL that does not parse.
    {
        auto c = pc;
        c.schema = "CREATE TABLE kv3(k";
        BOOST_CHECK_THROW(replication::primary_node(ioc.get_executor(), c), std::invalid_argument);
    }
    // The same on a store's first start (each on a directory of its own),
    // where the node's tables did not exist yet when the schema ran: then
    // accepted, or failing with SQLite's "no such table", and refused at the
    // next start.
    int fresh = 0;
    for (const auto& [sql, name] : std::vector<std::pair<std::string, std::string>>{
             {"DROP TABLE IF EXISTS dead_letter", "dead_letter"},
             {"DELETE FROM streams", "streams"},
             {"CREATE INDEX mine ON outbox(at_ms)", "outbox"},
             {"CREATE TRIGGER t AFTER INSERT ON acks BEGIN SELECT 1; END", "acks"}}) {
        auto c = pc;
        c.data = (scratch.path / ("fresh-" + std::to_string(++fresh))).string();
        c.schema = sql;
        refused([&] { replication::primary_node p(ioc.get_executor(), c); }, name);
    }
    {
        auto c = pc;
        c.schema = "PRAGMA writable_schema=ON";
        refused_naming([&] { replication::primary_node p(ioc.get_executor(), c); }, {"writable_schema is refused"},
                       "PRAGMA writable_schema was run");
    }
    // A refused schema leaves nothing of itself (it ran in a savepoint).
    {
        sqlite3* db = nullptr;
        BOOST_REQUIRE(sqlite3_open((std::filesystem::path(pc.data) / "primary.db").c_str(), &db) == SQLITE_OK);
        BOOST_TEST(count_rows(db, "SELECT count(*) FROM sqlite_schema WHERE name IN ('orders2', 'mine')") == 0);
        sqlite3_close(db);
    }
    replication::secondary_config sc;
    sc.data = (scratch.path / "schema-replica").string();
    sc.fsync = false;
    sc.schema = "CREATE TABLE mine(n INTEGER); DROP TABLE applied";
    refused([&] { replication::secondary_node s(sc); }, "applied");
    // Tables of other names, and reads of the node's own, are the
    // application's business.
    sc.schema = "CREATE TABLE IF NOT EXISTS mine(n INTEGER); CREATE VIEW IF NOT EXISTS seen AS SELECT * FROM applied";
    replication::secondary_node fine(sc);
    auto c = pc;
    c.schema = pc.schema + "; CREATE TABLE IF NOT EXISTS streams_of_mine(x)";
    replication::primary_node p(ioc.get_executor(), c);
}

BOOST_FIXTURE_TEST_CASE(a_cancelled_publish_not_yet_taken_stores_nothing, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    // The database thread is held by a transaction while three operations
    // wait behind it, each cancelled with another type.
    database_hold hold(primary);
    asio::cancellation_signal one, batch, status;
    std::optional<boost::system::error_code> one_ec, batch_ec, status_ec;
    std::uint64_t seq = 99, batch_seq = 99;
    primary.async_publish("c", "{}", asio::bind_cancellation_slot(one.slot(), [&](auto e, std::uint64_t s) {
                              one_ec = e;
                              seq = s;
                          }));
    primary.async_publish_batch("c", {"1", "2"},
                                asio::bind_cancellation_slot(batch.slot(), [&](auto e, std::uint64_t s) {
                                    batch_ec = e;
                                    batch_seq = s;
                                }));
    primary.async_status(asio::bind_cancellation_slot(
        status.slot(), [&](auto e, std::vector<replication::stream_status>) { status_ec = e; }));
    BOOST_REQUIRE(hold.holding());
    one.emit(asio::cancellation_type::terminal);
    batch.emit(asio::cancellation_type::partial);
    status.emit(asio::cancellation_type::total);
    // They complete while the transaction still holds the database thread:
    // a cancelled caller does not wait for what is ahead of it.
    for (int i = 0; i < 500 && !(one_ec && batch_ec && status_ec); ++i) ioc.run_for(10ms);
    const bool completed_while_held = one_ec && batch_ec && status_ec;
    hold.release();
    BOOST_REQUIRE(completed_while_held);
    BOOST_TEST((*one_ec == asio::error::operation_aborted), one_ec->message());
    BOOST_TEST((*batch_ec == asio::error::operation_aborted), batch_ec->message());
    BOOST_TEST((*status_ec == asio::error::operation_aborted), status_ec->message());
    BOOST_TEST(seq == 0u);
    BOOST_TEST(batch_seq == 0u);
    ioc.restart();
    ioc.run();  // the transaction ends; the cancelled jobs, reached, do nothing
    // The next publish of the stream is its first message.
    std::uint64_t next = 0;
    primary.async_publish("c", "{}", [&](auto, std::uint64_t s) { next = s; });
    ioc.restart();
    ioc.run();
    BOOST_TEST(next == 1u);
}

// Plain publishes made one by one share a group commit (publish_batcher);
// a batch, a transactional publish or a publish under a key started between
// two of them still takes its seqs between theirs: the order of the calls.
BOOST_FIXTURE_TEST_CASE(publishes_of_every_kind_take_seqs_in_the_order_they_were_made, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    database_hold hold(primary);  // everything below waits behind it, the first plain group not taken
    std::vector<std::pair<std::string, std::uint64_t>> seqs;
    auto record = [&](std::string what) {
        return [&seqs, what](boost::system::error_code ec, auto r) {
            BOOST_TEST(!ec, what << ": " << ec.message());
            if constexpr (std::is_same_v<decltype(r), std::uint64_t>)
                seqs.emplace_back(what, r);
            else
                seqs.emplace_back(what, r.seq);
        };
    };
    primary.async_publish("o", "{\"a\":1}", record("plain 1"));
    primary.async_publish("o", "{\"a\":2}", record("plain 2"));
    primary.async_publish_batch("o", {"3", "4"}, record("batch"));
    primary.async_publish("o", "{\"a\":5}", record("plain 5"));
    primary.async_publish_with(
        "o", "{\"a\":6}", [](sqlite3*) {}, record("transactional"));
    primary.async_publish("o", "{\"a\":7}", record("plain 7"));
    primary.async_publish_once("o", "{\"a\":8}", "key-8", record("keyed"));
    primary.async_publish("o", "{\"a\":9}", record("plain 9"));
    // A transaction stores no message, but a publish made after it is
    // stored (and answered) after it.
    primary.async_transaction([](sqlite3*) {},
                              [&](boost::system::error_code ec) {
                                  BOOST_TEST(!ec, ec.message());
                                  seqs.emplace_back("transaction", 0);
                              });
    primary.async_publish("o", "{\"a\":10}", record("plain 10"));
    // A refusal answered through the node's loop: it has taken every call
    // above (the groups formed) before the database thread goes on.
    std::optional<boost::system::error_code> refused;
    primary.async_publish("not a stream!", "{}", [&](boost::system::error_code ec, std::uint64_t) { refused = ec; });
    for (int i = 0; i < 2000 && !refused; ++i) ioc.run_for(10ms);
    BOOST_TEST_REQUIRE(refused.has_value());
    BOOST_TEST(seqs.empty());  // nothing answered while the database thread is held
    BOOST_REQUIRE(hold.holding());
    hold.release();
    for (int i = 0; i < 2000 && seqs.size() < 10; ++i) ioc.run_for(10ms);
    // Answered in the order of the calls, with seqs in that order.
    const std::vector<std::pair<std::string, std::uint64_t>> expected{
        {"plain 1", 1}, {"plain 2", 2}, {"batch", 4},   {"plain 5", 5},     {"transactional", 6},
        {"plain 7", 7}, {"keyed", 8},   {"plain 9", 9}, {"transaction", 0}, {"plain 10", 10}};
    BOOST_TEST_REQUIRE(seqs.size() == expected.size());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        BOOST_TEST(seqs[i].first == expected[i].first);
        BOOST_TEST(seqs[i].second == expected[i].second);
    }
}

// The caller's executor: says when it has been called, then waits (at most
// 2 s) until the caller has emitted its cancellation before it posts (as a
// thread preempted there would). Never inline.
static test::hooked_executor waiting_executor(asio::io_context& ctx, std::atomic<bool>* called, std::atomic<bool>* go) {
    return {ctx.get_executor(),
            [called, go] {
                called->store(true);
                for (int i = 0; i < 2000 && !go->load(); ++i) std::this_thread::sleep_for(1ms);
            },
            {}};
}

BOOST_FIXTURE_TEST_CASE(a_cancellation_after_a_failed_group_completed_the_publish_changes_nothing, pair_fixture) {
    // A publish whose job never ran (a transaction ahead of it in its group
    // ended the node's transaction) completes with the group's error; a
    // cancellation emitted before its handler ran must not complete it again.
    stderr_capture log_of(scratch.path / "stderr.log");
    asio::io_context ioc;
    int calls = 0;
    boost::system::error_code got;
    std::atomic<bool> called{false}, emitted{false};
    {
        replication::primary_node primary(ioc.get_executor(), pc);
        database_hold hold(primary);
        BOOST_REQUIRE(hold.holding());
        // These two wait together: the next group.
        // (A conflict that rolls back: an explicit ROLLBACK is refused.)
        primary.async_transaction(
            [](sqlite3* db) {
                sqlite3_exec(db,
                             "CREATE TEMP TABLE k(x PRIMARY KEY); INSERT INTO k VALUES(1); "
                             "INSERT OR ROLLBACK INTO k VALUES(1)",
                             nullptr, nullptr, nullptr);
            },
            asio::detached);
        asio::cancellation_signal cancel;
        primary.async_publish(
            "s", "{}",
            asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(waiting_executor(ioc, &called, &emitted),
                                                                            [&](auto ec, std::uint64_t) {
                                                                                ++calls;
                                                                                got = ec;
                                                                            })));
        std::this_thread::sleep_for(100ms);  // both queued behind the held transaction
        hold.release();
        BOOST_REQUIRE(eventually([&] { return called.load(); }));  // the publish is being completed
        cancel.emit(asio::cancellation_type::terminal);
        emitted = true;
        std::this_thread::sleep_for(200ms);  // time for a second completion, were there one
        ioc.run();
        // The node still works.
        std::uint64_t next = 0;
        primary.async_publish("s", "{}", [&](auto, std::uint64_t s) { next = s; });
        ioc.restart();
        ioc.run();
        BOOST_TEST(next == 1u);
    }
    const std::string stderr_text = log_of.finish();
    BOOST_TEST(calls == 1);
    // Not its own code's failure: another job of its group commit's.
    BOOST_TEST(got.message().find("another job of its group commit") != std::string::npos, got.message());
    BOOST_TEST(stderr_text.find("primary_node_failed") == std::string::npos, stderr_text);
}

BOOST_FIXTURE_TEST_CASE(a_transaction_that_throws_keeps_nothing_and_completes_with_its_code, pair_fixture) {
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::vector<boost::system::error_code> got;
    auto note = [&](boost::system::error_code e) { got.push_back(e); };
    primary.async_transaction(
        [](sqlite3* db) {
            exec(db, "INSERT INTO orders(id, what) VALUES(1, 'kept?')");
            throw std::runtime_error("no such customer");
        },
        note);
    primary.async_transaction(
        [](sqlite3* db) {
            exec(db, "INSERT INTO orders(id, what) VALUES(2, 'kept?')");
            throw boost::system::system_error(make_error_code(boost::system::errc::permission_denied));
        },
        note);
    primary.async_transaction([](sqlite3* db) { exec(db, "INSERT INTO orders(id, what) VALUES(3, 'kept')"); }, note);
    primary.async_transaction(
        [](sqlite3*) { throw std::system_error(std::make_error_code(std::errc::no_space_on_device), "std's own"); },
        note);
    std::int64_t rows = -1;
    primary.async_transaction([&](sqlite3* db) { rows = count_rows(db, "SELECT count(*) FROM orders"); }, note);
    ioc.run();
    BOOST_REQUIRE(got.size() == 5u);
    BOOST_TEST((got[0] == replication::publish_error::writes_failed), got[0].message());
    BOOST_TEST((got[1] == boost::system::errc::permission_denied), got[1].message());
    BOOST_TEST(!got[2]);
    BOOST_TEST((got[3] == boost::system::errc::no_space_on_device), got[3].message());  // a std::system_error's
    BOOST_TEST(!got[4]);
    BOOST_TEST(rows == 1);  // the third's row alone: the others' writes went with their throws
}

BOOST_FIXTURE_TEST_CASE(a_commit_that_stored_nothing_does_not_mark_failing_storage_recovered, pair_fixture) {
    // The outbox fails (SQLite's page limit: a full disk, for the node);
    // then a publish whose writes throw commits a transaction that wrote
    // nothing, and a key replayed and a requeue of no dead letter read only:
    // none shows the storage works again. A publish that is stored does.
    stderr_capture log_of(scratch.path / "stderr.log");
    asio::io_context ioc;
    std::vector<boost::system::error_code> got;
    std::size_t recovered_early = 0;
    auto count = [&](const char* event) {
        std::ifstream in(log_of.file);
        const std::string text{std::istreambuf_iterator<char>(in), {}};
        std::size_t n = 0;
        for (auto at = text.find(event); at != std::string::npos; at = text.find(event, at + 1)) ++n;
        return n;
    };
    {
        replication::primary_node primary(ioc.get_executor(), pc);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto tok = asio::as_tuple(asio::use_awaitable);
                auto [e0, s0] = co_await primary.async_publish_once("orders", "{\"n\":0}", "key-0", tok);
                got.push_back(e0);
                got.push_back(std::get<0>(co_await primary.async_transaction(
                    [](sqlite3* db) {
                        const auto pages = count_rows(db, "PRAGMA page_count");
                        exec(db, "PRAGMA max_page_count=" + std::to_string(pages));
                    },
                    tok)));
                const std::string big = "\"" + std::string(200'000, 'x') + "\"";
                got.push_back(std::get<0>(co_await primary.async_publish("orders", big, tok)));  // full
                got.push_back(std::get<0>(co_await primary.async_publish_with(
                    "orders", "{\"n\":1}",
                    [](sqlite3*) {
                        throw boost::system::system_error(
                            make_error_code(boost::system::errc::resource_unavailable_try_again), "out of stock");
                    },
                    tok)));
                got.push_back(std::get<0>(co_await primary.async_publish_once("orders", "{\"n\":0}", "key-0", tok)));
                got.push_back(std::get<0>(co_await primary.async_requeue(999, tok)));  // no such dead letter: a read
                std::fflush(stderr);
                recovered_early = count("storage_recovered");
                got.push_back(std::get<0>(co_await primary.async_transaction(
                    [](sqlite3* db) { exec(db, "PRAGMA max_page_count=1073741823"); }, tok)));
                got.push_back(std::get<0>(co_await primary.async_publish("orders", "{\"n\":2}", tok)));
            },
            asio::detached);
        ioc.run();
    }
    const std::string text = log_of.finish();
    BOOST_REQUIRE(got.size() == 8u);
    BOOST_TEST(!got[0]);
    BOOST_TEST(!got[1]);
    BOOST_TEST(got[2], "the publish over the page limit was stored");
    BOOST_TEST((got[3] == boost::system::errc::resource_unavailable_try_again), got[3].message());
    BOOST_TEST(!got[4], got[4].message());  // replayed
    BOOST_TEST((got[5] == replication::publish_error::no_dead_letter), got[5].message());
    BOOST_TEST(!got[6]);
    BOOST_TEST(!got[7], got[7].message());
    BOOST_TEST(text.find("storage_failed") != std::string::npos, text);
    BOOST_TEST(recovered_early == 0u, text);
    BOOST_TEST(count("storage_recovered") == 1u, text);
}

BOOST_FIXTURE_TEST_CASE(a_publish_under_a_key_is_stored_once, pair_fixture) {
    asio::io_context ioc;
    std::vector<std::tuple<boost::system::error_code, replication::published_once>> got;
    {
        replication::primary_node primary(ioc.get_executor(), pc);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto once = [&](std::string stream, std::string payload, std::string key) {
                    return primary.async_publish_once(std::move(stream), std::move(payload), std::move(key),
                                                      asio::as_tuple(asio::use_awaitable));
                };
                got.push_back(co_await once("k", R"({"n":1})", "order-1"));
                got.push_back(co_await once("k", R"({"n":1})", "order-1"));  // a publisher that lost the answer
                got.push_back(co_await once("k", R"({"n":2})", "order-1"));  // the key, another payload
                got.push_back(co_await once("k", R"({"n":2})", ""));
                got.push_back(co_await once("k", R"({"n":2})", "has space"));
                got.push_back(co_await once("k", R"({"n":2})", "order-2"));
            },
            asio::detached);
        ioc.run();
        BOOST_REQUIRE(eventually([&] {
            std::lock_guard l(log.m);
            return log.seqs["k"].size() >= 2;
        }));
    }
    BOOST_REQUIRE(got.size() == 6u);
    auto is = [&](std::size_t i, boost::system::error_code ec, std::uint64_t seq, bool replayed) {
        const auto& [e, p] = got[i];
        BOOST_TEST((e == ec), i << ": " << e.message());
        BOOST_TEST(p.seq == seq, i);
        BOOST_TEST(p.replayed == replayed, i);
    };
    is(0, {}, 1, false);
    is(1, {}, 1, true);
    is(2, replication::publish_error::key_conflict, 1, false);
    is(3, replication::publish_error::invalid_key, 0, false);
    is(4, replication::publish_error::invalid_key, 0, false);
    is(5, {}, 2, false);
    std::lock_guard l(log.m);
    BOOST_TEST(log.seqs["k"] == (std::vector<std::uint64_t>{1, 2}), boost::test_tools::per_element());
    BOOST_TEST(log.payloads["k"] == (std::vector<std::string>{R"({"n":1})", R"({"n":2})"}),
               boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(dead_letters_are_listed_and_requeued_once, pair_fixture) {
    // A replica whose max_body is under a message: 413, a dead letter, and a
    // tombstone in its place; the stream goes on.
    secondary.reset();
    replication::secondary_config sc;
    sc.data = (scratch.path / "small").string();
    sc.fsync = false;
    sc.max_body = 2048;
    auto small = std::make_unique<replication::secondary_node>(sc);
    const auto port = small->local_endpoint().port();
    pc.secondary = "http://127.0.0.1:" + std::to_string(port);
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    const std::string big = "\"" + std::string(3000, 'x') + "\"";
    auto run = [&](auto op) {
        auto f = asio::co_spawn(ioc, std::move(op), asio::use_future);
        ioc.restart();
        ioc.run();
        return f.get();
    };
    auto acked = [&] {
        return run([&]() -> asio::awaitable<std::uint64_t> {
            auto all = co_await primary.async_status(asio::use_awaitable);
            for (auto& st : all)
                if (st.stream == "d") co_return st.acked_seq;
            co_return 0;
        });
    };
    auto requeue = [&](std::int64_t n) {
        return run([&, n]() -> asio::awaitable<std::tuple<boost::system::error_code, std::uint64_t>> {
            co_return co_await primary.async_requeue(n, asio::as_tuple(asio::use_awaitable));
        });
    };
    auto dead = [&] {
        return run([&]() -> asio::awaitable<std::vector<replication::dead_letter>> {
            co_return co_await primary.async_dead_letters(asio::use_awaitable);
        });
    };
    BOOST_TEST(run([&]() -> asio::awaitable<std::uint64_t> {
                   co_return co_await primary.async_publish("d", big, asio::use_awaitable);
               }) == 1u);
    BOOST_TEST(run([&]() -> asio::awaitable<std::uint64_t> {
                   co_return co_await primary.async_publish("d", "2", asio::use_awaitable);
               }) == 2u);
    BOOST_REQUIRE(eventually([&] { return acked() == 2u; }));
    auto letters = dead();
    BOOST_REQUIRE(letters.size() == 1u);
    BOOST_TEST(letters[0].n == 1);
    BOOST_TEST(letters[0].stream == "d");
    BOOST_TEST(letters[0].seq == 1u);
    BOOST_TEST(letters[0].payload == big);
    BOOST_TEST(letters[0].reason.find("413") != std::string::npos, letters[0].reason);
    BOOST_TEST(!letters[0].requeued_seq.has_value());
    BOOST_TEST((letters[0].at > std::chrono::system_clock::now() - std::chrono::minutes(5)));

    // The replica takes larger messages now (the same store, the same
    // port): the requeue is the stream's next message, and is applied.
    small.reset();
    sc.max_body = 1 << 20;
    sc.listen = "127.0.0.1:" + std::to_string(port);
    small = std::make_unique<replication::secondary_node>(sc);
    auto [ec, seq] = requeue(1);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(seq == 3u);
    BOOST_REQUIRE(eventually([&] { return acked() == 3u; }));
    letters = dead();
    BOOST_REQUIRE(letters.size() == 1u);  // not dead-lettered again
    BOOST_TEST((letters[0].requeued_seq == std::optional<std::uint64_t>(3)));
    // Once only; an unknown number; and not after stop().
    auto [again, again_seq] = requeue(1);
    BOOST_TEST((again == replication::publish_error::already_requeued), again.message());
    BOOST_TEST(again_seq == 3u);
    auto [unknown, unknown_seq] = requeue(99);
    BOOST_TEST((unknown == replication::publish_error::no_dead_letter), unknown.message());
    BOOST_TEST(unknown_seq == 0u);
    primary.stop();
    auto [stopped, stopped_seq] = requeue(1);
    BOOST_TEST((stopped == replication::publish_error::stopped), stopped.message());
}

BOOST_FIXTURE_TEST_CASE(a_failing_handler_is_retried_never_skipped, pair_fixture) {
    // Seq 3 of a batch of five fails twice after its write, one call a
    // request: the request's whole transaction goes (1 and 2 with it), the
    // primary sends it again.
    secondary.reset();
    start_secondary(1);
    fail_seq = 3;
    fail_next = 2;
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    std::uint64_t last = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            // (Named first: g++ 12 cannot take a braced list inside a co_await expression.)
            std::vector<std::string> five{"1", "2", "3", "4", "5"};
            last = co_await primary.async_publish_batch("f", std::move(five), asio::use_awaitable);
        },
        asio::detached);
    ioc.run();
    BOOST_TEST(last == 5u);
    const auto db_file = scratch.path / "replica" / "secondary.db";
    BOOST_TEST_REQUIRE(eventually([&] { return mirror_rows(db_file).size() >= 5 && fail_next == 0; }));
    BOOST_TEST_REQUIRE(eventually([&] { return primary.pending() == 0; }));
    // Exactly once in what the handler wrote through db, in order: the
    // rolled-back writes are gone.
    BOOST_TEST(mirror_rows(db_file) == (std::vector<std::string>{"f:1", "f:2", "f:3", "f:4", "f:5"}),
               boost::test_tools::per_element());
    // The handler itself saw 1 and 2 again after each rollback (documented).
    std::lock_guard l(log.m);
    BOOST_TEST(log.seqs["f"].size() > 5u);
}

BOOST_FIXTURE_TEST_CASE(a_handler_failing_now_and_then_is_called_again_within_the_request, pair_fixture) {
    // With the default three calls: seq 3 fails twice, its writes undone
    // each time, and the third call applies it in the same request (1 and 2
    // are not applied again). Then seq 8 fails three times: that request
    // fails whole and is sent again.
    fail_seq = 3;
    fail_next = 2;
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);
    const auto db_file = scratch.path / "replica" / "secondary.db";
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            std::vector<std::string> five{"1", "2", "3", "4", "5"};  // (named: g++ 12, as above)
            co_await primary.async_publish_batch("f", std::move(five), asio::use_awaitable);
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(eventually([&] { return primary.pending() == 0; }));
    BOOST_TEST(fail_next == 0);
    {
        std::lock_guard l(log.m);
        BOOST_TEST(log.seqs["f"] == (std::vector<std::uint64_t>{1, 2, 3, 4, 5}), boost::test_tools::per_element());
    }
    fail_seq = 8;
    fail_next = 3;
    ioc.restart();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            std::vector<std::string> four{"6", "7", "8", "9"};  // (named: g++ 12, as above)
            co_await primary.async_publish_batch("f", std::move(four), asio::use_awaitable);
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(eventually([&] { return primary.pending() == 0; }));
    BOOST_TEST(mirror_rows(db_file) ==
                   (std::vector<std::string>{"f:1", "f:2", "f:3", "f:4", "f:5", "f:6", "f:7", "f:8", "f:9"}),
               boost::test_tools::per_element());
    BOOST_TEST(fail_next == 0);  // three calls on 8 failed: its request failed, and was sent again
    std::lock_guard l(log.m);
    const auto& seen = log.seqs["f"];
    BOOST_TEST_REQUIRE(seen.size() >= 9u);
    BOOST_TEST(seen[seen.size() - 2] == 8u);
    BOOST_TEST(seen.back() == 9u);
}

BOOST_FIXTURE_TEST_CASE(a_secondary_destroyed_mid_batch_gives_it_up_and_gets_it_again, pair_fixture) {
    // A handler of 50 ms a message works through a batch of 40 when the node
    // is destroyed: it gives the batch up at the next message (nothing of it
    // stays) instead of finishing it, and a node on the same store gets the
    // whole batch again, once.
    replication::secondary_config sc;
    sc.data = (scratch.path / "slow").string();
    sc.fsync = false;
    sc.schema = "CREATE TABLE IF NOT EXISTS mirror(n INTEGER PRIMARY KEY, stream TEXT, seq INTEGER, payload TEXT)";
    std::atomic<int> calls{0};
    std::atomic<bool> slow{true};
    auto handler = [&](sqlite3* db, const envelope::message& m) {
        exec(db, "INSERT INTO mirror(stream, seq, payload) VALUES('" + m.stream + "'," + std::to_string(m.seq) + ",'" +
                     m.payload + "')");
        ++calls;
        if (slow) std::this_thread::sleep_for(50ms);
    };
    auto replica = std::make_unique<replication::secondary_node>(sc, handler);
    const auto port = replica->local_endpoint().port();
    sc.listen = "127.0.0.1:" + std::to_string(port);  // the same address for the next one
    auto to_slow = pc;
    to_slow.secondary = "http://127.0.0.1:" + std::to_string(port);
    asio::io_context ioc;
    auto primary = std::make_unique<replication::primary_node>(ioc.get_executor(), to_slow);
    std::vector<std::string> payloads;
    for (int i = 1; i <= 40; ++i) payloads.push_back(std::to_string(i));
    std::uint64_t last = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            last = co_await primary->async_publish_batch("b", payloads, asio::use_awaitable);
        },
        asio::detached);
    ioc.run();
    BOOST_TEST_REQUIRE(last == 40u);
    BOOST_TEST_REQUIRE(eventually([&] { return calls >= 2; }));
    replica.reset();
    const int seen = calls;
    BOOST_TEST(seen < 40, seen << " messages handled: the batch was finished, not given up");
    const auto db_file = scratch.path / "slow" / "secondary.db";
    BOOST_TEST(mirror_rows(db_file).empty());  // nothing of it committed
    slow = false;
    replica = std::make_unique<replication::secondary_node>(sc, handler);
    std::vector<std::string> want;
    for (int i = 1; i <= 40; ++i) want.push_back("b:" + std::to_string(i));
    BOOST_TEST_REQUIRE(eventually([&] { return mirror_rows(db_file).size() >= 40; }));
    BOOST_TEST_REQUIRE(eventually([&] { return primary->pending() == 0; }));
    BOOST_TEST(mirror_rows(db_file) == want, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_restarted_primary_delivers_what_its_outbox_holds, pair_fixture) {
    auto offline = pc;
    offline.secondary = "http://127.0.0.1:1";  // nothing there: messages stay in the outbox
    {
        asio::io_context ioc;
        replication::primary_node primary(ioc.get_executor(), offline);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 1; i <= 4; ++i)
                    co_await primary.async_publish("r", std::to_string(i), asio::use_awaitable);
            },
            asio::detached);
        ioc.run();
        BOOST_TEST(primary.pending() == 4u);
        BOOST_TEST(eventually([&] { return !primary.secondary_online(); }));
    }
    BOOST_TEST(log.total() == 0u);
    asio::io_context ioc;
    replication::primary_node primary(ioc.get_executor(), pc);  // the same outbox, the secondary there
    BOOST_TEST_REQUIRE(eventually([&] { return log.total() == 4; }));
    std::vector<replication::stream_status> st;
    BOOST_TEST_REQUIRE(eventually([&] {
        st.clear();
        primary.async_status([&](boost::system::error_code ec, std::vector<replication::stream_status> v) {
            BOOST_TEST(!ec);
            st = std::move(v);
        });
        ioc.restart();
        ioc.run_one();  // the status' completion
        return !st.empty() && st[0].acked_seq == 4;
    }));
    BOOST_TEST(st[0].stream == "r");
    BOOST_TEST(st[0].last_seq == 4u);
    std::lock_guard l(log.m);
    BOOST_TEST(log.seqs["r"] == (std::vector<std::uint64_t>{1, 2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
