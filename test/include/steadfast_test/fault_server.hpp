// A loopback HTTP server whose answers follow a script, for integration tests:
// each request takes the next step (answer a status with Retry-After, drop the
// connection, answer late, send garbage or a truncated answer); when the
// script is empty it answers 200. Runs on its own thread.
#pragma once

#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace steadfast_test {

struct step {
    enum kind { ok, status, drop, late, garbage, truncated } what = ok;
    unsigned code = 200;
    std::optional<std::string> retry_after;
    std::chrono::milliseconds delay{0};

    static step of(kind k) {
        step s;
        s.what = k;
        return s;
    }
    static step answer(unsigned code, std::optional<std::string> retry_after = {}) {
        step s = of(status);
        s.code = code;
        s.retry_after = std::move(retry_after);
        return s;
    }
    static step drop_connection() { return of(drop); }
    static step answer_late(std::chrono::milliseconds d) {
        step s = of(late);
        s.delay = d;
        return s;
    }
    static step send_garbage() { return of(garbage); }
    static step send_truncated() { return of(truncated); }
};

class fault_server {
public:
    explicit fault_server(steadfast::http::server::options o = {}) {
        steadfast::http::router r;
        auto h = [this](steadfast::http::request& req) { return handle(req); };
        for (const char* m : {"GET", "POST", "PUT"}) r.add(m, "/x", h);
        server_.emplace(ioc_.get_executor(), std::move(r), o);
        port_ = server_->listen("127.0.0.1", 0).port();
        server_->start();
        thread_ = std::thread([this] { ioc_.run(); });
    }
    ~fault_server() {
        boost::asio::co_spawn(ioc_, server_->shutdown(), [this](std::exception_ptr) { ioc_.stop(); });
        thread_.join();
    }

    std::string port() const { return std::to_string(port_); }
    void script(std::deque<step> steps) {
        std::lock_guard l(m_);
        script_ = std::move(steps);
    }
    /// Connections the server accepted (read on the server's thread).
    std::uint64_t connections() {
        std::promise<std::uint64_t> p;
        auto f = p.get_future();
        boost::asio::post(ioc_, [&] { p.set_value(server_->get_stats().connections_accepted); });
        return f.get();
    }
    std::uint64_t requests() {
        std::lock_guard l(m_);
        return requests_;
    }

private:
    boost::asio::awaitable<steadfast::http::response> handle(steadfast::http::request& req) {
        step s;
        {
            std::lock_guard l(m_);
            ++requests_;
            if (!script_.empty()) {
                s = script_.front();
                script_.pop_front();
            }
        }
        steadfast::http::response res;
        switch (s.what) {
            case step::ok:
                res.body = req.body.empty() ? "ok" : req.body;
                break;
            case step::status:
                res = steadfast::http::response::error(s.code, "scripted");
                if (s.retry_after) res.set("Retry-After", *s.retry_after);
                break;
            case step::drop:
                res.drop_connection = true;
                break;
            case step::late: {
                boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, s.delay);
                co_await t.async_wait(boost::asio::use_awaitable);
                res.body = "late";
                break;
            }
            case step::garbage:
                res.raw = "HELLO, THIS IS NOT HTTP\r\n\r\n";
                break;
            case step::truncated:
                res.raw = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort";
                break;
        }
        co_return res;
    }

    boost::asio::io_context ioc_;
    std::optional<steadfast::http::server> server_;
    std::uint16_t port_ = 0;
    std::thread thread_;
    std::mutex m_;
    std::deque<step> script_;
    std::uint64_t requests_ = 0;
};

}  // namespace steadfast_test
