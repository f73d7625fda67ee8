/// @file
/// The one door to Boost.Hana: the few Hana headers phaze's DSLs use to ask which types a keyword set holds
/// (core/keywords.hpp: the calls an option belongs to, the kind of value an option was given). Hana stays
/// at the DSL boundary: keyword sets are a handful of types per call; model graphs, knob lists
/// and search spaces are constexpr values, never Hana sequences, and nothing looks options up in a
/// hana::map. Including only these headers rather than <boost/hana.hpp> keeps the cost near 0.1 s per
/// translation unit.
#pragma once

#include <boost/hana/bool.hpp>
#include <boost/hana/contains.hpp>
#include <boost/hana/find_if.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
