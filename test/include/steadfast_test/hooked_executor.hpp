// An io_context executor whose execute() runs `before` and `after` around
// its post (never inline): tests hold a thread with it where a real one could
// be preempted (between the decision to complete and the post, or after it).
#pragma once

#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/query.hpp>

#include <functional>
#include <memory>
#include <utility>

namespace steadfast::test {

struct hooked_executor {
    struct hooks {
        std::function<void()> before, after;
    };
    hooked_executor(boost::asio::io_context::executor_type i, std::function<void()> before, std::function<void()> after)
        : inner(std::move(i)), h(std::make_shared<const hooks>(hooks{std::move(before), std::move(after)})) {}
    boost::asio::io_context::executor_type inner;
    std::shared_ptr<const hooks> h;  // (an executor copies without throwing)

    boost::asio::execution_context& query(boost::asio::execution::context_t) const noexcept {
        return boost::asio::query(inner, boost::asio::execution::context);
    }
    static constexpr boost::asio::execution::blocking_t query(boost::asio::execution::blocking_t) noexcept {
        return boost::asio::execution::blocking.never;
    }
    template <class F>
    void execute(F f) const {
        if (h->before) h->before();
        inner.execute(std::move(f));
        if (h->after) h->after();
    }
    friend bool operator==(const hooked_executor& a, const hooked_executor& b) noexcept { return a.inner == b.inner; }
    friend bool operator!=(const hooked_executor& a, const hooked_executor& b) noexcept { return !(a == b); }
};

}  // namespace steadfast::test
