// The database thread (apps/common/db_worker.hpp) on a real database: jobs
// queued while a group commits share the next transaction, each in its own
// savepoint, so that a job that throws or asks for a rollback loses only its
// own rows; a commit that fails (a full disk) fails every job of its group
// and the thread goes on; and the
// statistics behind the steadfast_*_db_* metrics count what happened.
#include <common/db_worker.hpp>
#include <common/sqlite.hpp>
#include <common/wal_vfs.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <steadfast_test/scratch_dir.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace steadfast;

namespace {
// post() with a completion that reads the failure's message ("" when the job
// committed and was flushed): what most cases here compare.
template <class Work, class Done, class... More>
void post_text(app::db_worker& w, Work work, Done done, More&&... more) {
    w.post(
        std::move(work),
        [done = std::move(done)](const app::db_failure* e) mutable { done(e ? e->what : std::string{}); },
        std::forward<More>(more)...);
}
}  // namespace

namespace {
struct fixture {
    test::scratch_dir scratch{"dbworker"};  // removed after the members below
    const std::filesystem::path dir = scratch.path;
    std::optional<app::database> db;
    fixture() {
        db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::full);
        db->exec("CREATE TABLE t(n INTEGER PRIMARY KEY, v TEXT)");
    }
    std::vector<std::int64_t> rows() {
        std::vector<std::int64_t> out;
        auto q = db->prepare("SELECT n FROM t ORDER BY n");
        while (q.step()) out.push_back(q.column_int(0));
        return out;
    }
};

// Holds the database thread in a job of its own until release() is called
// (after the jobs that must form the next group are queued).
struct hold {
    std::promise<void> started, gate;
    std::future<void> finished;
    explicit hold(app::db_worker& w) {
        auto f = std::make_shared<std::promise<void>>();
        finished = f->get_future();
        post_text(
            w,
            [this](app::database&) {
                started.set_value();
                gate.get_future().wait();
                return true;
            },
            [f](const std::string&) { f->set_value(); });
        started.get_future().wait();
    }
    void release() {
        gate.set_value();
        finished.wait();
    }
};

void insert(app::database& db, std::int64_t n) {
    auto s = db.prepare("INSERT INTO t(n) VALUES(?)");
    s.bind(1, n);
    s.step();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(app_db_worker)

BOOST_FIXTURE_TEST_CASE(jobs_queued_during_a_commit_share_the_next_and_fail_alone, fixture) {
    std::vector<std::string> results(5, "not run");
    {
        app::db_worker w(*db);
        std::vector<std::future<void>> done;
        std::vector<std::size_t>
            order;  // completions, in the order they came (in commit order, from the database thread or the flusher)
        std::vector<std::size_t> rolled_back;  // told on the database thread, before the answers
        auto post = [&](std::size_t i, std::function<bool(app::database&)> work) {
            auto p = std::make_shared<std::promise<void>>();
            done.push_back(p->get_future());
            post_text(
                w, std::move(work),
                [&results, &order, i, p](const std::string& err) {
                    results[i] = err;
                    order.push_back(i);
                    p->set_value();
                },
                [&rolled_back, i] { rolled_back.push_back(i); });
        };
        hold busy(w);  // the five below queue while it runs: one group after it
        post(0, [](app::database& d) {
            insert(d, 1);
            return true;
        });
        post(1, [](app::database& d) {  // asks for its own rollback: row 2 is never kept
            insert(d, 2);
            return false;
        });
        post(2, [](app::database& d) {  // fails after writing: row 3 goes, row 1 stays
            insert(d, 3);
            insert(d, 1);  // UNIQUE constraint: throws db_error
            return true;
        });
        post(3, [](app::database& d) {
            insert(d, 4);
            return true;
        });
        post(4, [](app::database&) -> bool { throw std::runtime_error("not a database error"); });
        busy.release();
        for (auto& f : done) f.wait();
        BOOST_TEST((order == std::vector<std::size_t>{0, 1, 2, 3, 4}));  // in queue order (--stdin relies on it)
        // The jobs that failed on their own (not the one that asked for its
        // rollback: no error).
        BOOST_TEST((rolled_back == std::vector<std::size_t>{2, 4}));
        const auto s = w.get_stats();
        BOOST_TEST(s.commits == 2u);  // the holding job's, then the five's together
        BOOST_TEST(s.jobs == 6u);
        BOOST_TEST(s.work_seconds > 0.0);
        BOOST_TEST(s.commit_seconds > 0.0);  // the WAL written (sync_mode::full)
        BOOST_TEST(s.flushes >= 1u);         // and flushed, beside
    }
    BOOST_TEST(results[0] == "");
    BOOST_TEST(results[1] == "");  // a rollback on request is no error
    BOOST_TEST(results[2].find("UNIQUE") != std::string::npos, results[2]);
    BOOST_TEST(results[3] == "");
    BOOST_TEST(results[4] == "not a database error");
    BOOST_TEST((rows() == std::vector<std::int64_t>{1, 4}));
}

// Descriptors of this process open on SQLite's temporary files (a
// savepoint's journal that outgrew memory: opened, then unlinked).
int open_temp_files() {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        std::error_code lec;
        if (std::filesystem::read_symlink(e.path(), lec).string().find("etilqs_") != std::string::npos) ++n;
    }
    return n;
}

