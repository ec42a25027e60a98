# Writes OUT: the first C++ block under the README's SECTION (default "## The
# smallest call site"), exactly as shown there, with nothing before it: a
# newcomer pastes it as it is, so it must compile as it is.
#   cmake -DREADME=README.md -DOUT=call_site.cpp [-DSECTION="## ..."] -P extract.cmake
if(NOT SECTION)
  set(SECTION "## The smallest call site")
endif()
file(READ "${README}" text)
string(FIND "${text}" "${SECTION}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README has no \"${SECTION}\" section")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
string(FIND "${text}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "no ```cpp block under \"${SECTION}\"")
endif()
math(EXPR open "${open} + 7")
string(SUBSTRING "${text}" ${open} -1 text)
string(FIND "${text}" "```" close)
string(SUBSTRING "${text}" 0 ${close} block)
file(WRITE "${OUT}" "// Generated from README.md by test/readme/extract.cmake: do not edit.
#line 1 \"README.md: ${SECTION}\"
${block}")
