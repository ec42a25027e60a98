// The secondary's /metrics: every series it exposes, in one place, and what
// each part reports through (applied, rejected, storage state, the JetStream
// source's figures). The io thread owns it.
#pragma once

#include "../common/metrics.hpp"
#include "store.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>

namespace steadfast::secondary {

struct metrics {
    std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
    prometheus::Counter& applied = app::counter(*registry, "steadfast_secondary_applied_total", "Messages applied");
    prometheus::Counter& duplicates = app::counter(*registry, "steadfast_secondary_duplicates_total",
                                                   "Messages received again and not applied again");
    prometheus::Family<prometheus::Counter>& rejected = prometheus::BuildCounter()
                                                            .Name("steadfast_secondary_rejected_total")
                                                            .Help("Requests rejected, by reason")
                                                            .Register(*registry);
    prometheus::Histogram& latency = prometheus::BuildHistogram()
                                         .Name("steadfast_secondary_request_duration_seconds")
                                         .Help("POST /api/messages latency")
                                         .Register(*registry)
                                         .Add({}, app::latency_buckets());
    prometheus::Gauge& storage_ok =
        app::gauge(*registry, "steadfast_secondary_storage_ok", "1 while the store commits and has --min-free-space");
    prometheus::Gauge& free_bytes = app::gauge(*registry, "steadfast_secondary_storage_free_bytes",
                                               "Free bytes on the data directory's filesystem (as of the last check)");
    prometheus::Gauge& epoch = app::gauge(*registry, "steadfast_secondary_epoch",
                                          "The epoch fence: messages of a lower epoch are refused (409 stale_epoch)");
    prometheus::Counter& refused =
        app::counter(*registry, "steadfast_secondary_connections_rejected_total",
                     "Connections turned away at the --max-connections cap: closed at once past the reserve, "
                     "answered 503 at the cap, or an idle one closed to make room for a request");
    prometheus::Counter& accepted = app::counter(*registry, "steadfast_secondary_connections_accepted_total",
                                                 "Connections accepted (keep-alive reuses them)");
    prometheus::Counter& accept_failures =
        app::counter(*registry, "steadfast_secondary_accept_failures_total",
                     "Failed accepts on --listen (out of file descriptors, ...); tried again every 50 ms");
    prometheus::Counter& tls_failures =
        app::counter(*registry, "steadfast_secondary_tls_handshake_failures_total",
                     "TLS handshakes that failed: no or a wrong client certificate, not TLS, ...");
    prometheus::Family<prometheus::Gauge>& last_seq = prometheus::BuildGauge()
                                                          .Name("steadfast_secondary_last_applied_seq")
                                                          .Help("The last seq applied, per stream")
                                                          .Register(*registry);
    prometheus::Gauge& last_applied_at = app::gauge(*registry, "steadfast_secondary_last_applied_timestamp_seconds",
                                                    "When a message was last applied (Unix time; 0: none since start)");
    prometheus::Gauge& js_connected = app::gauge(*registry, "steadfast_secondary_jetstream_connected",
                                                 "1 while connected to a NATS server (--source)");
    prometheus::Gauge& nats_refused =
        app::gauge(*registry, "steadfast_secondary_nats_refused",
                   "1 while the NATS connection cannot work: the servers refuse this secondary's credentials, its "
                   "TLS does not match theirs, or the connection closed for good (restart once fixed)");
    prometheus::Gauge& js_lag =
        app::gauge(*registry, "steadfast_secondary_jetstream_consumer_pending",
                   "Messages in the stream not yet delivered to this consumer (its lag), as of the last delivery "
                   "or, when pulls end empty, the consumer's last info");
    prometheus::Gauge& js_blocked =
        app::gauge(*registry, "steadfast_secondary_jetstream_blocked_streams", "Streams not applying (conflict, gap)");
    prometheus::Counter& js_deliveries =
        app::counter(*registry, "steadfast_secondary_jetstream_deliveries_total",
                     "JetStream messages delivered (each delivery, the first and every redelivery; a message holds one "
                     "envelope or a batch of them)");
    prometheus::Counter& js_redeliveries =
        app::counter(*registry, "steadfast_secondary_jetstream_redeliveries_total",
                     "Messages JetStream delivered again (not acknowledged in time, or nak'd)");
    prometheus::Counter& js_stalls =
        app::counter(*registry, "steadfast_secondary_jetstream_consumer_stalls_total",
                     "Times the server answered none of this consumer's last 3 pulls (not even their expiry): "
                     "subscribed again");
    prometheus::Counter& js_unanswered =
        app::counter(*registry, "steadfast_secondary_jetstream_pulls_unanswered_total",
                     "Pulls that ended on the secondary's timer, unanswered by the server (not even with their "
                     "expiry); now and then one whose expiry met a message arriving");
    prometheus::Counter& js_repairs = app::counter(*registry, "steadfast_secondary_jetstream_repair_requests_total",
                                                   "Requests to the primary to resend a hole in the log");
    app::db_metrics db{*registry, "secondary"};

    metrics() {
        storage_ok.Set(1);
        app::register_build_info(*registry, "steadfast-secondary");
        // Every reason there from the start, at 0: a series that first
        // appears at 1 is invisible to increase() and rate(). (Fault
        // injection's reasons appear when it is on.)
        for (const char* r : {"unauthorized", "content_type", "malformed", "storage", "stopping", "apply_failed",
                              "stale_epoch", "conflict", "gap", "epoch_too_high"})
            rejected.Add({{"reason", r}});
    }
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;

    void reject(const std::string& reason) { rejected.Add({{"reason", reason}}).Increment(); }
    /// What a commit did (HTTP or JetStream).
    void counted(const store::answer& a) {
        if (a.applied > 0)
            last_applied_at.Set(
                std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
        applied.Increment(static_cast<double>(a.applied));
        duplicates.Increment(static_cast<double>(a.duplicates));
        if (!a.reject_reason.empty()) reject(a.reject_reason);
    }
};

}  // namespace steadfast::secondary
