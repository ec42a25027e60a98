// All of steadfast::conditions.
#pragma once
#include <steadfast/conditions/combinators.hpp>
#include <steadfast/conditions/condition.hpp>
#include <steadfast/conditions/deadline.hpp>
#include <steadfast/conditions/external.hpp>
#include <steadfast/conditions/flag.hpp>
#include <steadfast/conditions/probe.hpp>
