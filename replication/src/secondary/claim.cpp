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

namespace steadfast::secondary {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
std::string who() {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    return std::string(host.data()) + " pid " + std::to_string(::getpid()) + " (" + app::random_hex(8) + ")";
}
}  // namespace

consumer_claim::consumer_claim(jetstream::client& js, const std::string& stream, const std::string& consumer)
    : js_(js), subject_("_STEADFAST.consumer." + stream + "." + consumer), me_(who()) {
    responder_.c = this;
}

consumer_claim::~consumer_claim() = default;

asio::awaitable<std::string> consumer_claim::other(std::chrono::milliseconds wait) {
    asked_ = std::chrono::steady_clock::now();
    asio::cancellation_signal cancel;
    asio::steady_timer limit(co_await asio::this_coro::executor, wait);
    limit.async_wait([&cancel](const boost::system::error_code& e) {
        if (!e) cancel.emit(asio::cancellation_type::terminal);
    });
    // The question carries who asks: a secondary does not answer itself.
    auto [ec, m] = co_await js_.async_request(
        subject_, me_, {}, asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(asio::use_awaitable)));
    limit.cancel();
    if (ec || m.status != 0 || m.data.empty() || m.data == me_) co_return std::string{};
    if (other_.empty()) other_ = m.data;
    co_return m.data;
}

void consumer_claim::answer() {
    if (!sub_) sub_ = js_.subscribe(subject_, responder_, 100);
}

bool consumer_claim::due(std::chrono::steady_clock::time_point now) {
    return now - asked_ >= 10s;
}

void consumer_claim::responder::on_messages() {
    for (auto& m : c->sub_->drain(100))
        if (!m.reply.empty() && m.data != c->me_) (void)c->js_.publish(m.reply, c->me_);
}

}  // namespace steadfast::secondary
