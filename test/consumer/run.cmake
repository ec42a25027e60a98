# Installs the build tree to a scratch prefix and builds test/consumer against
# it; then configures an engine-only consumer without nlohmann_json, and
# steadfast as a subproject of another project (configured only: building them
# would compile the same Asio code again, a minute of CI for nothing new).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(EXISTS ${prefix}/bin/steadfast-retry-demo)
  message(FATAL_ERROR "the example steadfast-retry-demo was installed into bin")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/engine_only -B ${WORK_DIR}/engine_only -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE)
# Built and run: a retry behind a gate, and a hedged pipeline, from the installed headers.
run(${CMAKE_COMMAND} --build ${WORK_DIR}/engine_only)
run(${WORK_DIR}/engine_only/engine_consumer)

# As a subproject: configured without a build type, which must stay empty.
get_filename_component(steadfast_root ${SOURCE_DIR}/../.. ABSOLUTE)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/subproject -B ${WORK_DIR}/subproject -DSTEADFAST_SOURCE_DIR=${steadfast_root})
file(STRINGS ${WORK_DIR}/subproject/CMakeCache.txt build_type REGEX "^CMAKE_BUILD_TYPE:")
if(build_type AND NOT build_type MATCHES "=$")
  message(FATAL_ERROR "steadfast as a subproject set the parent's build type: ${build_type}")
endif()
run(${CMAKE_COMMAND} --install ${WORK_DIR}/subproject --prefix ${WORK_DIR}/subproject-prefix)
if(EXISTS ${WORK_DIR}/subproject-prefix/include/steadfast OR EXISTS ${WORK_DIR}/subproject-prefix/lib)
  message(FATAL_ERROR "steadfast as a subproject installed files into the parent's prefix")
endif()
message(STATUS "package: the installed consumer works; engine-only and subproject configurations are clean")
