# cmake -P: one AOT round trip. tbexc emits kernel NAME into WORK, CXX compiles aot_consumer.cpp
# against NAME.h and links it with the kernel (NAME.a, NAME.o or, for LINK=cpp, the C++ source
# NAME.cpp + NAME_wrapper.c), the shared Halide runtime RUNTIME and libtbex_runtime.a
# TBEX_RUNTIME; the program runs (MODE: correctness or threads) and prints "AOT OK".
# FLAGS: tbexc's problem flags, '|'-separated.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPLACE "|" ";" flags "${FLAGS}")

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

if(LINK STREQUAL "cpp")
  set(emit header,cpp)
  set(kernel "${WORK}/${NAME}_halide.o" "${WORK}/${NAME}_wrapper.o")
elseif(LINK STREQUAL "object")
  set(emit object,header)
  set(kernel "${WORK}/${NAME}.o")
else()
  set(emit static_library,header)
  set(kernel "${WORK}/${NAME}.a")
endif()
run("${TBEXC}" --name ${NAME} --out "${WORK}" --emit ${emit} ${flags})
foreach(f ${NAME}.h ${NAME}.manifest.json)
  if(NOT EXISTS "${WORK}/${f}")
    message(FATAL_ERROR "tbexc did not write ${f}")
  endif()
endforeach()
if(LINK STREQUAL "cpp")
  run("${CXX}" -std=c++17 -O2 -c "${WORK}/${NAME}.cpp" -o "${WORK}/${NAME}_halide.o")
  # Only the emitted files: tbexc ships HalideRuntime.h next to the wrapper (no Halide needed).
  run("${CXX}" -x c -std=c99 -O2 "-I${WORK}" -c "${WORK}/${NAME}_wrapper.c"
      -o "${WORK}/${NAME}_wrapper.o")
endif()
run("${CXX}" -std=c++17 -O1 -Wall -Wextra -Werror "-DTBEX_AOT_NAME=${NAME}"
    "-DTBEX_AOT_HEADER=\"${NAME}.h\"" "-I${WORK}" "-I${SRC_DIR}/tests/cpp"
    "-I${SRC_DIR}/compiler/include" "-I${SRC_DIR}/runtime/include"
    "${SRC_DIR}/tests/aot/aot_consumer.cpp" ${kernel} "${TBEX_RUNTIME}" "${RUNTIME}"
    ${SANITIZE} -lpthread -ldl -o "${WORK}/consumer")
run("${WORK}/consumer" ${MODE})
