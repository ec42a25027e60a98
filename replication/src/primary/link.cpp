#include "link.hpp"

#include <steadfast/replication/envelope.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace steadfast::primary {

std::unique_ptr<link> make_http_link(const link_env& env, link_host& host);
std::unique_ptr<link> make_jetstream_link(const link_env& env, link_host& host);

// The one place that asks which link --secondary names.
std::unique_ptr<link> make_link(const link_env& env, link_host& host) {
    return env.o.jetstream() ? make_jetstream_link(env, host) : make_http_link(env, host);
}

boost::asio::awaitable<decision> link::sync(const std::string&, std::uint64_t, const retry_policy&) {
    // Never asked of a link that does not read a log (reads_log() false).
    co_return decision{verdict::stop, 0, 0, "this link has no log to read", {}, {}};
}

std::string encode_list(const std::string& stream, const std::vector<pending_message>& batch, std::uint64_t epoch) {
    std::size_t n = 0;
    for (const auto& m : batch) n += envelope::encoded_size(m.id, stream, m.seq, epoch, m.payload.size()) + 1;
    std::string list;
    list.reserve(n);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        if (i) list += ',';
        envelope::encode_to(list, batch[i].id, stream, batch[i].seq, epoch, batch[i].payload);
    }
    return list;
}

std::string encode_body(const std::string& stream, const std::vector<pending_message>& batch, std::uint64_t epoch) {
    return envelope::encode_body({encode_list(stream, batch, epoch)}, batch.size());
}

std::string batch_key(const std::vector<pending_message>& batch) {
    if (batch.size() == 1) return batch.front().id;
    return batch.front().id + ".." + std::to_string(batch.back().seq);
}

// The conditions library's deadline condition or'ed with `c`, awaited.
boost::asio::awaitable<void> wait_until(boost::asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline,
                                        cond c) {
    if (c.value()) co_return;
    cond until_woken = c;
    if (deadline != std::chrono::steady_clock::time_point::max())
        until_woken = c || cond(make_deadline(ex, "deadline", deadline));
    co_await until_woken->async_wait_until(true, boost::asio::as_tuple(boost::asio::use_awaitable));
}

}  // namespace steadfast::primary
