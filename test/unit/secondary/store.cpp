// The secondary's store on a real SQLite file: the contract's apply rules.
#include <secondary/store.hpp>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <random>
#include <steadfast_test/scratch_dir.hpp>

using namespace steadfast;

namespace {
struct fixture {
    test::scratch_dir scratch{"store"};  // removed after the members below
    const std::filesystem::path dir = scratch.path;
    std::optional<app::database> db;
    std::optional<secondary::store> st;
    fixture() { open(); }
    void open() {
        st.reset();
        db.reset();
        db.emplace(dir.string(), "secondary.db", "steadfast-secondary", app::sync_mode::off);
        st.emplace(*db);
    }
    // Applies in a transaction, rolled back like the worker does when keep is false.
    secondary::store::answer apply(const std::string& body) {
        auto d = envelope::decode(body);
        BOOST_REQUIRE(std::holds_alternative<envelope::decoded>(d));
        db->exec("BEGIN");
        bool keep = true;
        auto a = st->apply(std::get<envelope::decoded>(d), keep);
        db->exec(keep ? "COMMIT" : "ROLLBACK");
        return a;
    }
    std::string one(const char* stream, int seq, const char* id, int epoch = 0, const char* payload = "1") {
        return std::string(R"({"id":")") + id + R"(","stream":")" + stream + R"(","seq":)" + std::to_string(seq) +
               R"(,"epoch":)" + std::to_string(epoch) + R"(,"payload":)" + payload + "}";
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(secondary_store)

BOOST_FIXTURE_TEST_CASE(duplicates_are_checked_by_id, fixture) {
    BOOST_TEST(apply(one("s", 1, "a")).body == R"({"status":"applied","seq":1})");
    BOOST_TEST(apply(one("s", 1, "a")).body == R"({"status":"duplicate","seq":1})");
    auto c = apply(one("s", 1, "other"));
    BOOST_TEST(c.status == 409u);
    BOOST_TEST(c.body == R"({"error":"conflict","stream":"s","seq":1})");
    auto g = apply(one("s", 3, "c"));
    BOOST_TEST(g.body == R"({"error":"gap","stream":"s","expected":2})");
}

BOOST_FIXTURE_TEST_CASE(one_durable_epoch_fence_for_every_stream, fixture) {
    apply(one("a", 1, "a1", 5));
    auto r = apply(one("b", 1, "b1", 3));  // another stream, never seen
    BOOST_TEST(r.status == 409u);
    BOOST_TEST(r.body == R"({"error":"stale_epoch","epoch":5})");
    open();  // a restart keeps the fence
    BOOST_TEST(apply(one("b", 1, "b1", 3)).status == 409u);
    BOOST_TEST(apply(one("b", 1, "b1", 5)).status == 200u);
    // A duplicate from a newer primary raises the fence too.
    BOOST_TEST(apply(one("a", 1, "a1", 9)).body == R"({"status":"duplicate","seq":1})");
    BOOST_TEST(apply(one("b", 2, "b2", 5)).body == R"({"error":"stale_epoch","epoch":9})");
}

BOOST_FIXTURE_TEST_CASE(a_batch_applies_atomically_in_the_contracts_order, fixture) {
    apply(one("s", 1, "s1"));
    // A conflict after good messages: nothing of the batch stays.
    auto r = apply(R"({"messages":[)" + one("s", 2, "s2") + "," + one("t", 1, "t1") + "," + one("s", 3, "s3") + "]}");
    BOOST_TEST(r.status == 200u);
    r = apply(R"({"messages":[)" + one("u", 1, "u1") + "," + one("s", 3, "X") + "]}");
    BOOST_TEST(r.body == R"({"error":"conflict","stream":"s","seq":3})");
    BOOST_TEST(apply(one("u", 1, "u1")).body == R"({"status":"applied","seq":1})");  // u1 was rolled back
    // Conflict is reported before a gap that comes earlier in the batch.
    r = apply(R"({"messages":[)" + one("v", 5, "v5") + "," + one("t", 1, "Y") + "]}");
    BOOST_TEST(r.body == R"({"error":"conflict","stream":"t","seq":1})");
    // Stale epoch before everything else.
    apply(one("w", 1, "w1", 2));
    r = apply(R"({"messages":[)" + one("t", 1, "Z", 2) + "," + one("x", 1, "x1", 1) + "]}");
    BOOST_TEST(r.body == R"({"error":"stale_epoch","epoch":2})");
}

BOOST_FIXTURE_TEST_CASE(payload_text_is_stored_as_sent, fixture) {
    apply(one("s", 1, "a", 0, R"({"b":12345678901234567890123,"a":1.0})"));
    auto q = db->prepare("SELECT payload FROM applied");
    BOOST_REQUIRE(q.step());
    BOOST_TEST(q.column_text(0) == R"({"b":12345678901234567890123,"a":1.0})");
}

// A batch whose only problem is a gap (no conflict, no stale epoch) is
// refused whole: the gap is answered, and the good message before it is
// rolled back.
BOOST_FIXTURE_TEST_CASE(a_batch_whose_only_problem_is_a_gap_is_refused_whole, fixture) {
    auto r = apply(R"({"messages":[)" + one("t", 1, "t1") + "," + one("s", 5, "s5") + "]}");
    BOOST_TEST(r.status == 409u);
    BOOST_TEST(r.body == R"({"error":"gap","stream":"s","expected":1})");
    BOOST_TEST(r.reject_reason == "gap");
    BOOST_TEST(apply(one("t", 1, "t1")).body == R"({"status":"applied","seq":1})");  // t1 was rolled back
    // The next seq after the last applied one is no gap; one more than that is.
    BOOST_TEST(apply(one("t", 2, "t2")).status == 200u);
    BOOST_TEST(apply(one("t", 4, "t4")).body == R"({"error":"gap","stream":"t","expected":3})");
}

// raise_fence only raises: 5 then 3 keeps 5, and epoch 4 is stale.
BOOST_FIXTURE_TEST_CASE(the_fence_is_never_lowered, fixture) {
    auto raise = [&](std::uint64_t e) {
        db->exec("BEGIN");
        st->raise_fence(e);
        db->exec("COMMIT");
    };
    raise(5);
    raise(3);
    auto r = apply(one("s", 1, "a", 4));
    BOOST_TEST(r.status == 409u);
    BOOST_TEST(r.body == R"({"error":"stale_epoch","epoch":5})");
    BOOST_TEST(apply(one("s", 1, "a", 5)).status == 200u);
    open();  // and it is durable
    BOOST_TEST(apply(one("s", 2, "b", 4)).body == R"({"error":"stale_epoch","epoch":5})");
}

// An epoch far above the fence (issue 28): refused with 400 naming the
// bound, nothing of the batch applied, the fence unmoved; the step's edge is
// taken. set_fence lowers the fence, and a lower epoch applies again.
BOOST_FIXTURE_TEST_CASE(epoch_beyond_the_step_is_refused, fixture) {
    st->set_max_epoch_step(10);
    BOOST_TEST(apply(one("a", 1, "a1", 5)).status == 200u);
    BOOST_TEST(st->fence() == 5u);
    auto a = apply(one("a", 2, "a2", 16));
    BOOST_TEST(a.status == 400u);
    BOOST_TEST(a.reject_reason == "epoch_too_high");
    BOOST_TEST(a.body.find("epoch 16 is more than 10 above") != std::string::npos);
    BOOST_TEST(a.body.find("fence 5") != std::string::npos);
    BOOST_TEST(st->fence() == 5u);
    // In a batch: the whole batch, even its good first message.
    auto b = apply(R"({"messages":[)" + one("a", 2, "a2", 5) + "," + one("b", 1, "b1", 99) + "]}");
    BOOST_TEST(b.status == 400u);
    BOOST_TEST(st->last_applied().size() == 1u);
    BOOST_TEST(apply(one("a", 2, "a2", 15)).status == 200u);  // fence + step: taken
    BOOST_TEST(st->fence() == 15u);
    // Lowered offline (set-fence): epoch 5 applies again.
    db->exec("BEGIN");
    st->set_fence(5);
    db->exec("COMMIT");
    BOOST_TEST(st->fence() == 5u);
    BOOST_TEST(apply(one("a", 3, "a3", 5)).status == 200u);
    // A store reopened keeps the lowered fence.
    open();
    BOOST_TEST(st->fence() == 5u);
    // Without a step (the JetStream source): no bound.
    BOOST_TEST(apply(one("a", 4, "a4", 1000000)).status == 200u);
}

// GET /api/streams' pages: name order, `after` exclusive, `more` exactly
// when another stream follows.
BOOST_FIXTURE_TEST_CASE(positions_come_in_name_order_pages, fixture) {
    for (const char* s : {"b", "a", "c", "B", "a.b"}) BOOST_TEST(apply(one(s, 1, s)).status == 200u);
    BOOST_TEST(apply(one("a", 2, "a2")).status == 200u);
    auto p1 = st->positions_after("", 2);
    BOOST_REQUIRE(p1.streams.size() == 2u);
    BOOST_TEST(p1.streams[0].stream == "B");  // byte order: upper case first
    BOOST_TEST(p1.streams[1].stream == "a");
    BOOST_TEST(p1.streams[1].last_seq == 2u);
    BOOST_TEST(p1.more);
    auto p2 = st->positions_after("a", 2);
    BOOST_REQUIRE(p2.streams.size() == 2u);
    BOOST_TEST(p2.streams[0].stream == "a.b");
    BOOST_TEST(p2.streams[1].stream == "b");
    BOOST_TEST(p2.more);
    auto p3 = st->positions_after("b", 2);
    BOOST_REQUIRE(p3.streams.size() == 1u);
    BOOST_TEST(p3.streams[0].stream == "c");
    BOOST_TEST(!p3.more);  // exactly the last: no empty page after it
    BOOST_TEST(st->positions_after("c", 2).streams.empty());
    BOOST_TEST(!st->positions_after("c", 2).more);
    BOOST_TEST(st->positions_after("", 5).streams.size() == 5u);
    BOOST_TEST(!st->positions_after("", 5).more);
}

// An apply handler's COMMIT, ROLLBACK, or RELEASE / ROLLBACK TO of a
// savepoint it did not open is refused when prepared: the message fails
// (sent again), nothing of the request is applied, and the transaction stays
// the worker's. Its own savepoints are its to use.
BOOST_FIXTURE_TEST_CASE(a_handler_cannot_end_the_transaction, fixture) {
    db->exec("CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT)");
    std::string ending;
    st->set_apply_handler([&](sqlite3* h, const envelope::message& m) {
        auto run = [h](const std::string& sql) {
            char* err = nullptr;
            const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
            std::string what = err ? err : "";
            sqlite3_free(err);
            if (rc != SQLITE_OK) throw std::runtime_error(what);
        };
        run("SAVEPOINT mine; INSERT INTO kv VALUES('" + m.id + "', '1'); RELEASE mine");
        if (!ending.empty()) run(ending);
    });
    for (const std::string e : {"COMMIT", "ROLLBACK", "RELEASE steadfast_job", "ROLLBACK TO steadfast_job", "BEGIN"}) {
        ending = e;
        db->exec("BEGIN");
        db->exec("SAVEPOINT steadfast_job");  // as the worker runs each job
        bool keep = true;
        BOOST_CHECK_EXCEPTION(st->apply(std::get<envelope::decoded>(envelope::decode(one("s", 1, "a"))), keep),
                              app::db_error, [&](const app::db_error& x) {
                                  const std::string w = x.what();
                                  BOOST_TEST(w.find("tried " + e + ", which was refused") != std::string::npos, w);
                                  return x.code() == app::make_db_error_code(app::db_apply_failed);
                              });
        BOOST_TEST(!sqlite3_get_autocommit(db->handle()));  // the worker's transaction is still there
        db->exec("ROLLBACK TO steadfast_job");
        db->exec("RELEASE steadfast_job");
        db->exec("ROLLBACK");
    }
    ending.clear();
    BOOST_TEST(apply(one("s", 1, "a")).body == R"({"status":"applied","seq":1})");
    auto rows = db->prepare("SELECT count(*) FROM kv");
    BOOST_TEST_REQUIRE(rows.step());
    BOOST_TEST(rows.column_int(0) == 1);
}

// A handler's throw undoes its writes and calls it again at once, up to the
// attempts set; then the request fails, naming how often it was tried.
BOOST_FIXTURE_TEST_CASE(a_failing_handler_is_called_again_its_writes_undone, fixture) {
    db->exec("CREATE TABLE kv(k TEXT, attempt INTEGER)");
    int fails = 0, calls = 0;
    auto handler = [&](sqlite3* h, const envelope::message& m) {
        ++calls;
        const std::string sql = "INSERT INTO kv VALUES('" + m.id + "', " + std::to_string(calls) + ")";
        BOOST_REQUIRE(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
        if (fails > 0) {
            --fails;
            throw std::runtime_error("not now");
        }
    };
    auto rows = [&] {
        auto q = db->prepare("SELECT count(*) FROM kv");
        BOOST_REQUIRE(q.step());
        return q.column_int(0);
    };
    st->set_apply_handler(handler);  // three calls
    fails = 2;
    const auto batch = R"({"messages":[)" + one("s", 1, "a") + "," + one("s", 2, "b") + "]}";
    BOOST_TEST(apply(batch).status == 200u);
    BOOST_TEST(calls == 4);   // a once, b three times
    BOOST_TEST(rows() == 2);  // the failed calls' rows are gone
    auto last = db->prepare("SELECT attempt FROM kv WHERE k='b'");
    BOOST_REQUIRE(last.step());
    BOOST_TEST(last.column_int(0) == 4);

    fails = 3;
    calls = 0;
    db->exec("BEGIN");
    bool keep = true;
    BOOST_CHECK_EXCEPTION(
        st->apply(std::get<envelope::decoded>(envelope::decode(one("s", 3, "c"))), keep), app::db_error,
        [](const app::db_error& x) {
            BOOST_TEST(std::string(x.what()).find("not now (tried 3 times in this request)") != std::string::npos,
                       x.what());
            return x.code() == app::make_db_error_code(app::db_apply_failed);
        });
    db->exec("ROLLBACK");
    BOOST_TEST(calls == 3);

    st->set_apply_handler(handler, 1);
    fails = 1;
    calls = 0;
    db->exec("BEGIN");
    BOOST_CHECK_THROW(st->apply(std::get<envelope::decoded>(envelope::decode(one("s", 3, "c"))), keep), app::db_error);
    db->exec("ROLLBACK");
    BOOST_TEST(calls == 1);
    BOOST_TEST(rows() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
