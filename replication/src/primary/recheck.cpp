#include "recheck.hpp"

namespace steadfast::primary {

bool recheck_merge::add(const envelope::positions_page& page) {
    for (const auto& p : page.streams) {
        if (any_ && p.stream <= after_) return false;  // not after the last one: no progress, or out of order
        any_ = true;
        after_ = p.stream;
        // Both lists are in name order: a stream of mine before the
        // secondary's next one is missing there.
        for (; mine_ != acked_.end() && mine_->first < p.stream; ++mine_) behind_.emplace_back(*mine_);
        if (mine_ != acked_.end() && mine_->first == p.stream) {
            if (p.last_seq < mine_->second) behind_.emplace_back(*mine_);
            ++mine_;
        }
    }
    return true;
}

std::vector<std::pair<std::string, std::uint64_t>> recheck_merge::finish() {
    for (; mine_ != acked_.end(); ++mine_) behind_.emplace_back(*mine_);  // past the secondary's last one
    return std::move(behind_);
}

}  // namespace steadfast::primary
