// The compiled part of steadfast::engine: the sans-I/O decision code.
#include <steadfast/engine/impl/backoff.ipp>
#include <steadfast/engine/impl/breaker.ipp>
#include <steadfast/engine/impl/breaker_fsm.ipp>
#include <steadfast/engine/impl/budget.ipp>
#include <steadfast/engine/impl/error.ipp>
#include <steadfast/engine/impl/hedge_fsm.ipp>
#include <steadfast/engine/impl/limit_core.ipp>
#include <steadfast/engine/impl/policy.ipp>
#include <steadfast/engine/impl/retry_fsm.ipp>
#include <steadfast/engine/impl/stop.ipp>
#include <steadfast/engine/impl/watchable.ipp>
