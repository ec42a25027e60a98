// The compiled part of steadfast::conditions.
#include <steadfast/conditions/impl/combinators.ipp>
#include <steadfast/conditions/impl/condition.ipp>
