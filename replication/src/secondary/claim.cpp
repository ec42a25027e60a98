#include "claim.hpp"

#include "../common/random_id.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <array>
#include <charconv>

namespace steadfast::secondary {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
// "<start, Unix ms> <host> pid <pid> (<random>)": when first, then who.
std::string who() {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    return std::to_string(ms) + " " + std::string(host.data()) + " pid " + std::to_string(::getpid()) + " (" +
           app::random_hex(8) + ")";
}
std::uint64_t started(const std::string& id) {
    std::uint64_t ms = UINT64_MAX;  // not an identity: never first
    std::from_chars(id.data(), id.data() + id.size(), ms);
    return ms;
}
}  // namespace

bool consumer_claim::first(const std::string& a, const std::string& b) {
    const auto sa = started(a), sb = started(b);
    return sa != sb ? sa < sb : a < b;
}

consumer_claim::consumer_claim(jetstream::client& js, const std::string& stream, const std::string& consumer)
    : js_(js), subject_("_STEADFAST.consumer." + stream + "." + consumer), me_(who()) {
    responder_.c = this;
}

consumer_claim::~consumer_claim() = default;

bool consumer_claim::due(std::chrono::steady_clock::time_point now) const {
    return other_.empty() && (!asked_once_ || now - asked_ >= 10s);
}

asio::awaitable<bool> consumer_claim::keep(std::chrono::milliseconds wait) {
    if (!other_.empty()) co_return false;
    asked_ = std::chrono::steady_clock::now();
    asked_once_ = true;
    // Not answering while asking: with nobody else, the server says so at
    // once (no responders) instead of the question waiting out `wait`.
    sub_.reset();
    // Shared with the timer's handler, which may run after this frame is
    // gone (expired and queued when the answer came first).
    auto cancel = std::make_shared<asio::cancellation_signal>();
    asio::steady_timer limit(co_await asio::this_coro::executor, wait);
    limit.async_wait([cancel](const boost::system::error_code& e) {
        if (!e) cancel->emit(asio::cancellation_type::terminal);
    });
    auto [ec, m] = co_await js_.async_request(
        subject_, me_, {}, asio::bind_cancellation_slot(cancel->slot(), asio::as_tuple(asio::use_awaitable)));
    limit.cancel();
    // Any failure (no responders, no answer in time, not connected) is
    // "nobody": the next question comes in 10 s.
    if (!ec && m.status == 0 && !m.data.empty() && m.data != me_ && first(m.data, me_)) {
        other_ = m.data;
        co_return false;  // not answering any more: the other keeps it
    }
    sub_ = js_.subscribe(subject_, responder_, 100);
    co_return true;
}

void consumer_claim::responder::on_messages() {
    if (!c->sub_) return;
    for (auto& m : c->sub_->drain(100)) {
        if (m.reply.empty() || m.data.empty() || m.data == c->me_) continue;
        (void)c->js_.publish(m.reply, c->me_);
        // Asked by one that started first: it keeps the consumer, this one
        // stops now rather than at its next question.
        if (c->other_.empty() && first(m.data, c->me_)) c->other_ = m.data;
    }
    if (!c->other_.empty()) c->sub_.reset();
}

}  // namespace steadfast::secondary
