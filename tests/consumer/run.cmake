# Installs the phaze build tree into a scratch prefix, then configures, builds and runs tests/consumer
# against it with find_package(phaze): main.cpp and phaze's newcomer examples (examples/co_search.cpp,
# custom_placer.cpp, mixed_cluster.cpp, read where they are, never copied), all linking only phaze::phaze.
# Inputs: PHAZE_BINARY_DIR, PHAZE_CONSUMER_SOURCE, PHAZE_CONSUMER_DIR, PHAZE_EXAMPLE_DIR; optional
# PHAZE_CXX_COMPILER (the compiler phaze was configured with) and PHAZE_CONSUMER_ARGS (more -D options for
# the consumer's configure, e.g. -DPHAZE_GLPK_LIBRARY=/nonexistent to see a missing dependency reported).
file(REMOVE_RECURSE "${PHAZE_CONSUMER_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${PHAZE_BINARY_DIR}" --prefix "${PHAZE_CONSUMER_DIR}/prefix"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()

set(args "-DCMAKE_PREFIX_PATH=${PHAZE_CONSUMER_DIR}/prefix" "-DPHAZE_EXAMPLE_DIR=${PHAZE_EXAMPLE_DIR}"
         -DCMAKE_BUILD_TYPE=Release)
if(PHAZE_CXX_COMPILER)
  list(APPEND args "-DCMAKE_CXX_COMPILER=${PHAZE_CXX_COMPILER}")
endif()
separate_arguments(extra UNIX_COMMAND "${PHAZE_CONSUMER_ARGS}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${PHAZE_CONSUMER_SOURCE}" -B "${PHAZE_CONSUMER_DIR}/build"
                        ${args} ${extra} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer project failed: ${rc}")
endif()
# The consumer must have found the phaze just installed, not another one on the machine.
file(STRINGS "${PHAZE_CONSUMER_DIR}/build/CMakeCache.txt" phaze_dir REGEX "^phaze_DIR:")
string(FIND "${phaze_dir}" "=${PHAZE_CONSUMER_DIR}/prefix/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the consumer found another phaze: ${phaze_dir}")
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

# The co-search example prints "gpt-760m on 64 accelerators: N designs, N evaluated, N pruned ..." and
# "best: ... samples/s (...x the TPUv4-like's ...)"; it exits 1 when the best design has no throughput.
execute_process(COMMAND "${PHAZE_CONSUMER_DIR}/build/co_search" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
set(counts "gpt-760m on 64 accelerators: [1-9][0-9]* designs, [1-9][0-9]* evaluated, [0-9]+ pruned")
set(best "\nbest: [0-9]+ x [0-9]+x[0-9]+ tensor cores, .* [0-9.]+ samples/s \\([0-9.]+x the TPUv4-like's")
if(rc OR NOT out MATCHES "${counts}" OR NOT out MATCHES "${best}")
  message(FATAL_ERROR "co-search example failed (${rc}): ${out}")
endif()
message(STATUS "co-search example: ${out}")

# The custom placer example exits 1 when the user's greedy placer beats the exact chain DP; it prints both.
execute_process(COMMAND "${PHAZE_CONSUMER_DIR}/build/custom_placer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "greedy placer: best [0-9.]+ samples/s" OR NOT out MATCHES "chain [0-9.]+ s per batch")
  message(FATAL_ERROR "custom placer example failed (${rc}): ${out}")
endif()
message(STATUS "custom placer example: ${out}")

# The mixed-cluster example exits 1 when no plan fits or its stages do not use both device types.
execute_process(COMMAND "${PHAZE_CONSUMER_DIR}/build/mixed_cluster" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "[1-9][0-9]* plans evaluated, [1-9][0-9]* fit" OR NOT out MATCHES "stage 0 on h100-sxm")
  message(FATAL_ERROR "mixed-cluster example failed (${rc}): ${out}")
endif()
message(STATUS "mixed-cluster example: ${out}")
