// The one Boost.Test entry point of the unit and integration tests.
#define BOOST_TEST_MODULE steadfast
#include <boost/test/unit_test.hpp>
