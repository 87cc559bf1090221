// Helpers for the front-end tests.
#pragma once

#include "frontend/Kiln.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace kiln::testing {

/// Runs `f` and returns the message of the kiln::Error it throws ("" and a test failure if none).
template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

/// The node that produced `t`.
inline const ir::Node& producer(const Tensor& t) {
  EXPECT_NE(t.value()->producer, nullptr);
  return *t.value()->producer;
}

}  // namespace kiln::testing
