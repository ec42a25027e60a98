// All of steadfast::engine.
#pragma once
#include <steadfast/engine/backoff.hpp>
#include <steadfast/engine/breaker.hpp>
#include <steadfast/engine/budget.hpp>
#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/hedging.hpp>
#include <steadfast/engine/limits.hpp>
#include <steadfast/engine/pipeline.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/result.hpp>
#include <steadfast/engine/retry.hpp>
#include <steadfast/engine/stop.hpp>
#include <steadfast/engine/watchable.hpp>
