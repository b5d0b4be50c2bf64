# cmake -P script: install tbex (COMPONENTS, default dev) into WORK_DIR/prefix, then configure,
# build and run (EXE, default aot_cmake_example) the standalone consumer project against that
# prefix only.
if(NOT COMPONENTS)
  set(COMPONENTS dev)
endif()
if(NOT EXE)
  set(EXE aot_cmake_example)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${err}")
  endif()
endfunction()

foreach(component IN LISTS COMPONENTS)
  run(${CMAKE_COMMAND} --install "${TBEX_BUILD_DIR}" --prefix "${prefix}" --component ${component})
endforeach()
run(${CMAKE_COMMAND} -S "${EXAMPLE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/${EXE}")
