/// @file
/// Umbrella header for the DSL and the pure model: quantities, ops, layers, models, the zoo, devices, the
/// accelerator search space and operator costs. Includes no solver, threading or file-reading headers.
#pragma once

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/model/dsl.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/op.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/model/zoo.hpp"
