// Prometheus exposition through prometheus-cpp (Debian's prometheus-cpp-dev):
// the apps register their metrics on one registry and serve it as text.
#pragma once

#include "db_worker.hpp"

#include <steadfast/transport/http.hpp>
#include <steadfast/version.hpp>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cstdint>
#include <memory>
#include <string>

namespace steadfast::app {

/// steadfast_build_info{binary, version} 1: which build is running, for dashboards and alerts.
inline void register_build_info(prometheus::Registry& r, const std::string& binary) {
    prometheus::BuildGauge()
        .Name("steadfast_build_info")
        .Help("The running build: always 1, with the binary and its version as labels")
        .Register(r)
        .Add({{"binary", binary}, {"version", steadfast::version}})
        .Set(1);
}

/// An unlabelled counter or gauge, registered in `r` (both daemons' series).
inline prometheus::Counter& counter(prometheus::Registry& r, const std::string& name, const std::string& help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
inline prometheus::Gauge& gauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

inline std::string expose(prometheus::Registry& r) {
    return prometheus::TextSerializer().Serialize(r.Collect());
}

/// GET /metrics' answer: the registry in the text format.
inline http::response metrics_response(prometheus::Registry& r) {
    http::response res;
    res.body = expose(r);
    res.set("Content-Type", "text/plain; version=0.0.4");
    return res;
}

/// Brings a counter up to a total kept elsewhere (a server's statistics).
inline void sync_counter(prometheus::Counter& c, std::uint64_t total) {
    const auto t = static_cast<double>(total);
    if (t > c.Value()) c.Increment(t - c.Value());
}

/// Brings a counter of seconds up to a total kept elsewhere.
inline void sync_counter(prometheus::Counter& c, double total) {
    if (total > c.Value()) c.Increment(total - c.Value());
}

/// The database thread's group commits (db_worker::stats), the same six
/// series on both apps: steadfast_<app>_db_commits_total, _db_jobs_total
/// (jobs per commit: how well group commit gathers), _db_work_seconds_total,
/// _db_commit_seconds_total (the WAL write), _db_flushes_total and
/// _db_flush_seconds_total (the flusher's fsyncs, each covering the commits
/// before it: over flushes, the mean flush time, which tells a slow disk).
class db_metrics {
public:
    db_metrics(prometheus::Registry& r, const std::string& app)
        : commits_(counter(r, app, "commits_total",
                           "Transactions committed by the database thread (each holds a group of jobs)")),
          jobs_(counter(r, app, "jobs_total",
                        app == "primary"
                            ? "Jobs run in those transactions (a publish, a read, an acknowledgement mark, ...)"
                            : "Jobs run in those transactions (a request's batch, a read, ...)")),
          work_(counter(r, app, "work_seconds_total", "Time the database thread spent running jobs")),
          commit_(counter(r, app, "commit_seconds_total",
                          "Time the database thread spent committing (the WAL write; the fsync is the flusher's)")),
          flushes_(counter(r, app, "flushes_total",
                           "WAL fsyncs by the flusher thread (each covers every commit before it began)")),
          flush_(counter(r, app, "flush_seconds_total", "Time the flusher thread spent in fsync")) {}
    void sync(const db_worker::stats& s) {
        sync_counter(commits_, s.commits);
        sync_counter(jobs_, s.jobs);
        sync_counter(work_, s.work_seconds);
        sync_counter(commit_, s.commit_seconds);
        sync_counter(flushes_, s.flushes);
        sync_counter(flush_, s.flush_seconds);
    }

private:
    static prometheus::Counter& counter(prometheus::Registry& r, const std::string& app, const std::string& name,
                                        const std::string& help) {
        return app::counter(r, "steadfast_" + app + "_db_" + name, help);
    }
    prometheus::Counter &commits_, &jobs_, &work_, &commit_, &flushes_, &flush_;
};

/// Request latency buckets from 100 us to 10 s.
inline prometheus::Histogram::BucketBoundaries latency_buckets() {
    return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

/// End-to-end delivery buckets from 1 ms to 8 h: after an outage, deliveries
/// wait on the ladder (its steps reach 2 h) and must not all land in +Inf.
inline prometheus::Histogram::BucketBoundaries delivery_buckets() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25, 0.5,  1,     2.5,  5,
            10,    30,     60,    120,  300,   600,  1800, 3600, 7200, 14400, 28800};
}

}  // namespace steadfast::app
