#pragma once
#include <steadfast/conditions/condition.hpp>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>

#include <mutex>

namespace steadfast {
namespace detail {

// Knows every condition of an execution context, so that shutting the context
// down destroys pending waits instead of leaking them (and the suspended
// coroutines their handlers own), as Asio's own services do.
class condition_service : public boost::asio::execution_context::service {
public:
    using key_type = condition_service;
    inline static boost::asio::execution_context::id id;

    explicit condition_service(boost::asio::execution_context& ctx) : service(ctx) {}

    void add(condition* c) {
        std::lock_guard lock(mutex_);
        c->svc_next_ = head_;
        if (head_) head_->svc_prev_ = c;
        head_ = c;
    }
    void remove(condition* c) {
        std::lock_guard lock(mutex_);
        if (c->svc_prev_)
            c->svc_prev_->svc_next_ = c->svc_next_;
        else if (head_ == c)
            head_ = c->svc_next_;
        if (c->svc_next_) c->svc_next_->svc_prev_ = c->svc_prev_;
        c->svc_prev_ = c->svc_next_ = nullptr;
    }

private:
    void shutdown() override {
        // Destroying a waiter may destroy the last reference to its condition
        // (and so unregister it): restart from the head each time.
        for (;;) {
            condition* c = nullptr;
            {
                std::lock_guard lock(mutex_);
                for (condition* p = head_; p; p = p->svc_next_)
                    if (p->waiters_) {
                        c = p;
                        break;
                    }
            }
            if (!c) break;
            c->shutdown();
        }
        // Conditions may outlive their context: they must not reach this
        // service once it is gone.
        std::lock_guard lock(mutex_);
        for (condition* p = head_; p;) {
            condition* next = p->svc_next_;
            p->service_.store(nullptr);
            p->svc_prev_ = p->svc_next_ = nullptr;
            p = next;
        }
        head_ = nullptr;
    }

    std::mutex mutex_;
    condition* head_ = nullptr;
};

}  // namespace detail

condition::condition(executor_type ex, std::string name, bool initial)
    : watchable(std::move(name)), ex_(std::move(ex)), value_(initial) {
    auto& ctx = boost::asio::query(ex_, boost::asio::execution::context);
    auto* svc = &boost::asio::use_service<detail::condition_service>(ctx);
    svc->add(this);
    service_.store(svc);
}

condition::~condition() {
    // A waiter holds its condition alive, so none is left here, unless the
    // context shut down with waits pending (then they are already gone).
    if (auto* svc = service_.load()) svc->remove(this);
}

void condition::link(waiter_base* w) noexcept {
    w->owner = this;
    w->next = waiters_;
    if (waiters_) waiters_->prev = w;
    waiters_ = w;
    ++waiter_count_;
}

void condition::unlink(waiter_base* w) noexcept {
    w->sub.reset();
    if (w->prev)
        w->prev->next = w->next;
    else
        waiters_ = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = nullptr;
    --waiter_count_;
}

void condition::shutdown() noexcept {
    auto guard = weak_from_this().lock();  // its last waiter may hold the last reference
    while (waiters_) {
        waiter_base* w = waiters_;
        w->destroy();
    }
}

}  // namespace steadfast
