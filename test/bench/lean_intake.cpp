// The machine's floor for a durable publish, written the leanest way we know:
// issue 29's "lean intake-only prototype", kept as a benchmark so that the
// primary's intake is measured beside it in the same run (run-group.sh).
//
// One event-loop thread (Beast, a coroutine a connection), the body checked
// by simdjson's DOM parser, one SQLite thread (WAL, a prepared insert,
// synchronous=FULL: an fsync every commit) that takes everything queued
// since its last commit in one transaction: one wake-up and one completion
// post a group. It stores (stream, seq, payload) and answers {"seq":N}; it
// checks nothing else (no token, no stream cap, no idempotency key) and
// delivers nothing.
//
//   steadfast_lean_intake PORT DB [stream|arrival]
//     stream:  the table keyed by (stream, seq), as the primary's outbox
//     arrival: keyed by arrival (rowid), one leaf a commit
//     indexed: keyed by arrival, with an index on (stream, seq)
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <pthread.h>
#include <simdjson.h>
#include <sqlite3.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

struct waiting {
    asio::steady_timer* done;  // cancelled when the commit is in
    std::int64_t seq = 0;      // 0: the commit failed
};

struct item {
    std::string stream;
    std::string payload;
    waiting* w;
};

class store {
public:
    store(asio::io_context& ioc, const char* path, std::string_view layout) : ioc_(ioc) {
        const bool by_arrival = layout != "stream" && layout != "tiered";
        tiered_ = layout == "tiered";
        if (sqlite3_open(path, &db_) != SQLITE_OK) fail("open");
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=FULL");
        exec(by_arrival ? "CREATE TABLE IF NOT EXISTS m(id INTEGER PRIMARY KEY, stream TEXT NOT NULL, "
                          "seq INTEGER NOT NULL, payload BLOB NOT NULL)"
                        : "CREATE TABLE IF NOT EXISTS m(stream TEXT NOT NULL, seq INTEGER NOT NULL, "
                          "payload BLOB NOT NULL, PRIMARY KEY(stream, seq)) WITHOUT ROWID");
        if (layout == "indexed") exec("CREATE UNIQUE INDEX IF NOT EXISTS m_stream ON m(stream, seq)");
        if (tiered_) {
            exec(
                "CREATE TABLE IF NOT EXISTS hot(n INTEGER PRIMARY KEY, stream TEXT NOT NULL, seq INTEGER NOT NULL, "
                "payload BLOB NOT NULL)");
            if (sqlite3_prepare_v3(db_, "INSERT INTO m(stream, seq, payload) SELECT stream, seq, payload FROM hot", -1,
                                   SQLITE_PREPARE_PERSISTENT, &move_, nullptr) != SQLITE_OK ||
                sqlite3_prepare_v3(db_, "DELETE FROM hot", -1, SQLITE_PREPARE_PERSISTENT, &clear_, nullptr) !=
                    SQLITE_OK)
                fail("prepare");
        }
        if (sqlite3_prepare_v3(db_,
                               tiered_ ? "INSERT INTO hot(stream, seq, payload) VALUES(?, ?, ?)"
                                       : "INSERT INTO m(stream, seq, payload) VALUES(?, ?, ?)",
                               -1, SQLITE_PREPARE_PERSISTENT, &insert_, nullptr) != SQLITE_OK)
            fail("prepare");
        thread_ = std::thread([this] {
            pthread_setname_np(pthread_self(), "lean-db");
            run();
        });
    }
    ~store() {
        {
            std::lock_guard l(m_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
        sqlite3_finalize(insert_);
        sqlite3_close(db_);
    }
    // On the event loop: one wake-up a group (only when the thread sleeps).
    void push(item it) {
        bool wake;
        {
            std::lock_guard l(m_);
            queue_.push_back(std::move(it));
            wake = sleeping_;
            sleeping_ = false;
        }
        if (wake) cv_.notify_one();
    }

private:
    void fail(const char* what) {
        std::fprintf(stderr, "lean_intake: %s: %s\n", what, sqlite3_errmsg(db_));
        std::exit(2);
    }
    void exec(const char* sql) {
        if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
    }
    void run() {
        std::vector<item> group;
        for (;;) {
            {
                std::unique_lock l(m_);
                sleeping_ = true;
                cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
                sleeping_ = false;
                if (stop_) return;
                group.swap(queue_);
            }
            bool ok = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
            for (auto& it : group) {
                auto& next = next_seq_[it.stream];
                sqlite3_bind_text(insert_, 1, it.stream.data(), static_cast<int>(it.stream.size()), SQLITE_STATIC);
                sqlite3_bind_int64(insert_, 2, next + 1);
                sqlite3_bind_blob(insert_, 3, it.payload.data(), static_cast<int>(it.payload.size()), SQLITE_STATIC);
                ok = ok && sqlite3_step(insert_) == SQLITE_DONE;
                sqlite3_reset(insert_);
                it.w->seq = ++next;
            }
            if (tiered_ && (in_hot_ += group.size()) >= 4096) {
                // Into the clustered table in one go: each stream's leaves
                // are written once for thousands of messages.
                ok = ok && sqlite3_step(move_) == SQLITE_DONE;
                sqlite3_reset(move_);
                ok = ok && sqlite3_step(clear_) == SQLITE_DONE;
                sqlite3_reset(clear_);
                in_hot_ = 0;
            }
            ok = ok && sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
            if (!ok) {
                sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
                for (auto& it : group) {
                    it.w->seq = 0;           // answered 503
                    --next_seq_[it.stream];  // no seq taken
                }
            }
            // One completion post for the whole group.
            asio::post(ioc_, [g = std::move(group)] {
                for (auto& it : g) it.w->done->cancel();
            });
            group.clear();
        }
    }

    asio::io_context& ioc_;
    sqlite3* db_ = nullptr;
    sqlite3_stmt* insert_ = nullptr;
    sqlite3_stmt* move_ = nullptr;
    sqlite3_stmt* clear_ = nullptr;
    bool tiered_ = false;
    std::size_t in_hot_ = 0;
    std::unordered_map<std::string, std::int64_t> next_seq_;  // the thread's own
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<item> queue_;
    bool sleeping_ = false;
    bool stop_ = false;
    std::thread thread_;
};

asio::awaitable<void> serve(tcp::socket sock, store& db) {
    sock.set_option(tcp::no_delay(true));
    beast::flat_buffer buf;
    simdjson::dom::parser parser;
    asio::steady_timer done(sock.get_executor(), asio::steady_timer::time_point::max());
    for (;;) {
        http::request<http::string_body> req;
        auto [ec, n] = co_await http::async_read(sock, buf, req, asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
        http::response<http::string_body> res{http::status::ok, req.version()};
        res.set(http::field::content_type, "application/json");
        res.keep_alive(req.keep_alive());
        const std::string_view target = req.target();
        if (req.method() == http::verb::get && target == "/health") {
            res.body() = R"({"status":"ok"})";
        } else if (req.method() == http::verb::post && target.starts_with("/publish")) {
            auto q = target.find("stream=");
            std::string stream = q == std::string_view::npos ? "default" : std::string(target.substr(q + 7));
            auto& body = req.body();
            simdjson::padded_string padded(body);
            if (parser.parse(padded).error()) {
                res.result(http::status::bad_request);
                res.body() = R"({"error":"not JSON"})";
            } else {
                waiting w{&done};
                done.expires_at(asio::steady_timer::time_point::max());
                db.push(item{std::move(stream), std::move(body), &w});
                auto [wec] = co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
                (void)wec;  // operation_aborted: the commit is in
                if (w.seq == 0) {
                    res.result(http::status::service_unavailable);
                    res.body() = R"({"error":"storage"})";
                } else {
                    res.body() = "{\"seq\":" + std::to_string(w.seq) + "}";
                }
            }
        } else {
            res.result(http::status::not_found);
        }
        res.prepare_payload();
        auto [wec, wn] = co_await http::async_write(sock, res, asio::as_tuple(asio::use_awaitable));
        if (wec || !res.keep_alive()) co_return;
    }
}

asio::awaitable<void> listen(tcp::acceptor& acc, store& db) {
    for (;;) {
        auto [ec, sock] = co_await acc.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
        asio::co_spawn(acc.get_executor(), serve(std::move(sock), db), asio::detached);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s PORT DB [stream|arrival]\n", argv[0]);
        return 2;
    }
    const std::string_view layout = argc > 3 ? argv[3] : "stream";
    asio::io_context ioc(1);
    store db(ioc, argv[2], layout);
    tcp::acceptor acc(ioc, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::atoi(argv[1]))});
    asio::co_spawn(ioc, listen(acc, db), asio::detached);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](auto, int) { ioc.stop(); });
    ioc.run();
}
