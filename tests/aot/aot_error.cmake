# cmake -P: tbexc with bad arguments must exit 2 and name the parameter (EXPECT, a regex) on
# stderr. ARGS: '|'-separated.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${TBEXC}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}: ${err}")
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got ${rc}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}'")
endif()