// A job alone in its group runs in the transaction itself, with no savepoint:
// a rollback it asks for, or its failure, undoes just it (there is nothing
// else), and a big job's undo record never spills to a temporary file (a
// savepoint's does past 64 KiB: a secondary's request of many messages made
// one a commit).
BOOST_FIXTURE_TEST_CASE(a_job_alone_needs_no_savepoint, fixture) {
    app::db_worker w(*db);
    auto lone = [&](std::function<bool(app::database&)> work) {
        std::promise<std::string> p;
        post_text(w, std::move(work), [&p](const std::string& err) { p.set_value(err); });
        return p.get_future().get();  // answered before the next is posted: a group of one each
    };
    // 200 rows of 1 KiB, then each of them rewritten: 200 KiB of pages that
    // existed before the job (what a savepoint must keep to undo).
    auto rewrite = [](app::database& d, char with) {
        auto s = d.prepare("UPDATE t SET v = ?");
        s.bind(1, std::string(1024, with));
        s.step();
    };
    BOOST_TEST(lone([](app::database& d) {
                   auto s = d.prepare("INSERT INTO t(n, v) VALUES(?, ?)");
                   for (std::int64_t n = 1; n <= 200; ++n) {
                       s.bind(1, n);
                       s.bind(2, std::string(1024, 'a'));
                       s.step();
                       s.reset();
                   }
                   return true;
               }) == "");
    int spilled = -1;
    BOOST_TEST(lone([&](app::database& d) {
                   rewrite(d, 'b');
                   spilled = open_temp_files();
                   return true;
               }) == "");
    BOOST_TEST(spilled == 0);
    BOOST_TEST(lone([&](app::database& d) {  // asks for its rollback: none of it stays
                   rewrite(d, 'c');
                   insert(d, 1000);
                   return false;
               }) == "");
    BOOST_TEST(lone([&](app::database& d) -> bool {  // fails after writing: none of it stays
                   rewrite(d, 'd');
                   insert(d, 2000);
                   throw std::runtime_error("the job's own failure");
               }) == "the job's own failure");
    BOOST_TEST(lone([](app::database& d) {  // and the next commits
                   insert(d, 5000);
                   return true;
               }) == "");
    const auto stats = w.get_stats();
    BOOST_TEST(stats.jobs == 5u);
    BOOST_TEST(stats.commits == 3u);  // the two rolled back committed nothing
    w.stop();
    const auto got = rows();
    BOOST_TEST(got.size() == 201u);
    BOOST_TEST(got.back() == 5000);
    auto q = db->prepare("SELECT count(*) FROM t WHERE v = ?");
    q.bind(1, std::string(1024, 'b'));
    BOOST_TEST((q.step() && q.column_int(0) == 200));  // the rewrite kept; the undone ones gone
}

