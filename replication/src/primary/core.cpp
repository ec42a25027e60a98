#include "core.hpp"

#include <steadfast/replication/envelope.hpp>

#include <chrono>

namespace steadfast::primary {

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void core::refresh_metrics() {
    rep.refresh_metrics();
    app::sync_counter(m.fold_failures, out.fold_failures());
    app::sync_counter(m.publish_groups, batch.groups());
}

void core::stored(const published& p, std::string payload, std::int64_t at_ms) {
    pending_message msg{p.seq, p.id, std::move(payload), at_ms};
    rep.committed(p.stream, 1, &msg);
}

std::size_t core::envelope_overhead(std::string_view stream, std::uint64_t epoch) const {
    const std::string id = outbox::make_id(out.instance(), stream, UINT64_MAX);
    return envelope::encoded_size(id, stream, UINT64_MAX, epoch, 0);
}

}  // namespace steadfast::primary
