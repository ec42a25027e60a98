// The primary's core, as the daemon and an embedding program
// (primary_node) both run it: the outbox on its database thread, the series,
// and delivery (replicator). What puts messages in differs (the daemon's HTTP
// and standard input; primary_node's publish); each tells rep.committed().
#pragma once

#include <common/db_worker.hpp>
#include <common/sqlite.hpp>
#include <primary/config.hpp>
#include <primary/metrics.hpp>
#include <primary/outbox.hpp>
#include <primary/publish_batcher.hpp>
#include <primary/replicator.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

struct core {
    /// `db` outlives it.
    core(const primary_config& c, boost::asio::any_io_executor ex, app::database& d, replicator_hooks hooks)
        : db(d),
          out(d),
          worker(d),
          tokens(c.tokens),
          rep({c, ex, out, worker, m, tokens}, std::move(hooks)),
          batch(worker, out, std::move(ex), [this](const published& p, std::string payload, std::int64_t at_ms) {
              stored(p, std::move(payload), at_ms);
          }) {}
    /// Before the event loop's pending handlers are destroyed: nothing more
    /// from the secondary's side, queued database jobs finish (they refer
    /// to the streams), and the outbox's tail is folded.
    void close() {
        rep.close();
        // The tail folded in the last commit: a cleanly stopped store holds
        // every message in `outbox`, where a version before the tail reads it.
        worker.post(
            [this](app::database&) {
                out.fold();
                return true;
            },
            [](const app::db_failure*) {});
        worker.stop();
    }
    /// The series read from the parts when scraped.
    void refresh_metrics();
    /// Delivery learns of one message just stored: `payload` as stored,
    /// `at_ms` its time (before anything that could throw: it must learn of
    /// every stored message).
    void stored(const published& p, std::string payload, std::int64_t at_ms);
    /// The envelope's size around a payload of `stream` at its largest id and
    /// seq: the check holds for every message of the stream.
    std::size_t envelope_overhead(std::string_view stream, std::uint64_t epoch) const;

    app::database& db;
    outbox out;
    app::db_worker worker;
    std::vector<std::string> tokens;  // the first is sent; reloaded in place (SIGHUP)
    metrics m;
    replicator rep;  // it refers to the others
    // Publishes made one by one on the loop (HTTP's), to the database
    // thread in groups; each stored message is handed to rep.
    publish_batcher batch;
};

}  // namespace steadfast::primary
