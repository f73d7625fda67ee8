// expect-error: conversion from [^ ]*double[^ ]* to non-scalar type [^ ]*phaze::bytes
// A raw number becomes a quantity only through the explicit constructor or a literal (1024_B).
#include <phaze/core/quantity.hpp>

phaze::bytes buffer = 1024.0;
