// Diagnostics of autodiff: a non-scalar or integer loss, an integer value or a foreign value to
// differentiate with respect to, a composite op left in the graph, a graph without a "loss" output.
#include "passes/Autodiff.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

namespace kiln::testing {
namespace {

using ir::OpKind;
using ir::Value;

SourceLoc at(int line) { return SourceLoc{"model.cpp", line, 3}; }

std::string errorOf(ir::Graph& g, Value* loss, std::vector<Value*> wrt) {
  try {
    passes::appendGradients(g, loss, wrt);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(msg, text) EXPECT_NE((msg).find(text), std::string::npos) << (msg)

TEST(AutodiffErrors, NonScalarLoss) {
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {2, 3}}, {});
  Value* y = g.addNode(OpKind::Exp, {p}, std::span<const ir::NamedAttr>{}, at(5), "y");
  std::string msg = errorOf(g, y, {p});
  EXPECT_HAS(msg, "model.cpp:5:3");
  EXPECT_HAS(msg, "loss must be a float scalar");
  EXPECT_HAS(msg, "%y (f32[2,3]) is not a scalar");
}

TEST(AutodiffErrors, IntegerLoss) {
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {2}}, {});
  Value* n = g.addNode(OpKind::ArgMax, {p}, std::vector<ir::NamedAttr>{{"axis", int64_t{0}}}, at(6));
  std::string msg = errorOf(g, n, {p});
  EXPECT_HAS(msg, "the result of 'argmax' at model.cpp:6:3 (i64[]) is not a float");
}

TEST(AutodiffErrors, IntegerWrt) {
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {}}, {});
  Value* k = g.addInput("k", {DType::i32, {}}, at(2));
  std::string msg = errorOf(g, p, {p, k});
  EXPECT_HAS(msg, "model.cpp:2:3");
  EXPECT_HAS(msg, "cannot differentiate with respect to %k (i32[])");
  EXPECT_HAS(msg, "only float values have gradients");
}

TEST(AutodiffErrors, ValueNotInGraph) {
  ir::Graph g("t"), other("other");
  Value* p = g.addParam("p", {DType::f32, {}}, {});
  Value* q = other.addParam("q", {DType::f32, {}}, {});
  EXPECT_HAS(errorOf(g, p, {p, q}), "value #1 to differentiate with respect to is not in graph 't'");
  EXPECT_HAS(errorOf(g, q, {p}), "the loss is not a value of graph 't'");
}

TEST(AutodiffErrors, CompositeNeedsDecomposeFirst) {
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {3}}, {});
  Value* s = g.addNode(OpKind::Softmax, {p}, std::span<const ir::NamedAttr>{}, at(9));
  Value* loss = g.addNode(OpKind::ReduceSum, {s}, std::vector<ir::NamedAttr>{{"axes", ir::Ints{}}}, at(10));
  std::string msg = errorOf(g, loss, {p});
  EXPECT_HAS(msg, "model.cpp:9:3");
  EXPECT_HAS(msg, "op 'softmax' is composite; run the decompose pass first");
}

TEST(AutodiffErrors, PassNeedsALossOutput) {
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {}}, {});
  g.addOutput("y", p);
  try {
    passes::runPipeline(g, {"autodiff"});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_HAS(msg, "has no output named 'loss' (outputs: y)");
  }
}

}  // namespace
}  // namespace kiln::testing
