# Finds phaze's dependencies (Debian packages, scripts/install-deps.sh). What the library target needs is found
# by phazeTargetDependencies.cmake, the same file an installed phaze's phazeConfig.cmake runs; the rest are
# for phaze's own programs and tests.
include(phazeTargetDependencies)
if(PHAZE_MISSING_DEPENDENCIES)
  message(FATAL_ERROR "${PHAZE_MISSING_DEPENDENCIES_MESSAGE}\n(scripts/install-deps.sh installs all of "
                      "phaze's Debian packages)")
endif()

if(PHAZE_BUILD_APP OR PHAZE_BUILD_TESTS OR PHAZE_BUILD_EXAMPLES OR PHAZE_BUILD_BENCHMARKS)
  find_package(CLI11 QUIET CONFIG)
  if(NOT TARGET CLI11::CLI11)
    find_path(PHAZE_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${PHAZE_CLI11_INCLUDE})
  endif()
endif()

# The co-search program: threads (oneTBB, libtbb-dev) and processes (Open MPI, libopenmpi-dev). Never on
# phaze::phaze: only the program runs the search on threads and processes.
if(PHAZE_BUILD_APP)
  find_package(TBB REQUIRED)
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()
