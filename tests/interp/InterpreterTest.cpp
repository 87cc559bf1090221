// The interpreter driver: evaluator coverage, signature checks (inputs and parameters), parameter
// initializers, multi-node graphs, and end-to-end runs of composite ops through decompose.
#include "InterpTestUtil.h"
#include "support/Philox.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;

TEST(InterpCoverage, EveryPrimitiveHasAnEvaluatorAndNoCompositeDoes) {
  for (const ir::OpInfo& info : ir::allOps()) {
    if (info.has(ir::kComposite))
      EXPECT_FALSE(hasEvaluator(info.kind)) << info.name;
    else
      EXPECT_TRUE(hasEvaluator(info.kind)) << "primitive op '" << info.name << "' has no evaluator";
  }
}

// y = relu(x) + w, with an input and a parameter.
struct SmallGraph {
  ir::Graph g;
  SmallGraph() {
    ir::Value* x = g.addInput("x", {DType::f32, {2}});
    ir::Value* w = g.addParam("w", {DType::f32, {2}}, ir::Initializer{ir::Initializer::Kind::Constant, 0.5});
    ir::Value* r = g.addNode(OpKind::Relu, {x}, {});
    g.addOutput("y", g.addNode(OpKind::Add, {r, w}, {}));
    g.addOutput("r", r);
    g.addOutput("echo", x);
  }
};

TEST(InterpSignature, EvaluatesNodesInOrderAndReturnsEveryOutput) {
  SmallGraph s;
  TensorMap out = runPrimitives(s.g, {{"x", f32({2}, {-1, 2})}}, {});
  ASSERT_EQ(out.size(), 3u);
  expectValues(out.at("y"), {0.5, 2.5});  // w from its initializer
  expectValues(out.at("r"), {0, 2});
  expectValues(out.at("echo"), {-1, 2});
  TensorMap given = runPrimitives(s.g, {{"x", f32({2}, {-1, 2})}}, {{"w", f32({2}, {10, 20})}});
  expectValues(given.at("y"), {10, 22});
}

// ---- initializers ------------------------------------------------------------------------------

ir::Param param(ir::Graph& g, const std::string& name, ir::TensorType type, ir::Initializer init) {
  g.addParam(name, std::move(type), init);
  return g.params().back();
}

TEST(InterpInitializers, ZerosOnesConstant) {
  ir::Graph g;
  expectValues(initialize(param(g, "a", {DType::f32, {3}}, {ir::Initializer::Kind::Zeros})), {0, 0, 0});
  expectValues(initialize(param(g, "b", {DType::f16, {2}}, {ir::Initializer::Kind::Ones})), {1, 1});
  expectValues(initialize(param(g, "c", {DType::f32, {2, 1}}, {ir::Initializer::Kind::Constant, -2.5})), {-2.5, -2.5});
  EXPECT_EQ(ints(initialize(param(g, "d", {DType::i64, {1}}, {ir::Initializer::Kind::Constant, 7}))),
            (std::vector<int64_t>{7}));
}

TEST(InterpInitializers, UniformAndNormalUseThePhiloxStreamFromCounterZero) {
  ir::Graph g;
  HostTensor u = initialize(param(g, "u", {DType::f32, {33}}, {ir::Initializer::Kind::Uniform, -2, 6, 17}));
  for (int64_t i = 0; i < 33; ++i) {
    EXPECT_FLOAT_EQ(u.at(i), -2 + 8 * philoxUniform(17, 0, static_cast<uint64_t>(i)));
    EXPECT_GE(u.at(i), -2.0);
    EXPECT_LT(u.at(i), 6.0);
  }
  HostTensor n = initialize(param(g, "n", {DType::f32, {7}}, {ir::Initializer::Kind::Normal, 1, 0.5, 3}));
  for (int64_t i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(n.at(i), 1 + 0.5 * philoxNormal(3, 0, static_cast<uint64_t>(i)));
  // The same seed gives the same tensor.
  EXPECT_TRUE(u.identical(initialize(param(g, "u2", {DType::f32, {33}}, {ir::Initializer::Kind::Uniform, -2, 6, 17}))));
}

TEST(InterpInitializers, InitializeParamsByName) {
  ir::Graph g;
  g.addParam("fc.weight", {DType::f32, {2, 2}}, {ir::Initializer::Kind::Ones});
  g.addParam("fc.bias", {DType::f32, {2}}, {ir::Initializer::Kind::Zeros});
  TensorMap p = initializeParams(g);
  ASSERT_EQ(p.size(), 2u);
  expectValues(p.at("fc.weight"), {1, 1, 1, 1});
  expectValues(p.at("fc.bias"), {0, 0});
}

// ---- composites end to end (run decomposes first) ----------------------------------------------

TEST(InterpRunComposites, SoftmaxRowsSumToOne) {
  ir::Graph g;
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  g.addOutput("y", g.addNode(OpKind::Softmax, {x}, {}));
  // Large logits: the max subtraction keeps exp finite.
  HostTensor y = run(g, {{"x", f32({2, 3}, {1, 2, 3, 1000, 1000, 1000})}}).at("y");
  expectType(y, DType::f32, {2, 3});
  // softmax(1, 2, 3) = e^k / (e + e^2 + e^3)
  expectNear(y, {0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6);
  EXPECT_NEAR(y.at(0) + y.at(1) + y.at(2), 1.0, 1e-6);
}

TEST(InterpRunComposites, LinearMatchesHandValues) {
  ir::Graph g;
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  ir::Value* w = g.addParam("w", {DType::f32, {2, 3}}, {ir::Initializer::Kind::Zeros});
  ir::Value* b = g.addParam("b", {DType::f32, {2}}, {ir::Initializer::Kind::Zeros});
  g.addOutput("y", g.addNode(OpKind::Linear, {x, w, b}, {}));
  // y = x w^T + b with w = [[1, 0, -1], [2, 2, 2]], b = [10, 20].
  HostTensor y = run(g, {{"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}},
                     {{"w", f32({2, 3}, {1, 0, -1, 2, 2, 2})}, {"b", f32({2}, {10, 20})}})
                     .at("y");
  expectType(y, DType::f32, {2, 2});
  expectValues(y, {8, 32, 8, 50});
}

}  // namespace
}  // namespace kiln::interp::testing
