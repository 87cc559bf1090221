// Helpers for the interpreter tests: build one-op graphs, make tensors from literal values, and
// compare results exactly (NaN equals NaN, and the sign of zero matters where asked).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "interp/Interpreter.h"

namespace kiln::interp::testing {

using ir::OpKind;
using rt::HostTensor;

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline HostTensor tensor(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  return HostTensor::fromDoubles(t, std::move(shape), values);
}
inline HostTensor f32(std::vector<int64_t> shape, const std::vector<double>& v) {
  return tensor(DType::f32, std::move(shape), v);
}
inline HostTensor f64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return tensor(DType::f64, std::move(shape), v);
}
inline HostTensor boolean(std::vector<int64_t> shape, const std::vector<double>& v) {
  return tensor(DType::boolean, std::move(shape), v);
}
inline HostTensor i32(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor t(DType::i32, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.as<int32_t>()[i] = static_cast<int32_t>(v[i]);
  return t;
}
/// i64 tensors are written raw so values beyond 2^53 stay exact.
inline HostTensor i64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor t(DType::i64, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}
inline std::vector<int64_t> ints(const HostTensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.dtype() == DType::i64   ? t.as<int64_t>()[i]
                  : t.dtype() == DType::i32 ? t.as<int32_t>()[i]
                                            : static_cast<int64_t>(t.at(i)));
  return out;
}

/// Evaluates one op whose operands are graph inputs a0, a1, …; returns its result.
inline HostTensor evalOp(OpKind op, const std::vector<HostTensor>& operands, std::vector<ir::NamedAttr> attrs = {}) {
  ir::Graph g;
  TensorMap inputs;
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string name = "a" + std::to_string(i);
    values.push_back(g.addInput(name, ir::TensorType{operands[i].dtype(), operands[i].shape()}));
    inputs.insert_or_assign(name, operands[i]);
  }
  g.addOutput("out", g.addNode(op, values, attrs));
  return runPrimitives(g, inputs, {}).at("out");
}

/// Exact comparison of every element (as doubles); NaN matches NaN.
inline void expectValues(const HostTensor& t, const std::vector<double>& expected) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size())) << t.typeStr();
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = t.at(static_cast<int64_t>(i));
    if (std::isnan(expected[i]))
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " is " << got;
    else
      EXPECT_EQ(got, expected[i]) << "element " << i << " of " << t.typeStr();
  }
}

inline void expectNear(const HostTensor& t, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size())) << t.typeStr();
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = t.at(static_cast<int64_t>(i));
    if (std::isnan(expected[i]))
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " is " << got;
    else if (std::isinf(expected[i]))
      EXPECT_EQ(got, expected[i]) << "element " << i << " of " << t.typeStr();
    else
      EXPECT_NEAR(got, expected[i], tol) << "element " << i << " of " << t.typeStr();
  }
}

inline void expectType(const HostTensor& t, DType dtype, const std::vector<int64_t>& shape) {
  EXPECT_EQ(t.dtype(), dtype) << t.typeStr();
  EXPECT_EQ(t.shape(), shape) << t.typeStr();
}

/// The kiln::Error message thrown by `f`, or "" (a test failure) when nothing is thrown.
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

}  // namespace kiln::interp::testing
