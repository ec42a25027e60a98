// Readiness, the same on both nodes (GET /ready, for load balancers and
// orchestrators: health says whether the process works, readiness whether
// to send it traffic): 503 while starting or draining, while the data
// directory's disk is under the watermark, and while the storage cannot
// commit; after a failed commit, a small write is tried first, so that
// readiness comes back without traffic.
#pragma once

#include "db_worker.hpp"
#include "storage_health.hpp"

#include <steadfast/transport/http.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <string>

namespace steadfast::app {

/// After a failed commit: whether the storage takes a write of `probe_bytes`
/// now (on the database thread; the bytes go again after). "" when it does
/// (storage.commit_ok()), else the error (storage.commit_failed()). Under the
/// watermark: storage.low_message(), nothing tried.
boost::asio::awaitable<std::string> recheck_storage(storage_health& storage, db_worker& worker,
                                                    boost::asio::any_io_executor ex, std::size_t probe_bytes);

/// A 503 naming `status`, with `error` beside it.
boost::asio::awaitable<http::response> not_ready(std::string status, std::string error);

/// GET /ready's answer. `not_ready`: "starting" or "draining" (null: neither).
boost::asio::awaitable<http::response> readiness(const char* not_ready, storage_health& storage, db_worker& worker,
                                                 boost::asio::any_io_executor ex, std::size_t probe_bytes);

}  // namespace steadfast::app
