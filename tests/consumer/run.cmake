# Installs the phaze build tree into a scratch prefix, then configures, builds and runs tests/consumer
# against it with find_package(phaze).
file(REMOVE_RECURSE "${PHAZE_CONSUMER_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${PHAZE_BINARY_DIR}" --prefix "${PHAZE_CONSUMER_DIR}/prefix"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${PHAZE_CONSUMER_SOURCE}" -B "${PHAZE_CONSUMER_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${PHAZE_CONSUMER_DIR}/prefix" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer project failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${PHAZE_CONSUMER_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer project failed: ${rc}")
endif()
execute_process(COMMAND "${PHAZE_CONSUMER_DIR}/build/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "llama2-7b parameters: 6738415616")
  message(FATAL_ERROR "consumer program failed (${rc}): ${out}")
endif()
message(STATUS "consumer: ${out}")
