// storage_health's decisions (issue 28), with the free space injected: the
// watermark, a failed commit, and one report per transition of ok().
#include "common/storage_health.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using namespace steadfast;

namespace {
struct fixture {
    boost::asio::io_context ioc;
    std::optional<std::uint64_t> free_bytes = 100;
    std::vector<std::string> reports;  // "ok" or "failed: why"
    app::storage_health make(std::uint64_t min_free) {
        app::storage_health::settings s{"/nowhere", min_free};
        s.free_space = [this](const std::string& dir, std::string& error) {
            BOOST_TEST(dir == "/nowhere");
            if (!free_bytes) error = "no statvfs";
            return free_bytes;
        };
        return app::storage_health(ioc.get_executor(), s, [this](bool ok, const std::string& why) {
            reports.push_back(ok ? std::string("ok") : "failed: " + why);
        });
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(app_storage_health)

BOOST_FIXTURE_TEST_CASE(the_watermark_and_commits_make_one_state, fixture) {
    auto h = make(50);
    BOOST_TEST(h.ok());
    BOOST_TEST(h.state() == std::string("ok"));
    BOOST_TEST(!h.check_disk());
    BOOST_TEST(h.available() == 100u);
    free_bytes = 49;  // under
    BOOST_TEST(h.check_disk());
    BOOST_TEST(!h.ok());
    BOOST_TEST(h.state() == std::string("low_disk_space"));
    BOOST_TEST(h.check_disk());  // still under: no second report
    BOOST_TEST(h.low_message().find("49 bytes free, under --min-free-space (50 bytes)") != std::string::npos);
    BOOST_TEST(h.failure_fields("low_disk_space").dump() ==
               R"({"available":49,"error":"low disk space","min_free_space":50})");
    free_bytes = 50;  // at the watermark is enough
    BOOST_TEST(!h.check_disk());
    BOOST_TEST(h.ok());
    BOOST_TEST((reports == std::vector<std::string>{"failed: low_disk_space", "ok"}));

    // A failed commit with room on the disk: not ok until a commit works,
    // whatever the disk says meanwhile; reported once.
    reports.clear();
    h.commit_failed("disk I/O error");
    h.commit_failed("disk I/O error");
    BOOST_TEST(!h.ok());
    BOOST_TEST(h.commit_failing());
    BOOST_TEST(h.state() == std::string("storage_failed"));
    BOOST_TEST(!h.check_disk());
    BOOST_TEST(!h.ok());
    // Both at once: recovered only when both are; the full disk is named.
    free_bytes = 10;
    h.check_disk();
    BOOST_TEST(h.state() == std::string("low_disk_space"));
    h.commit_ok();
    BOOST_TEST(!h.ok());
    free_bytes = 60;
    h.check_disk();
    BOOST_TEST(h.ok());
    BOOST_TEST((reports == std::vector<std::string>{"failed: disk I/O error", "ok"}));
    BOOST_TEST(h.failure_fields("disk I/O error").dump() == R"({"error":"disk I/O error"})");
}

// A failed commit checks the watermark at once (the likeliest cause), with
// no sample since: the disk filling between two samples is seen then.
BOOST_FIXTURE_TEST_CASE(a_failed_commit_checks_the_disk_again, fixture) {
    auto h = make(50);
    BOOST_TEST(!h.check_disk());  // 100 free: far above
    free_bytes = 10;
    h.commit_failed("database or disk is full");
    BOOST_TEST(h.disk_low());
    BOOST_TEST(h.available() == 10u);
    free_bytes = 100;
    h.commit_ok();
    BOOST_TEST(h.disk_low());  // a working commit says nothing of the disk
    BOOST_TEST(!h.check_disk());
    BOOST_TEST(h.ok());
}

BOOST_FIXTURE_TEST_CASE(no_watermark_or_no_answer_is_not_full, fixture) {
    auto off = make(0);
    free_bytes = 0;
    BOOST_TEST(!off.check_disk());  // 0: off, whatever is free
    BOOST_TEST(off.ok());
    auto h = make(50);
    free_bytes = std::nullopt;  // statvfs failed: the commits tell
    BOOST_TEST(!h.check_disk());
    BOOST_TEST(h.ok());
    BOOST_TEST(reports.empty());
}

BOOST_FIXTURE_TEST_CASE(start_checks_now_and_then_every_period, fixture) {
    app::storage_health::settings s{"/nowhere", 50, std::chrono::milliseconds(10)};
    int calls = 0;
    s.free_space = [&](const std::string&, std::string&) -> std::optional<std::uint64_t> {
        ++calls;
        return calls >= 3 ? 10 : 100;
    };
    app::storage_health h(ioc.get_executor(), s,
                          [&](bool ok, const std::string&) { reports.push_back(ok ? "ok" : "failed"); });
    h.start();
    BOOST_TEST(calls == 1);
    while (calls < 3 && ioc.run_one_for(std::chrono::seconds(10))) {
    }  // each handler run is one period's check (no deadline asserted)
    BOOST_TEST(calls == 3);
    BOOST_TEST((reports == std::vector<std::string>{"failed"}));
    h.stop();
    const int after = calls;
    ioc.restart();
    ioc.run_for(std::chrono::milliseconds(50));
    BOOST_TEST(calls == after);  // stopped: no more checks
}

BOOST_AUTO_TEST_SUITE_END()