// run()'s outcomes are typed: the value, or a db_failure whose code says
// what failed (SQLite's extended result code in db_category(), or
// db_job_threw) beside SQLite's whole message; value() on a failure throws.
BOOST_FIXTURE_TEST_CASE(run_answers_a_value_or_a_typed_failure, fixture) {
    namespace asio = boost::asio;
    std::optional<app::db_result<int>> ok, constraint, threw;
    {
        asio::io_context ioc;
        app::db_worker w(*db);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto one = [](app::database& d, bool&) {
                    insert(d, 1);
                    return 7;
                };
                ok = co_await w.run<int>(ioc.get_executor(), std::move(one));
                auto again = [](app::database& d, bool&) {
                    insert(d, 1);  // the primary key again
                    return 8;
                };
                constraint = co_await w.run<int>(ioc.get_executor(), std::move(again));
                auto own = [](app::database&, bool&) -> int { throw std::runtime_error("not a database error"); };
                threw = co_await w.run<int>(ioc.get_executor(), std::move(own));
            },
            asio::detached);
        ioc.run();
    }
    BOOST_REQUIRE(ok && constraint && threw);
    BOOST_TEST(ok->has_value());
    BOOST_TEST(**ok == 7);
    BOOST_TEST(!app::failed(*ok));
    BOOST_REQUIRE(constraint->has_error());
    BOOST_TEST(constraint->error().code == app::make_db_error_code(SQLITE_CONSTRAINT_PRIMARYKEY));
    BOOST_TEST(&constraint->error().code.category() == &app::db_category());
    BOOST_TEST(constraint->error().code.message() == "constraint failed");
    BOOST_TEST(constraint->error().what.find("UNIQUE constraint failed: t.n") != std::string::npos,
               constraint->error().what);
    BOOST_TEST(*app::failed(*constraint) == constraint->error().what);
    BOOST_CHECK_THROW((void)constraint->value(), app::db_error);
    BOOST_REQUIRE(threw->has_error());
    BOOST_TEST(threw->error().code == app::make_db_error_code(app::db_job_threw));
    BOOST_TEST(threw->error().what == "not a database error");
    BOOST_TEST((rows() == std::vector<std::int64_t>{1}));
}

// async_run takes any completion token, answers on the handler's executor,
// never inline, and keeps that executor's event loop from running out of work
// until it has answered.
BOOST_FIXTURE_TEST_CASE(async_run_takes_any_completion_token, fixture) {
    namespace asio = boost::asio;
    asio::io_context ioc;
    std::optional<app::db_result<int>> by_callback, by_deferred;
    bool launched = false;
    {
        app::db_worker w(*db);
        w.async_run<int>(
            ioc.get_executor(),
            [](app::database& d, bool&) {
                insert(d, 5);
                return 5;
            },
            [&](app::db_result<int> r) { by_callback = std::move(r); });
        BOOST_TEST(!by_callback.has_value());  // never inline
        auto op = w.async_run<int>(
            ioc.get_executor(),
            [&launched](app::database& d, bool&) {
                launched = true;
                insert(d, 6);
                return 6;
            },
            asio::deferred);
        ioc.run();  // returns once the callback has run: the job kept it busy
        BOOST_REQUIRE(by_callback.has_value());
        BOOST_TEST(**by_callback == 5);
        BOOST_TEST(!launched);  // deferred: nothing until it is launched
        std::move(op)([&](app::db_result<int> r) { by_deferred = std::move(r); });
        ioc.restart();
        ioc.run();
    }
    BOOST_REQUIRE(by_deferred.has_value());
    BOOST_TEST(**by_deferred == 6);
    BOOST_TEST((rows() == std::vector<std::int64_t>{5, 6}));
}

