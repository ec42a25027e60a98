#pragma once
#include <steadfast/engine/watchable.hpp>

namespace steadfast {

watchable::~watchable() {
    while (head_) head_->reset();
}

void watchable::subscription::reset() noexcept {
    if (!owner_) return;
    if (owner_->cursor_ == this) owner_->cursor_ = next_;
    if (prev_)
        prev_->next_ = next_;
    else
        owner_->head_ = next_;
    if (next_) next_->prev_ = prev_;
    --owner_->count_;
    owner_ = nullptr;
    prev_ = next_ = nullptr;
    fn_ = nullptr;
}

void watchable::subscribe(subscription& s, std::function<void(bool)> fn) {
    s.reset();
    s.fn_ = std::move(fn);
    s.owner_ = this;
    s.prev_ = nullptr;
    s.next_ = head_;
    if (head_) head_->prev_ = &s;
    head_ = &s;
    ++count_;
}

void watchable::notify(bool v) {
    if (v) rises_.fetch_add(1, std::memory_order_release);
    // A change made from inside a callback is delivered after the current round,
    // so every subscriber sees the changes in order and none is skipped.
    if (notifying_) {
        pending_ = true;
        pending_value_ = v;
        return;
    }
    notifying_ = true;
    for (;;) {
        // New subscribers go to the head, so one added by a callback waits for
        // the next change; unsubscribing the next node moves cursor_ (reset()).
        for (cursor_ = head_; cursor_;) {
            subscription* s = cursor_;
            cursor_ = s->next_;
            if (s->fn_) s->fn_(v);
        }
        if (!pending_) break;
        pending_ = false;
        v = pending_value_;
    }
    notifying_ = false;
}

}  // namespace steadfast
