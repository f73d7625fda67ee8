/// @file
/// Umbrella header for the DSL and the pure model: quantities, ops, layers, models, the zoo.
/// Includes no solver, threading or file-reading headers.
#pragma once

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/model/dsl.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/op.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/model/zoo.hpp"
