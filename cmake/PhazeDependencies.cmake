# Finds phaze's dependencies (Debian packages, DESIGN.md section 3). Only nlohmann_json is needed by the
# library target itself; the rest are found for phaze's own programs and tests.
find_package(nlohmann_json 3 REQUIRED)

if(PHAZE_BUILD_APP OR PHAZE_BUILD_TESTS OR PHAZE_BUILD_EXAMPLES OR PHAZE_BUILD_BENCHMARKS)
  find_package(fmt REQUIRED)
  find_package(CLI11 QUIET CONFIG)
  if(NOT TARGET CLI11::CLI11)
    find_path(PHAZE_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${PHAZE_CLI11_INCLUDE})
  endif()
endif()

# The co-search program: threads (oneTBB, libtbb-dev) and processes (Open MPI, libopenmpi-dev).
if(PHAZE_BUILD_APP)
  find_package(TBB REQUIRED)
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()

# Debian's Lemon ships no CMake target: wrap liblemon.a and GLPK in one imported target (DESIGN.md section 3).
find_library(PHAZE_LEMON_LIBRARY NAMES liblemon.a lemon)
find_library(PHAZE_GLPK_LIBRARY NAMES glpk)
find_path(PHAZE_LEMON_INCLUDE lemon/lp.h)
if(NOT (PHAZE_LEMON_LIBRARY AND PHAZE_GLPK_LIBRARY AND PHAZE_LEMON_INCLUDE))
  if(PHAZE_BUILD_APP OR PHAZE_BUILD_TESTS OR PHAZE_BUILD_BENCHMARKS)
    message(FATAL_ERROR "phaze: Lemon and GLPK not found (Debian packages liblemon-dev and libglpk-dev); "
                        "run scripts/install-deps.sh")
  endif()
elseif(NOT TARGET phaze::lemon)
  add_library(phaze::lemon INTERFACE IMPORTED)
  target_include_directories(phaze::lemon INTERFACE ${PHAZE_LEMON_INCLUDE})
  target_link_libraries(phaze::lemon INTERFACE ${PHAZE_LEMON_LIBRARY} ${PHAZE_GLPK_LIBRARY})
endif()
