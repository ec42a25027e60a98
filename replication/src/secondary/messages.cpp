#include "messages.hpp"

#include "../common/json_body.hpp"
#include "../common/token.hpp"

#include <steadfast/replication/envelope.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <charconv>
#include <chrono>
#include <memory>

namespace asio = boost::asio;

namespace steadfast::secondary {

std::optional<http::response> refuse_messages(const http::request& req, const std::vector<std::string>& tokens,
                                              app::storage_health& health, std::string& reason) {
    if (auto denied = app::refuse_unauthorized(req, tokens)) {
        reason = "unauthorized";
        return denied;
    }
    if (auto refused = app::refuse_json_body(req)) {
        reason = refused->status == 415 ? "content_type" : "malformed";  // (411)
        return refused;
    }
    if (health.disk_low_now()) {
        // Refused before SQLite fails on a full disk: the primary keeps it and retries.
        reason = "storage";
        auto r = http::response::error(503, "insufficient storage: " + health.low_message());
        r.set("Retry-After", "1");
        return r;
    }
    return std::nullopt;
}

std::variant<envelope::decoded, http::response> decode_messages(std::string_view body, std::size_t max_body) {
    auto decoded = envelope::decode(body, envelope::limits{.max_body_bytes = max_body});
    if (auto* err = std::get_if<envelope::decode_error>(&decoded)) return http::response::error(400, err->what);
    return std::move(std::get<envelope::decoded>(decoded));
}

http::response answer_of(app::db_result<store::answer>&& result) {
    if (auto e = app::failed(result)) {
        const auto code = result.error().code;
        const bool not_storage = app::application_failed(code) || code == app::make_db_error_code(app::db_abandoned);
        auto r = http::response::error(503, not_storage ? *e + "; nothing applied" : "storage failure: " + *e);
        r.set("Retry-After", "1");
        return r;
    }
    auto& a = *result;
    return http::response::json(a.status, std::move(a.body));
}

std::variant<page_query, http::response> parse_page_query(std::string_view target) {
    if (auto unknown = http::unknown_query_params(target, {"after", "limit"}); !unknown.empty())
        return http::response::error(400, "unknown query parameter(s) " + unknown + " (after=NAME, limit=N)");
    if (http::query_param_count(target, "after") > 1 || http::query_param_count(target, "limit") > 1)
        return http::response::error(400, "after and limit are given once at most");
    page_query q;
    q.after = http::query_param(target, "after").value_or("");
    if (auto l = http::query_param(target, "limit")) {
        const auto* end = l->data() + l->size();
        auto [p, ec] = std::from_chars(l->data(), end, q.limit);
        if (ec != std::errc{} || p != end || q.limit == 0 || q.limit > envelope::max_positions_page)
            return http::response::error(400, "limit must be 1 to " + std::to_string(envelope::max_positions_page));
    }
    return q;
}

http::router::handler message_routes::messages() const {
    return [r = *this](http::request& req) -> asio::awaitable<http::response> {
        const auto t0 = std::chrono::steady_clock::now();
        std::string reason;
        if (auto refused = refuse_messages(req, r.tokens, r.health, reason)) {
            r.m.reject(reason);
            co_return std::move(*refused);
        }
        auto decoded = decode_messages(req.body, r.max_body);
        if (auto* bad = std::get_if<http::response>(&decoded)) {
            r.m.reject("malformed");
            co_return std::move(*bad);
        }
        auto d = std::make_shared<envelope::decoded>(std::move(std::get<envelope::decoded>(decoded)));
        // Named before the co_await (g++ 12 and lambda temporaries in co_await).
        auto job = [&st = r.st, d](app::database&, bool& keep) { return st.apply(*d, keep); };
        auto result = co_await r.worker.run<store::answer>(r.ex, std::move(job));
        if (auto e = app::failed(result)) {
            if (result.error().code == app::make_db_error_code(app::db_abandoned)) {
                r.m.reject("stopping");  // the node is being destroyed: sent again
            } else if (app::application_failed(result.error().code)) {
                r.m.reject("apply_failed");  // the application's, not the storage's: sent again
            } else {
                r.health.commit_failed(*e);
                r.m.reject("storage");
            }
        } else {
            const auto& a = *result;
            // Only a commit that wrote something shows the store works again
            // (a duplicate or a 409 commits nothing).
            if (a.applied > 0) r.health.commit_ok();
            r.m.counted(a);
            r.m.latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        co_return answer_of(std::move(result));
    };
}

http::router::handler message_routes::streams() const {
    return [r = *this](http::request& req) -> asio::awaitable<http::response> {
        if (auto denied = app::refuse_unauthorized(req, r.tokens)) {
            r.m.reject("unauthorized");
            co_return std::move(*denied);
        }
        auto q = parse_page_query(req.target);
        if (auto* bad = std::get_if<http::response>(&q)) co_return std::move(*bad);
        auto page = [&st = r.st, q = std::get<page_query>(q)](app::database&, bool&) {
            return st.positions_after(q.after, q.limit);
        };
        auto got = co_await r.worker.run<envelope::positions_page>(r.ex, std::move(page));
        if (auto e = app::failed(got)) co_return http::response::error(503, "storage failure: " + *e);
        co_return http::response::json(200, envelope::encode(*got));
    };
}

}  // namespace steadfast::secondary
