// steadfast::replication: the primary/secondary pair's own vocabulary: the
// wire format (envelope.hpp) and the conditions a primary observes of its
// peers (conditions.hpp).
#pragma once

#include <steadfast/replication/conditions.hpp>
#include <steadfast/replication/envelope.hpp>
