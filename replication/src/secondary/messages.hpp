// POST /api/messages and GET /api/streams, the secondary's side of the wire:
// the decisions as plain functions (what to refuse before the store, what an
// answer of the store becomes), tested without sockets, and the routes that
// run them around the database thread.
#pragma once

#include "../common/db_worker.hpp"
#include "../common/storage_health.hpp"
#include "metrics.hpp"
#include "store.hpp"

#include <steadfast/transport/http.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace steadfast::secondary {

/// What is refused before a request reaches the store, in the contract's
/// order: the token (401), the content type (415), the disk under
/// --min-free-space (503, Retry-After: the primary keeps and retries).
/// `reason` is set for the rejection metric.
std::optional<http::response> refuse_messages(const http::request& req, const std::vector<std::string>& tokens,
                                              app::storage_health& health, std::string& reason);

/// The request body as the store takes it, or the 400 naming what is wrong.
std::variant<envelope::decoded, http::response> decode_messages(std::string_view body, std::size_t max_body);

/// The store's answer as the HTTP answer; a failed commit is 503 with
/// Retry-After (nothing applied: the primary keeps the messages).
http::response answer_of(app::db_result<store::answer>&& result);

/// GET /api/streams' query: after= and limit= (1 to max_positions_page,
/// default 1000), or the 400 naming what is wrong.
struct page_query {
    std::string after;
    std::size_t limit = 1000;
};
std::variant<page_query, http::response> parse_page_query(std::string_view target);

/// The two routes' handlers. Everything referred to must outlive them.
struct message_routes {
    boost::asio::any_io_executor ex;
    app::db_worker& worker;
    store& st;
    app::storage_health& health;
    metrics& m;
    const std::vector<std::string>& tokens;  // SIGHUP replaces its contents
    std::size_t max_body;
    /// POST /api/messages: refuse, decode, apply on the database thread, answer.
    http::router::handler messages() const;
    /// GET /api/streams: a page of each stream's last applied seq.
    http::router::handler streams() const;
};

}  // namespace steadfast::secondary
