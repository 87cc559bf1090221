// Shared helpers for the decompose tests: build a one-op graph, decompose it while checking the
// structural promises of the pass, and evaluate the result with the reference interpreter.
//
// Tolerances: the interpreter evaluates every primitive in double precision and rounds each result
// to the op's element type. In f64 the decompositions are therefore checked to 1e-12 against
// closed-form values; in f32 each op adds at most half an ulp (6e-8 relative), so chains of the
// length these rules produce stay within kF32Tol for values of order one.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Decompose.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kiln::testing {

inline constexpr double kF64Tol = 1e-12;
inline constexpr double kF32Tol = 2e-6;

inline SourceLoc modelLoc() { return SourceLoc{"model.cpp", 12, 5}; }

/// Graph::addNode with the attributes as a braced list.
inline ir::Value* addOp(ir::Graph& g, ir::OpKind op, std::vector<ir::Value*> operands,
                        const std::vector<ir::NamedAttr>& attrs = {}, SourceLoc loc = modelLoc(),
                        std::string name = {}) {
  return g.addNode(op, std::move(operands), attrs, std::move(loc), std::move(name));
}

/// inputs %in0, %in1, … ; one node %r = op(...) at modelLoc(); output %out = %r.
inline ir::Graph singleOpGraph(ir::OpKind op, const std::vector<ir::TensorType>& operands,
                               const std::vector<ir::NamedAttr>& attrs) {
  ir::Graph g("test");
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < operands.size(); ++i) values.push_back(g.addInput(fmt::format("in{}", i), operands[i]));
  ir::Value* r = g.addNode(op, values, attrs, modelLoc(), "r");
  g.addOutput("out", r);
  return g;
}

/// Runs the pass and checks: no composite op is left and the graph verifies.
inline void decomposeChecked(ir::Graph& g) {
  passes::decompose(g);
  for (const auto& n : g.nodes())
    EXPECT_FALSE(n->info().has(ir::kComposite)) << "composite '" << n->info().name << "' left after decompose";
  std::vector<std::string> errors = ir::verifyGraph(g);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n")) << "\n" << ir::printGraph(g);
}

/// Decomposes one `op` applied to `inputs` and evaluates it with the reference interpreter.
inline rt::HostTensor evalDecomposed(ir::OpKind op, const std::vector<rt::HostTensor>& inputs,
                                     const std::vector<ir::NamedAttr>& attrs = {}) {
  std::vector<ir::TensorType> types;
  interp::TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types.push_back({inputs[i].dtype(), inputs[i].shape()});
    feed[fmt::format("in{}", i)] = inputs[i];
  }
  ir::Graph g = singleOpGraph(op, types, attrs);
  ir::TensorType resultType = g.outputs()[0].value->type;
  decomposeChecked(g);
  interp::TensorMap out = interp::runPrimitives(g, feed, {});
  rt::HostTensor r = out.at("out");
  EXPECT_EQ(r.dtype(), resultType.dtype);
  EXPECT_EQ(r.shape(), resultType.shape);
  return r;
}

inline rt::HostTensor f32(std::vector<int64_t> shape, const std::vector<double>& v) {
  return rt::HostTensor::fromDoubles(DType::f32, std::move(shape), v);
}
inline rt::HostTensor f64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return rt::HostTensor::fromDoubles(DType::f64, std::move(shape), v);
}
inline rt::HostTensor i64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return rt::HostTensor::fromDoubles(DType::i64, std::move(shape), v);
}

inline void expectValues(const rt::HostTensor& t, const std::vector<double>& expected, double tol) {
  std::vector<double> got = t.toDoubles();
  ASSERT_EQ(got.size(), expected.size()) << t.typeStr();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << "element " << i;
}

}  // namespace kiln::testing
