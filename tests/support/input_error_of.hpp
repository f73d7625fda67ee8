// Test helper: the message of the phaze::input_error a call throws.
#pragma once

#include <phaze/core/error.hpp>

#include <catch2/catch.hpp>

#include <exception>
#include <string>

namespace phaze::testing {

/// The what() of the input_error `f` throws; fails the test when it throws anything else or nothing.
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected phaze::input_error, got another exception: " << e.what());
  }
  FAIL("expected phaze::input_error, nothing was thrown");
  return {};
}

}  // namespace phaze::testing
