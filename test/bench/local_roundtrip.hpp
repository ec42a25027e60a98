// The bare I/O operation of the socket benchmarks (engine_bench.cpp,
// pipeline_bench.cpp): a byte written and read back over a local socket pair.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>

namespace steadfast_bench {

struct local_roundtrip {
    explicit local_roundtrip(boost::asio::io_context& ioc) : a(ioc), b(ioc) { boost::asio::local::connect_pair(a, b); }
    boost::asio::awaitable<boost::system::error_code> operator()() {
        namespace asio = boost::asio;
        char out = 'x', in = 0;
        auto [ec1, n1] = co_await asio::async_write(a, asio::buffer(&out, 1), asio::as_tuple(asio::use_awaitable));
        if (ec1) co_return ec1;
        auto [ec2, n2] = co_await asio::async_read(b, asio::buffer(&in, 1), asio::as_tuple(asio::use_awaitable));
        co_return ec2;
    }
    boost::asio::local::stream_protocol::socket a, b;
};

}  // namespace steadfast_bench
