# Run by ctest (cmake -P): install BUILD into WORK/prefix, build SRC/examples/out_of_tree_policy
# against it in WORK/build, run the example's tests. Fails at the first step that fails.
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

file(REMOVE_RECURSE ${WORK})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure the example" ${CMAKE_COMMAND} -S ${SRC}/examples/out_of_tree_policy
     -B ${WORK}/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK}/prefix
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} ${launcher})
step("build the example" ${CMAKE_COMMAND} --build ${WORK}/build)
step("the example's tests" ${CTEST} --test-dir ${WORK}/build --output-on-failure)