// Per-operation cancellation: a queued job is dropped and never runs; a job
// the database thread has taken completes as usual.
BOOST_FIXTURE_TEST_CASE(async_run_cancels_a_queued_job_only, fixture) {
    namespace asio = boost::asio;
    for (auto type :
         {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
        asio::io_context ioc;
        std::optional<app::db_result<int>> got;
        asio::cancellation_signal sig;
        {
            app::db_worker w(*db);
            {
                hold busy(w);
                w.async_run<int>(
                    ioc.get_executor(),
                    [](app::database& d, bool&) {
                        insert(d, 7);
                        return 7;
                    },
                    asio::bind_cancellation_slot(sig.slot(), [&](app::db_result<int> r) { got = std::move(r); }));
                sig.emit(type);  // still queued behind the holding job
                busy.release();
            }
            ioc.run();
        }
        BOOST_REQUIRE(got.has_value());
        BOOST_REQUIRE(got->has_error());
        BOOST_TEST(got->error().code == boost::asio::error::operation_aborted);
        BOOST_TEST(rows().empty());  // it never ran
    }
    // Taken already: the cancellation is too late, the job completes, once.
    asio::io_context ioc;
    std::optional<app::db_result<int>> got;
    int calls = 0;
    asio::cancellation_signal sig;
    std::promise<void> running, go;
    {
        app::db_worker w(*db);
        w.async_run<int>(
            ioc.get_executor(),
            [&](app::database& d, bool&) {
                running.set_value();
                go.get_future().wait();
                insert(d, 8);
                return 8;
            },
            asio::bind_cancellation_slot(sig.slot(), [&](app::db_result<int> r) {
                ++calls;
                got = std::move(r);
            }));
        running.get_future().wait();
        sig.emit(asio::cancellation_type::terminal);
        go.set_value();
        ioc.run();
        sig.emit(asio::cancellation_type::terminal);  // after the answer: the slot was cleared
    }
    BOOST_TEST(calls == 1);
    BOOST_REQUIRE(got.has_value());
    BOOST_TEST(got->has_value());
    BOOST_TEST((rows() == std::vector<std::int64_t>{8}));
}

// A cancellation of type none is no cancellation; value() on a cancelled
// job throws db_error with its code; a job submitted after the thread has
// stopped is answered at once (shut_down) instead of never.
BOOST_FIXTURE_TEST_CASE(async_run_none_is_no_cancellation_and_a_stopped_worker_answers, fixture) {
    namespace asio = boost::asio;
    asio::io_context ioc;
    std::optional<app::db_result<int>> kept, cancelled, late;
    asio::cancellation_signal none_sig, sig;
    {
        app::db_worker w(*db);
        {
            hold busy(w);
            w.async_run<int>(
                ioc.get_executor(),
                [](app::database& d, bool&) {
                    insert(d, 1);
                    return 1;
                },
                asio::bind_cancellation_slot(none_sig.slot(), [&](app::db_result<int> r) { kept = std::move(r); }));
            w.async_run<int>(
                ioc.get_executor(), [](app::database&, bool&) { return 2; },
                asio::bind_cancellation_slot(sig.slot(), [&](app::db_result<int> r) { cancelled = std::move(r); }));
            none_sig.emit(asio::cancellation_type::none);
            sig.emit(asio::cancellation_type::total);
            busy.release();
        }
        ioc.run();
        w.stop();
        ioc.restart();
        w.async_run<int>(
            ioc.get_executor(), [](app::database&, bool&) { return 3; },
            [&](app::db_result<int> r) { late = std::move(r); });
        ioc.run();
    }
    BOOST_REQUIRE(kept.has_value());
    BOOST_TEST(kept->has_value());
    BOOST_REQUIRE(cancelled.has_value());
    BOOST_REQUIRE(cancelled->has_error());
    try {
        (void)cancelled->value();
        BOOST_FAIL("value() did not throw");
    } catch (const app::db_error& e) {
        BOOST_TEST(e.code() == boost::asio::error::operation_aborted);
    }
    BOOST_REQUIRE(late.has_value());
    BOOST_REQUIRE(late->has_error());
    BOOST_TEST(late->error().code == boost::asio::error::shut_down);
}

// Completion on the handler's associated executor (another event loop here),
// and the default token (deferred) awaited in a coroutine.
BOOST_FIXTURE_TEST_CASE(async_run_completes_on_the_handlers_executor_and_awaits, fixture) {
    namespace asio = boost::asio;
    asio::io_context ioc, other;
    std::optional<app::db_result<int>> got, awaited;
    {
        app::db_worker w(*db);
        w.async_run<int>(
            ioc.get_executor(),
            [](app::database& d, bool&) {
                insert(d, 4);
                return 4;
            },
            asio::bind_executor(other.get_executor(), [&](app::db_result<int> r) { got = std::move(r); }));
        BOOST_TEST(ioc.run() == 0u);  // nothing for this loop: the handler is the other's
        BOOST_TEST(!got.has_value());
        other.run();
        BOOST_REQUIRE(got.has_value());
        BOOST_TEST(**got == 4);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto job = [](app::database& d, bool&) {
                    insert(d, 5);
                    return 5;
                };
                awaited = co_await w.async_run<int>(ioc.get_executor(), std::move(job));
            },
            asio::detached);
        ioc.restart();
        ioc.run();
    }
    BOOST_REQUIRE(awaited.has_value());
    BOOST_TEST(**awaited == 5);
    BOOST_TEST((rows() == std::vector<std::int64_t>{4, 5}));
}

