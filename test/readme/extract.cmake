# Writes OUT: a prelude (what the README leaves to the reader: namespace
# aliases and a log function) followed by the first C++ block under the
# README's "## The smallest call site", exactly as shown there.
#   cmake -DREADME=README.md -DOUT=call_site.cpp -P extract.cmake
file(READ "${README}" text)
string(FIND "${text}" "## The smallest call site" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README has no \"## The smallest call site\" section")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
string(FIND "${text}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "no ```cpp block under \"## The smallest call site\"")
endif()
math(EXPR open "${open} + 7")
string(SUBSTRING "${text}" ${open} -1 text)
string(FIND "${text}" "```" close)
string(SUBSTRING "${text}" 0 ${close} block)
file(WRITE "${OUT}" "// Generated from README.md by test/readme/extract.cmake: do not edit.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <string>
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
template <class... Args> void log(Args&&...) {}
#line 1 \"README.md: The smallest call site\"
${block}")
