// What a recheck resends to, as plain code: the streams this primary
// acknowledged within --retain against the secondary's pages of GET
// /api/streams (each stream's last applied seq, in name order). A stream the
// secondary lacks, or holds less of, is behind; one it holds as much of, or
// more, is not; one only the secondary has is none of this primary's
// business. The pages are fed as they come (http_link.cpp asks for them).
#pragma once

#include <steadfast/replication/envelope.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace steadfast::primary {

class recheck_merge {
public:
    explicit recheck_merge(const std::map<std::string, std::uint64_t>& acked) : acked_(acked), mine_(acked_.begin()) {}

    /// The next page. False when it cannot follow the last one (a stream
    /// not after `after()`, or out of order): a secondary that answers so
    /// would be asked forever, so the recheck stops.
    bool add(const envelope::positions_page& page);
    /// Where the next page starts: the last stream seen ("" before any).
    const std::string& after() const noexcept { return after_; }
    /// The streams behind, with what this primary acknowledged of each, in
    /// name order; call once the last page (more == false) came.
    std::vector<std::pair<std::string, std::uint64_t>> finish();

private:
    const std::map<std::string, std::uint64_t>& acked_;
    std::map<std::string, std::uint64_t>::const_iterator mine_;
    std::string after_;
    bool any_ = false;
    std::vector<std::pair<std::string, std::uint64_t>> behind_;
};

}  // namespace steadfast::primary
