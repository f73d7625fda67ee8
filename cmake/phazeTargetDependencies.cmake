# Finds the libraries phaze's public headers need, for the phaze::phaze target: nlohmann_json, {fmt}
# (io/), Boost.Hana (Boost::headers), range-v3, and Lemon's LP interface on GLPK (sched/), which Debian
# ships without a CMake target, so this file defines one: phaze::lemon (liblemon.a, then GLPK).
#
# One piece of code for both places phaze is used from: phaze's own build includes it from
# cmake/PhazeDependencies.cmake, and an installed phaze from phazeConfig.cmake (it is installed next to it).
# It never stops CMake itself: each library it cannot find is listed in PHAZE_MISSING_DEPENDENCIES (with
# PHAZE_MISSING_DEBIAN_PACKAGES and a ready message, PHAZE_MISSING_DEPENDENCIES_MESSAGE), and the caller
# decides: phaze's build stops; find_package(phaze) reports phaze as not found with that message.
#
# No include_guard: imported targets are visible only in the directory that found them, so a project that
# calls find_package(phaze) in two sibling directories needs this file to run in both.

# CMake 3.30 retires the FindBoost module; Debian 12's Boost (1.74) ships BoostConfig.cmake, which both use.
if(POLICY CMP0167)
  cmake_policy(SET CMP0167 NEW)
endif()

set(PHAZE_MISSING_DEPENDENCIES "")
set(PHAZE_MISSING_DEBIAN_PACKAGES "")

# _phaze_missing(<what> <Debian package>): records a dependency that was not found.
macro(_phaze_missing what debian_package)
  list(APPEND PHAZE_MISSING_DEPENDENCIES "${what} (Debian package ${debian_package})")
  list(APPEND PHAZE_MISSING_DEBIAN_PACKAGES ${debian_package})
endmacro()

# _phaze_find_package(<package> <imported target> <Debian package> [find_package arguments...]):
# a CMake package found quietly, judged by the imported target phaze links.
macro(_phaze_find_package package target debian_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT TARGET ${target})
    _phaze_missing("${package}: find_package(${package}) gave no target ${target}" ${debian_package})
  endif()
endmacro()

_phaze_find_package(nlohmann_json nlohmann_json::nlohmann_json nlohmann-json3-dev 3)
_phaze_find_package(fmt fmt::fmt libfmt-dev)
_phaze_find_package(Boost Boost::headers libboost-dev)
# range-v3's version file accepts only its exact version (0.12.0 on Debian 12), so none is asked for.
_phaze_find_package(range-v3 range-v3::range-v3 librange-v3-dev)

# Lemon and GLPK: found by file, since Debian's lemonConfig.cmake only sets variables and names no GLPK.
# The cache variables can be set to other files; a path that does not exist counts as not found.
find_path(PHAZE_LEMON_INCLUDE lemon/glpk.h DOC "Directory holding lemon/glpk.h (Debian: liblemon-dev)")
find_library(PHAZE_LEMON_LIBRARY NAMES liblemon.a lemon DOC "Lemon's library (Debian: liblemon-dev)")
find_path(PHAZE_GLPK_INCLUDE glpk.h DOC "Directory holding glpk.h (Debian: libglpk-dev)")
find_library(PHAZE_GLPK_LIBRARY NAMES glpk DOC "GLPK's library (Debian: libglpk-dev)")
mark_as_advanced(PHAZE_LEMON_INCLUDE PHAZE_LEMON_LIBRARY PHAZE_GLPK_INCLUDE PHAZE_GLPK_LIBRARY)
foreach(_phaze_item IN ITEMS "LEMON_INCLUDE;Lemon's header lemon/glpk.h;liblemon-dev"
                             "LEMON_LIBRARY;Lemon's library liblemon.a;liblemon-dev"
                             "GLPK_INCLUDE;GLPK's header glpk.h;libglpk-dev"
                             "GLPK_LIBRARY;GLPK's library libglpk;libglpk-dev")
  list(GET _phaze_item 0 _phaze_var)
  list(GET _phaze_item 1 _phaze_what)
  list(GET _phaze_item 2 _phaze_debian)
  if(NOT PHAZE_${_phaze_var})
    _phaze_missing("${_phaze_what}, not found" ${_phaze_debian})
  elseif(NOT EXISTS "${PHAZE_${_phaze_var}}")
    _phaze_missing("${_phaze_what}: PHAZE_${_phaze_var} is '${PHAZE_${_phaze_var}}', which does not exist"
                   ${_phaze_debian})
  endif()
endforeach()
unset(_phaze_item)
unset(_phaze_var)
unset(_phaze_what)
unset(_phaze_debian)

if(NOT PHAZE_MISSING_DEPENDENCIES AND NOT TARGET phaze::lemon)
  add_library(phaze::lemon INTERFACE IMPORTED)
  target_include_directories(phaze::lemon INTERFACE "${PHAZE_LEMON_INCLUDE}" "${PHAZE_GLPK_INCLUDE}")
  # liblemon.a first: the linker resolves its GLPK calls from the library that follows it.
  target_link_libraries(phaze::lemon INTERFACE "${PHAZE_LEMON_LIBRARY}" "${PHAZE_GLPK_LIBRARY}")
endif()

set(PHAZE_MISSING_DEPENDENCIES_MESSAGE "")
if(PHAZE_MISSING_DEPENDENCIES)
  list(REMOVE_DUPLICATES PHAZE_MISSING_DEBIAN_PACKAGES)
  list(JOIN PHAZE_MISSING_DEPENDENCIES "\n  " _phaze_list)
  list(JOIN PHAZE_MISSING_DEBIAN_PACKAGES " " _phaze_packages)
  string(CONCAT PHAZE_MISSING_DEPENDENCIES_MESSAGE
         "phaze's headers need libraries that were not found:\n  ${_phaze_list}\n"
         "On Debian 12: apt-get install ${_phaze_packages}")
  unset(_phaze_list)
  unset(_phaze_packages)
endif()