BOOST_FIXTURE_TEST_CASE(a_failed_commit_fails_its_whole_group_and_the_next_one_commits, fixture) {
    app::db_worker w(*db);
    std::atomic<int> rolled_back{0};
    std::thread::id worker_thread;
    {
        std::promise<std::thread::id> id;
        post_text(
            w,
            [&id](app::database&) {
                id.set_value(std::this_thread::get_id());
                return true;
            },
            [](const std::string&) {});
        worker_thread = id.get_future().get();
    }
    auto run = [&](std::vector<std::int64_t> ns, std::size_t bytes) {
        hold busy(w);  // all of them queue behind it: one group
        std::vector<std::future<std::string>> done;
        for (std::size_t i = 0; i < ns.size(); ++i) {
            auto p = std::make_shared<std::promise<std::string>>();
            done.push_back(p->get_future());
            post_text(
                w,
                [n = ns[i], bytes](app::database& d) {
                    auto s = d.prepare("INSERT INTO t(n, v) VALUES(?, ?)");
                    s.bind(1, n).bind(2, std::string(bytes, 'x'));
                    s.step();
                    return true;
                },
                [p](const std::string& err) { p->set_value(err); },
                [&rolled_back, &worker_thread] {
                    // On the database thread, before the next group runs.
                    if (std::this_thread::get_id() == worker_thread) ++rolled_back;
                });
        }
        busy.release();
        std::vector<std::string> out;
        for (auto& f : done) out.push_back(f.get());
        return out;
    };
    BOOST_TEST((run({1}, 10) == std::vector<std::string>{""}));
    BOOST_TEST(rolled_back.load() == 0);
    const auto before = w.get_stats();
    // The WAL may grow 64 KiB at most (a full disk): the group's 1 MiB fails
    // in the write its commit makes.
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    BOOST_REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit small = old;
    small.rlim_cur = static_cast<rlim_t>(std::filesystem::file_size(dir / "t.db-wal") + 65536);
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    const auto failed = run({2, 3}, 512 * 1024);
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    BOOST_TEST(!failed[0].empty());
    BOOST_TEST(failed[1] == failed[0]);   // the commit's error, for each job of the group
    BOOST_TEST(rolled_back.load() == 2);  // each job of the failed group told so, on the database thread
    const auto after = w.get_stats();
    BOOST_TEST(after.commits == before.commits + 1);  // the holding job's; the failed one is not counted
    BOOST_TEST(after.jobs == before.jobs + 1);
    BOOST_TEST(after.commit_seconds + after.work_seconds > before.commit_seconds + before.work_seconds);
    // The thread goes on: the next group commits.
    BOOST_TEST((run({4}, 10) == std::vector<std::string>{""}));
    BOOST_TEST(w.get_stats().commits == before.commits + 3);
    w.stop();
    BOOST_TEST((rows() == std::vector<std::int64_t>{1, 4}));
}

