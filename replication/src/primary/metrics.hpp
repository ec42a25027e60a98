// The primary's /metrics: every series it exposes, in one place. The io
// thread owns it; the node and its link report through it.
#pragma once

#include "../common/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>

namespace steadfast::primary {

struct metrics {
    std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
    prometheus::Counter& published =
        app::counter(*registry, "steadfast_primary_published_total", "Messages accepted into the outbox");
    prometheus::Counter& delivered =
        app::counter(*registry, "steadfast_primary_delivered_total", "Messages acknowledged by the secondary");
    prometheus::Counter& attempts =
        app::counter(*registry, "steadfast_primary_attempts_total", "Send attempts to the secondary");
    prometheus::Counter& requests =
        app::counter(*registry, "steadfast_primary_requests_total",
                     "HTTP requests sent to the secondary, each carrying one or more streams' batches");
    prometheus::Counter& outbox_reads =
        app::counter(*registry, "steadfast_primary_outbox_reads_total",
                     "Reads of a stream's pending messages back from the outbox (a message that joined its "
                     "stream's send window when committed is not read back)");
    prometheus::Counter& fold_failures =
        app::counter(*registry, "steadfast_primary_outbox_fold_failures_total",
                     "Folds of the outbox's tail (its newest small messages) into the outbox that failed and were "
                     "undone (logged as fold_failed; the messages stay in the tail, read and delivered as usual)");
    prometheus::Counter& publish_groups =
        app::counter(*registry, "steadfast_primary_publish_groups_total",
                     "Groups of publishes made one by one (HTTP's without an Idempotency-Key, primary_node's "
                     "async_publish) handed to the database thread together (those made while it had not yet "
                     "taken the group before), one job and one hand-off back each");
    prometheus::Counter& retries =
        app::counter(*registry, "steadfast_primary_retries_total", "Send attempts that were retries");
    prometheus::Counter& dead_letters =
        app::counter(*registry, "steadfast_primary_dead_letter_total", "Messages moved to the dead-letter table");
    prometheus::Counter& rewinds =
        app::counter(*registry, "steadfast_primary_rewinds_total",
                     "Resends from retention after the secondary lost acknowledged messages");
    prometheus::Counter& refused =
        app::counter(*registry, "steadfast_primary_connections_rejected_total",
                     "Connections turned away at the --max-connections cap: closed at once past the reserve, "
                     "answered 503 at the cap, or an idle one closed to make room for a request");
    prometheus::Counter& redeliveries =
        app::counter(*registry, "steadfast_primary_redeliveries_total",
                     "Durable redeliveries scheduled (ladder steps) after the quick retries were used up");
    prometheus::Counter& blocks = app::counter(*registry, "steadfast_primary_blocks_total",
                                               "Times a stream was blocked (conflict, beyond retention, ...)");
    prometheus::Counter& accept_failures =
        app::counter(*registry, "steadfast_primary_accept_failures_total",
                     "Failed accepts on --listen (out of file descriptors, ...); tried again every 50 ms");
    prometheus::Counter& tls_failures =
        app::counter(*registry, "steadfast_primary_tls_handshake_failures_total",
                     "TLS handshakes on --listen that failed: no or a wrong client certificate, not TLS, ...");
    prometheus::Family<prometheus::Counter>& link_errors =
        prometheus::BuildCounter()
            .Name("steadfast_primary_link_errors_total")
            .Help("Failed deliveries that are the link's or the secondary's fault, by reason; messages kept")
            .Register(*registry);
    prometheus::Gauge& depth =
        app::gauge(*registry, "steadfast_primary_outbox_depth", "Messages waiting in the outbox");
    prometheus::Gauge& online =
        app::gauge(*registry, "steadfast_primary_secondary_online", "1 when the secondary's health probe passes");
    prometheus::Gauge& blocked = app::gauge(*registry, "steadfast_primary_blocked_streams",
                                            "Streams stopped for a conflict or beyond retention");
    prometheus::Gauge& streams =
        app::gauge(*registry, "steadfast_primary_active_streams", "Streams with messages to deliver");
    prometheus::Histogram& latency = prometheus::BuildHistogram()
                                         .Name("steadfast_primary_delivery_latency_seconds")
                                         .Help("From acceptance to acknowledgement")
                                         .Register(*registry)
                                         .Add({}, app::delivery_buckets());
    // Per stream, set at each scrape from the streams in memory ("is it stuck?").
    prometheus::Family<prometheus::Gauge>& stream_pending =
        prometheus::BuildGauge()
            .Name("steadfast_primary_stream_pending")
            .Help("Messages accepted and not yet acknowledged, per stream with any (the 100 whose oldest is oldest)")
            .Register(*registry);
    prometheus::Family<prometheus::Gauge>& stream_age =
        prometheus::BuildGauge()
            .Name("steadfast_primary_stream_oldest_pending_age_seconds")
            .Help(
                "Age of the oldest message not yet acknowledged, per stream with any (the 100 whose oldest is "
                "oldest)")
            .Register(*registry);
    prometheus::Gauge& oldest_age =
        app::gauge(*registry, "steadfast_primary_oldest_pending_age_seconds",
                   "Age of the oldest message not yet acknowledged, over all streams (0: none)");
    prometheus::Gauge& js_connected = app::gauge(*registry, "steadfast_primary_jetstream_connected",
                                                 "1 while connected to a NATS server (a nats:// --secondary)");
    prometheus::Gauge& nats_refused =
        app::gauge(*registry, "steadfast_primary_nats_refused",
                   "1 while the NATS connection cannot work: the servers refuse this primary's credentials, its TLS "
                   "does not match theirs, or the connection closed for good (restart once fixed)");
    prometheus::Counter& js_disconnects =
        app::counter(*registry, "steadfast_primary_jetstream_disconnects_total", "Connections to NATS lost");
    prometheus::Counter& js_reconnects =
        app::counter(*registry, "steadfast_primary_jetstream_reconnects_total", "Reconnections to NATS");
    prometheus::Counter& js_duplicates =
        app::counter(*registry, "steadfast_primary_jetstream_duplicates_total",
                     "Publishes JetStream had stored already (a retry after a lost acknowledgement)");
    prometheus::Counter& js_repairs = app::counter(*registry, "steadfast_primary_jetstream_repairs_total",
                                                   "Holes in the log resent from retention at a secondary's request");
    app::db_metrics db{*registry, "primary"};
    prometheus::Gauge& storage_ok =
        app::gauge(*registry, "steadfast_primary_storage_ok", "1 while the outbox commits and has --min-free-space");
    prometheus::Gauge& free_bytes = app::gauge(*registry, "steadfast_primary_storage_free_bytes",
                                               "Free bytes on the data directory's filesystem (as of the last check)");
    prometheus::Counter& recheck_failures =
        app::counter(*registry, "steadfast_primary_recheck_failures_total",
                     "Rechecks of a secondary that could not ask it what it holds (tried again in 5 s)");

    metrics() {
        // The reasons every link meets, there from the start at 0: a series
        // that first appears at 1 is invisible to increase() and rate().
        // (An HTTP status's own reason, http_503 say, appears with it.)
        for (const char* r : {"transport", "tls", "auth"}) link_errors.Add({{"reason", r}});
    }
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;
};

}  // namespace steadfast::primary
