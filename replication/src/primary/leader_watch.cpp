#include "leader_watch.hpp"

#include <nlohmann/json.hpp>

namespace steadfast::primary {

using namespace std::chrono_literals;

leader_watch::leader_watch(jetstream::client& js, boost::asio::any_io_executor ex, std::string stream, handler h)
    : stream_(std::move(stream)), h_(std::move(h)), timer_(std::move(ex)) {
    // 16 queued at most: the subject is the account's, not ours.
    sub_ = js.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream_, *this, 16);
}

leader_watch::~leader_watch() {
    close();
}

void leader_watch::close() {
    sub_.reset();
    *alive_ = false;  // a deferred action already queued finds it so
    timer_.cancel();
}

std::optional<std::string> leader_watch::parse(std::string_view data, std::string_view stream) {
    const auto j = nlohmann::json::parse(data, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    auto text = [&j](const char* key) {
        auto it = j.find(key);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
    };
    if (text("type") != "io.nats.jetstream.advisory.v1.stream_leader_elected" || text("stream") != stream)
        return std::nullopt;
    return text("leader");
}

bool leader_watch::refused(std::string_view last_error) {
    return last_error.find("Permissions Violation for Subscription") != std::string_view::npos &&
           last_error.find("$JS.EVENT.ADVISORY") != std::string_view::npos;
}

void leader_watch::on_messages() {
    if (!sub_) return;
    bool announced = false;
    for (auto& m : sub_->drain(SIZE_MAX)) {
        if (auto leader = parse(m.data, stream_)) {  // anything else on the subject is ignored
            leader_ = std::move(*leader);
            announced = true;
        }
    }
    if (!announced || deferred_) return;  // a deferred action takes the latest leader
    const auto now = std::chrono::steady_clock::now();
    if (now - acted_ >= 1s) {
        act();
        return;
    }
    deferred_ = true;
    timer_.expires_at(acted_ + 1s);
    timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
        if (ec || !*alive) return;  // closed (this may be gone): nothing of it is touched
        deferred_ = false;
        act();
    });
}

void leader_watch::act() {
    acted_ = std::chrono::steady_clock::now();
    h_(leader_);
}

}  // namespace steadfast::primary