// A write that fails inside a job, not at the commit (the page cache spills
// to a WAL that cannot grow): SQLite rolls the whole transaction back, so the
// jobs before it in the group are undone too. Each fails with that write's
// error, not with the savepoint that went with the transaction.
BOOST_FIXTURE_TEST_CASE(a_job_whose_failure_rolls_the_transaction_back_fails_its_whole_group, fixture) {
    db.reset();
    db.emplace(dir.string(), "t.db", "steadfast-test", app::sync_mode::off);  // SQLite's own writes, at once
    db->exec("PRAGMA cache_size=-256");                                       // 256 KiB: a bigger transaction spills
    app::db_worker w(*db);
    std::vector<std::future<std::string>> done;
    auto queue = [&](std::int64_t first, int rows, std::size_t bytes) {
        auto p = std::make_shared<std::promise<std::string>>();
        done.push_back(p->get_future());
        post_text(
            w,
            [first, rows, bytes](app::database& d) {
                auto s = d.prepare("INSERT INTO t(n, v) VALUES(?, ?)");
                for (int i = 0; i < rows; ++i) {
                    s.reset();
                    s.bind(1, first + i).bind(2, std::string(bytes, 'x'));
                    s.step();
                }
                return true;
            },
            [p](const std::string& err) { p->set_value(err); });
    };
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    BOOST_REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit small = old;
    small.rlim_cur = static_cast<rlim_t>(std::filesystem::file_size(dir / "t.db-wal") + 65536);
    std::vector<std::string> errors;
    {
        // The limit is lifted again however this block ends.
        struct restore {
            rlimit r;
            ~restore() { setrlimit(RLIMIT_FSIZE, &r); }
        } lifted{old};
        hold busy(w);
        queue(1, 1, 10);         // fits
        queue(100, 2048, 1024);  // 2 MiB: spills, and the spill fails
        queue(10'000, 1, 10);    // after it, in the same group
        BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
        busy.release();
        for (auto& f : done) errors.push_back(f.get());
    }
    BOOST_TEST(!errors[0].empty());
    BOOST_TEST(errors[0].find("savepoint") == std::string::npos, errors[0]);
    BOOST_TEST(errors[1] == errors[0]);
    BOOST_TEST(errors[2] == errors[0]);
    // The thread goes on, and nothing of the failed group was kept.
    done.clear();
    queue(20'000, 1, 10);
    BOOST_TEST(done[0].get().empty());
    BOOST_TEST(w.get_stats().flushes == 0u);  // sync_mode::off: nothing to flush, answered at once
    w.stop();
    BOOST_TEST((rows() == std::vector<std::int64_t>{20'000}));
}

// A job whose own statement ends the transaction and returns as if nothing
// happened (an embedding program's ROLLBACK, INSERT OR ROLLBACK, a COMMIT of
// its own): nothing it writes afterwards is committed one statement at a
// time behind the group's back, its group fails (the others of it with a
// message of their own: another job ended it), and the next group commits.
BOOST_FIXTURE_TEST_CASE(a_job_that_ends_the_transaction_itself_fails_its_group_and_writes_nothing, fixture) {
    db->exec("CREATE TABLE u(k INTEGER PRIMARY KEY)");
    db->exec("INSERT INTO u(k) VALUES(1)");
    app::db_worker w(*db);
    for (const char* ending : {"ROLLBACK", "INSERT OR ROLLBACK INTO u(k) VALUES(1)", "COMMIT"}) {
        std::vector<std::future<std::string>> done;
        auto queue = [&](auto work) {
            auto p = std::make_shared<std::promise<std::string>>();
            done.push_back(p->get_future());
            post_text(w, std::move(work), [p](const std::string& err) { p->set_value(err); });
        };
        {
            hold busy(w);
            queue([](app::database& d) {
                insert(d, 1);
                return true;
            });
            queue([ending](app::database& d) {
                insert(d, 2);
                sqlite3_exec(d.handle(), ending, nullptr, nullptr, nullptr);  // its result ignored, as programs do
                sqlite3_exec(d.handle(), "INSERT INTO t(n) VALUES(3)", nullptr, nullptr, nullptr);
                return true;
            });
            queue([](app::database& d) {
                insert(d, 4);
                return true;
            });
            busy.release();
        }
        std::vector<std::string> errors;
        for (auto& f : done) errors.push_back(f.get());
        BOOST_TEST(errors[1].find("this job ended the transaction") == 0, ending << ": " << errors[1]);
        // The others fail for its sake, and say so.
        BOOST_TEST(errors[0].find("another job of this group commit ended the transaction") == 0,
                   ending << ": " << errors[0]);
        BOOST_TEST(errors[2] == errors[0], ending);
        BOOST_TEST(rows().empty(), ending);
    }
    // The next group commits (nothing of the veto is left behind).
    auto p = std::make_shared<std::promise<std::string>>();
    post_text(
        w,
        [](app::database& d) {
            insert(d, 5);
            return true;
        },
        [p](const std::string& err) { p->set_value(err); });
    BOOST_TEST(p->get_future().get().empty());
    w.stop();
    BOOST_TEST((rows() == std::vector<std::int64_t>{5}));
}

BOOST_FIXTURE_TEST_CASE(stop_finishes_the_queued_jobs_first, fixture) {
    std::vector<std::string> results(3, "not run");
    {
        app::db_worker w(*db);
        hold busy(w);
        for (std::size_t i = 0; i < 3; ++i)
            post_text(
                w,
                [i](app::database& d) {
                    insert(d, static_cast<std::int64_t>(20 + i));
                    return true;
                },
                [&results, i](const std::string& err) { results[i] = err; });
        std::thread stopper([&w] { w.stop(); });  // asked to stop with three jobs queued
        busy.release();
        stopper.join();
    }
    BOOST_TEST((results == std::vector<std::string>{"", "", ""}));
    BOOST_TEST((rows() == std::vector<std::int64_t>{20, 21, 22}));
}

// Waits up to 20 s for `ready` (polled: the database thread's progress has
// no signal of its own); false when it never came.
bool eventually(const std::function<bool()>& ready) {
    for (int i = 0; i < 20'000; ++i) {
        if (ready()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ready();
}

// The fsync runs beside the next group: while the flusher is in its flush,
// the database thread commits the next group, yet nobody is answered before
// the flush that covers their commit has returned, and answers keep commit
// order.
BOOST_FIXTURE_TEST_CASE(answers_wait_for_the_flush_that_covers_them, fixture) {
    std::promise<void> in_flush, gate;
    std::shared_future<void> open = gate.get_future().share();
    std::atomic<int> flushes{0};
    std::atomic<int> fd_seen{-1};
    std::vector<std::string> results(2, "not answered");
    std::vector<std::size_t> order;
    std::mutex m;
    std::vector<std::future<void>> done;
    {
        app::db_worker w(*db, [&](int fd) {
            fd_seen = fd;
            if (flushes.fetch_add(1) == 0) {
                in_flush.set_value();
                open.wait();  // the first flush holds until the test opens the gate
            }
            return ::fdatasync(fd) == 0 ? 0 : errno;
        });
        auto post = [&](std::size_t i, std::int64_t n) {
            auto p = std::make_shared<std::promise<void>>();
            done.push_back(p->get_future());
            post_text(
                w,
                [n](app::database& d) {
                    insert(d, n);
                    return true;
                },
                [&, i, p](const std::string& err) {
                    {
                        std::lock_guard l(m);
                        results[i] = err;
                        order.push_back(i);
                    }
                    p->set_value();
                });
        };
        post(0, 1);
        in_flush.get_future().wait();  // its commit is written; its flush is held
        post(1, 2);
        BOOST_TEST(eventually([&] { return w.get_stats().commits == 2u; }));
        {
            // A group that writes nothing owes no flush, yet waits behind one.
            auto p = std::make_shared<std::promise<void>>();
            done.push_back(p->get_future());
            post_text(
                w, [](app::database&) { return true; },
                [&, p](const std::string& err) {
                    {
                        std::lock_guard l(m);
                        results.push_back(err);
                        order.push_back(2);
                    }
                    p->set_value();
                });
        }
        // The second group commits while the first flush runs ...
        BOOST_TEST(eventually([&] { return w.get_stats().commits == 3u; }));
        // ... and neither is answered: the first waits for its flush, the
        // second for the first.
        BOOST_TEST((done[0].wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout));
        BOOST_TEST((done[1].wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout));
        BOOST_TEST((done[2].wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout));
        BOOST_TEST(w.get_stats().flushes == 0u);  // counted when it returns
        gate.set_value();
        for (auto& f : done) f.wait();
        BOOST_TEST(fd_seen.load() >= 0);
        BOOST_TEST(w.get_stats().flushes >= 2u);  // the first, then one for the second group
        BOOST_TEST(w.get_stats().flush_seconds > 0.0);
    }
    BOOST_TEST((results == std::vector<std::string>{"", "", ""}));
    BOOST_TEST((order == std::vector<std::size_t>{0, 1, 2}));
    BOOST_TEST((rows() == std::vector<std::int64_t>{1, 2}));
}

// A flush that fails fails the groups it covered, with a message that names
// the file and says what to do, and every later job fails without running:
// past a failed write-back what the log holds is unknown.
BOOST_FIXTURE_TEST_CASE(a_failed_flush_fails_its_groups_and_every_later_job, fixture) {
    namespace asio = boost::asio;
    asio::io_context ioc;
    std::optional<app::db_result<int>> first, later;
    std::atomic<bool> later_ran{false};
    {
        app::db_worker w(*db, [](int) { return EIO; });
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                first = co_await w.run<int>(ioc.get_executor(), [](app::database& d, bool&) {
                    insert(d, 1);
                    return 1;
                });
                later = co_await w.run<int>(ioc.get_executor(), [&](app::database& d, bool&) {
                    later_ran = true;
                    insert(d, 2);
                    return 2;
                });
            },
            asio::detached);
        ioc.run();
        BOOST_TEST(w.get_stats().flushes == 1u);  // none after the failure
    }
    BOOST_REQUIRE(first && later);
    BOOST_REQUIRE(first->has_error());
    BOOST_TEST(first->error().code == app::make_db_error_code(SQLITE_IOERR_FSYNC));
    BOOST_TEST(first->error().what.find("t.db-wal") != std::string::npos, first->error().what);
    BOOST_TEST(first->error().what.find("restart") != std::string::npos, first->error().what);
    BOOST_REQUIRE(later->has_error());
    BOOST_TEST(later->error().what == first->error().what);
    BOOST_TEST(!later_ran.load());
    // No checkpoint after a failed flush, not even the one at close: the log
    // stays, and the database file never receives its frames.
    const auto db_size = std::filesystem::file_size(dir / "t.db");
    db.reset();
    BOOST_TEST(std::filesystem::exists(dir / "t.db-wal"));
    BOOST_TEST(std::filesystem::file_size(dir / "t.db") == db_size);
}

// A group that ran before a flush failed, and read what that flush was to
// make durable, is not answered as a success: after a failed flush every
// answer goes through the flusher, with the failure.
BOOST_FIXTURE_TEST_CASE(a_group_finishing_after_a_failed_flush_fails_with_it, fixture) {
    std::promise<void> in_flush, gate, a_answered;
    std::shared_future<void> open = gate.get_future().share();
    std::shared_future<void> a_done = a_answered.get_future().share();
    std::string a_err = "not answered", b_err = "not answered";
    boost::system::error_code a_code;
    std::promise<void> b_answered;
    {
        app::db_worker w(*db, [&](int) {
            in_flush.set_value();
            open.wait();
            return EIO;
        });
        w.post(
            [](app::database& d) {
                insert(d, 1);
                return true;
            },
            [&](const app::db_failure* err) {
                a_err = err ? err->what : "";
                a_code = err ? err->code : boost::system::error_code{};
                a_answered.set_value();
            });
        in_flush.get_future().wait();
        post_text(
            w,
            [&](app::database& d) {
                // Reads the row whose flush is failing, and finishes only
                // once that failure was answered (and the flusher is idle).
                auto q = d.prepare("SELECT count(*) FROM t");
                q.step();
                a_done.wait();
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                return q.column_int(0) == 1;
            },
            [&](const std::string& err) {
                b_err = err;
                b_answered.set_value();
            });
        gate.set_value();
        b_answered.get_future().wait();
    }
    BOOST_TEST(a_err.find("cannot flush") != std::string::npos, a_err);
    // A failed flush is told apart by its code, not its words (the --stdin
    // reader's hint depends on it).
    BOOST_TEST(a_code == app::make_db_error_code(SQLITE_IOERR_FSYNC), a_code.message());
    BOOST_TEST(b_err == a_err);
}

// SQLite's automatic checkpoints still run while commits' syncs are
// deferred: a stream of commits keeps the WAL bounded and moves what it held
// into the database file.
BOOST_FIXTURE_TEST_CASE(checkpoints_keep_the_wal_bounded, fixture) {
    namespace fs = std::filesystem;
    app::db_worker w(*db);
    const auto settles_before = app::coalescing_wal_vfs_stats().settles;
    const std::string blob(16 * 1024, 'x');  // about five pages a commit
    for (std::int64_t n = 1; n <= 600; ++n) {
        std::promise<std::string> p;
        auto f = p.get_future();
        post_text(
            w,
            [&, n](app::database& d) {
                auto s = d.prepare("INSERT INTO t(n, v) VALUES(?, ?)");
                s.bind(1, n).bind(2, blob);
                s.step();
                return true;
            },
            [&p](const std::string& err) { p.set_value(err); });
        BOOST_REQUIRE(f.get().empty());
    }
    // 600 commits of about 5 pages: 3,000 frames without a checkpoint (12 MiB).
    const auto vfs = app::coalescing_wal_vfs_stats();
    BOOST_TEST(fs::file_size(dir / "t.db-wal") < std::uintmax_t{6} << 20);
    // One flush before each checkpoint's database writes, not one a page.
    BOOST_TEST(vfs.settles - settles_before >= 1u);
    BOOST_TEST(vfs.settles - settles_before <= 10u);
    BOOST_TEST(fs::file_size(dir / "t.db") > std::uintmax_t{4} << 20);  // checkpointed, while still open
    BOOST_TEST(w.get_stats().flushes >= 1u);
    w.stop();
    BOOST_TEST(rows().size() == 600u);
}

BOOST_AUTO_TEST_SUITE_END()
