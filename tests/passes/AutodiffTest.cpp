// The autodiff pass: rule coverage, the structure of the backward graph (accumulation, inactive
// integer paths, zero gradients with warnings, source locations) and a few gradients checked
// numerically against hand-derived formulas with the reference interpreter. The finite-difference
// check of every op lives in tests/gradcheck.
#include "passes/Autodiff.h"
#include "passes/autodiff/GradRules.h"

#include "DecomposeHelpers.h"
#include "passes/Pass.h"

#include <algorithm>
#include <set>

namespace kiln::testing {
namespace {

using ir::OpKind;
using ir::Value;

SourceLoc at(int line) { return SourceLoc{"model.cpp", line, 3}; }

Value* op(ir::Graph& g, OpKind k, std::vector<Value*> xs, const std::vector<ir::NamedAttr>& attrs = {},
          int line = 12) {
  return g.addNode(k, std::move(xs), attrs, at(line));
}

Value* sumAll(ir::Graph& g, Value* x, int line = 90) {
  return op(g, OpKind::ReduceSum, {x}, {{"axes", ir::Ints{}}}, line);
}

ir::Initializer zerosInit() { return {}; }

// Evaluates `outs` of `g` (primitives only) after adding them as outputs.
interp::TensorMap evalOutputs(ir::Graph& g, const std::vector<std::pair<std::string, Value*>>& outs,
                              const interp::TensorMap& inputs, const interp::TensorMap& params) {
  for (const auto& [name, v] : outs) g.addOutput(name, v);
  std::vector<std::string> errors = ir::verifyGraph(g);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n")) << "\n" << ir::printGraph(g);
  return interp::runPrimitives(g, inputs, params);
}

TEST(Autodiff, EveryPrimitiveHasARuleXorIsListedWithoutGradient) {
  std::set<OpKind> listed;
  for (const passes::NoGradient& n : passes::opsWithoutGradient()) {
    EXPECT_TRUE(listed.insert(n.op).second) << ir::opName(n.op) << " listed twice";
    EXPECT_GT(std::string_view(n.reason).size(), 10u) << ir::opName(n.op) << " needs a reason";
  }
  for (const ir::OpInfo& info : ir::allOps()) {
    bool rule = passes::ad::findGradRule(info.kind) != nullptr;
    if (info.has(ir::kComposite)) {
      EXPECT_FALSE(rule || listed.count(info.kind)) << info.name << " is composite: differentiated via decompose";
      continue;
    }
    EXPECT_NE(rule, listed.count(info.kind) > 0)
        << info.name << (rule ? " has a rule and is listed without gradient" : " has neither a rule nor a reason");
  }
}

TEST(Autodiff, ValueUsedTwiceAccumulates) {
  // loss = sum(p * p + p): dp = 2p + 1, from three uses of p.
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f64, {3}}, zerosInit());
  Value* loss = sumAll(g, op(g, OpKind::Add, {op(g, OpKind::Mul, {p, p}), p}));
  size_t forward = g.nodes().size();
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{p});
  ASSERT_EQ(r.grads.size(), 1u);
  EXPECT_TRUE(r.warnings.empty());
  size_t adds = std::count_if(g.nodes().begin() + forward, g.nodes().end(),
                              [](const auto& n) { return n->op == OpKind::Add; });
  EXPECT_EQ(adds, 2u) << ir::printGraph(g);  // three contributions, two accumulations
  auto out = evalOutputs(g, {{"dp", r.grads[0]}}, {}, {{"p", f64({3}, {1.5, -2, 0})}});
  expectValues(out.at("dp"), {4, -3, 1}, kF64Tol);
}

TEST(Autodiff, IntegerPathsAndStopGradientGiveNone) {
  // p reaches the loss only through an i32 cast, floor and stop_gradient; q directly.
  ir::Graph g("t");
  Value* p = g.addParam("p", {DType::f32, {2}}, zerosInit(), at(3));
  Value* q = g.addParam("q", {DType::f32, {2}}, zerosInit(), at(4));
  Value* viaInt = op(g, OpKind::Cast, {op(g, OpKind::Cast, {p}, {{"dtype", DType::i32}})}, {{"dtype", DType::f32}});
  Value* viaFloor = op(g, OpKind::Floor, {p});
  Value* viaStop = op(g, OpKind::StopGradient, {p});
  Value* cond = op(g, OpKind::Gt, {p, q});
  Value* sel = op(g, OpKind::Select, {cond, q, viaFloor});
  Value* loss = sumAll(g, op(g, OpKind::Mul, {op(g, OpKind::Add, {viaInt, viaStop}), sel}));
  size_t forward = g.nodes().size();
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{p, q});
  for (size_t i = forward; i < g.nodes().size(); ++i)
    for (Value* v : g.nodes()[i]->operands)
      EXPECT_TRUE(isFloat(v->type.dtype) || g.nodes()[i]->op == OpKind::Select)
          << "backward node '" << g.nodes()[i]->info().name << "' uses a non-float value";
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("%p"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("model.cpp:3:3"), std::string::npos) << r.warnings[0];
  // dq = (int(p) + p) where p > q (select picked q), else 0.
  auto out = evalOutputs(g, {{"dp", r.grads[0]}, {"dq", r.grads[1]}}, {},
                         {{"p", f32({2}, {2.5, -1.5})}, {"q", f32({2}, {1, 7})}});
  expectValues(out.at("dp"), {0, 0}, 0);
  expectValues(out.at("dq"), {4.5, 0}, kF32Tol);
}

TEST(Autodiff, UnusedParameterGetsZerosAndAWarning) {
  ir::Graph g("t");
  Value* w = g.addParam("w", {DType::f32, {2, 2}}, zerosInit());
  Value* unused = g.addParam("fc.bias", {DType::f32, {3}}, zerosInit(), at(7));
  Value* loss = sumAll(g, w);
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{w, unused});
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("%fc.bias"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("does not influence the loss"), std::string::npos) << r.warnings[0];
  EXPECT_EQ(r.grads[1]->type, unused->type);
  auto out = evalOutputs(g, {{"dw", r.grads[0]}, {"db", r.grads[1]}}, {}, {});
  expectValues(out.at("dw"), {1, 1, 1, 1}, 0);
  expectValues(out.at("db"), {0, 0, 0}, 0);
}

TEST(Autodiff, BackwardNodesCarryTheForwardLocation) {
  ir::Graph g("t");
  Value* x = g.addInput("x", {DType::f32, {4, 3}});
  Value* w = g.addParam("w", {DType::f32, {3, 5}}, zerosInit());
  Value* h = op(g, OpKind::MatMul, {x, w}, {}, 20);
  Value* a = op(g, OpKind::Tanh, {h}, {}, 21);
  Value* loss = sumAll(g, a, 22);
  std::set<int> forwardLines;
  for (const auto& n : g.nodes()) forwardLines.insert(n->loc.line);
  size_t forward = g.nodes().size();
  passes::appendGradients(g, loss, std::vector<Value*>{w});
  std::set<int> backwardLines;
  for (size_t i = forward; i < g.nodes().size(); ++i) {
    const ir::Node& n = *g.nodes()[i];
    EXPECT_TRUE(forwardLines.count(n.loc.line)) << n.info().name << " at " << n.loc.str();
    backwardLines.insert(n.loc.line);
    if (n.op == OpKind::MatMul) {
      EXPECT_EQ(n.loc, at(20));
    }
    if (n.op == OpKind::Broadcast) {
      EXPECT_EQ(n.loc, at(22));
    }
  }
  EXPECT_EQ(backwardLines, (std::set<int>{20, 21, 22}));
  // x is a data input nobody asked about: no dx = dy·wᵀ matmul is emitted.
  size_t matmuls = std::count_if(g.nodes().begin() + forward, g.nodes().end(),
                                 [](const auto& n) { return n->op == OpKind::MatMul; });
  EXPECT_EQ(matmuls, 1u) << ir::printGraph(g);
}

TEST(Autodiff, MulWithBroadcastingSumsBackToEachShape) {
  // loss = sum(c * a * b), a[2,3], b[3], c[2,1]: da = c*b, db[j] = sum_i c_i a_ij.
  ir::Graph g("t");
  Value* a = g.addParam("a", {DType::f64, {2, 3}}, zerosInit());
  Value* b = g.addParam("b", {DType::f64, {3}}, zerosInit());
  Value* c = g.addInput("c", {DType::f64, {2, 1}});
  Value* loss = sumAll(g, op(g, OpKind::Mul, {c, op(g, OpKind::Mul, {a, b})}));
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{a, b});
  EXPECT_EQ(r.grads[0]->type, a->type);
  EXPECT_EQ(r.grads[1]->type, b->type);
  auto out = evalOutputs(g, {{"da", r.grads[0]}, {"db", r.grads[1]}}, {{"c", f64({2, 1}, {2, -1})}},
                         {{"a", f64({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", f64({3}, {0.5, -1, 3})}});
  expectValues(out.at("da"), {1, -2, 6, -0.5, 1, -3}, kF64Tol);
  expectValues(out.at("db"), {2 - 4, 4 - 5, 6 - 6}, kF64Tol);
}

TEST(Autodiff, BatchedMatMulReducesToEachOperandsBatchShape) {
  // loss = sum(W ⊙ (A·B)), A[2,2,3], B[3,2] broadcast over the batch: dA = W·Bᵀ, dB = Σ_b A_bᵀ·W_b.
  ir::Graph g("t");
  Value* A = g.addParam("A", {DType::f64, {2, 2, 3}}, zerosInit());
  Value* B = g.addParam("B", {DType::f64, {3, 2}}, zerosInit());
  Value* W = g.addInput("W", {DType::f64, {2, 2, 2}});
  Value* loss = sumAll(g, op(g, OpKind::Mul, {W, op(g, OpKind::MatMul, {A, B})}));
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{A, B});
  std::vector<double> av = {1, 2, 3, 4, 5, 6, -1, 0, 2, 1, -2, 0.5};
  std::vector<double> bv = {1, -1, 2, 0.5, 0, 3};
  std::vector<double> wv = {1, 2, -1, 0.5, 3, 1, 0, -2};
  std::vector<double> dA(12, 0), dB(6, 0);
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 2; ++j) {
          double wij = wv[n * 4 + i * 2 + j];
          dA[n * 6 + i * 3 + k] += wij * bv[k * 2 + j];
          dB[k * 2 + j] += av[n * 6 + i * 3 + k] * wij;
        }
  auto out = evalOutputs(g, {{"dA", r.grads[0]}, {"dB", r.grads[1]}}, {{"W", f64({2, 2, 2}, wv)}},
                         {{"A", f64({2, 2, 3}, av)}, {"B", f64({3, 2}, bv)}});
  expectValues(out.at("dA"), dA, kF64Tol);
  expectValues(out.at("dB"), dB, kF64Tol);
}

TEST(Autodiff, ReduceMaxSplitsTiesEvenly) {
  // Row 0 has a tie at 3: each gets half. keepdim and not, over axis 1.
  for (bool keepdim : {false, true}) {
    ir::Graph g("t");
    Value* x = g.addParam("x", {DType::f64, {2, 3}}, zerosInit());
    Value* w = g.addInput("w", {DType::f64, keepdim ? ir::Shape{2, 1} : ir::Shape{2}});
    Value* m = op(g, OpKind::ReduceMax, {x}, {{"axes", ir::Ints{-1}}, {"keepdim", keepdim}});
    Value* loss = sumAll(g, op(g, OpKind::Mul, {w, m}));
    passes::GradientResult r = passes::appendGradients(g, loss, std::vector<Value*>{x});
    auto out = evalOutputs(g, {{"dx", r.grads[0]}}, {{"w", f64(w->type.shape, {4, -2})}},
                           {{"x", f64({2, 3}, {1, 3, 3, 2, 0, 1})}});
    expectValues(out.at("dx"), {0, 2, 2, -2, 0, 0}, kF64Tol);
  }
}

TEST(Autodiff, SoftmaxThroughDecomposeAndThePass) {
  // loss = sum(w ⊙ softmax(x)) via the "autodiff" pass: dx = s ⊙ (w - sum(s ⊙ w)) per row.
  ir::Graph g("t");
  Value* x = g.addParam("x", {DType::f64, {2, 3}}, zerosInit());
  Value* w = g.addInput("w", {DType::f64, {2, 3}});
  Value* s = op(g, OpKind::Softmax, {x}, {{"axis", int64_t{1}}});
  g.addOutput("loss", sumAll(g, op(g, OpKind::Mul, {w, s})));
  passes::runPipeline(g, {"autodiff"});
  ASSERT_NE(g.findOutput("grad.x"), nullptr);
  std::vector<double> xv = {0.5, -1, 2, 0, 0, 1}, wv = {1, 2, 3, -1, 0.5, 2};
  interp::TensorMap out = interp::runPrimitives(g, {{"w", f64({2, 3}, wv)}}, {{"x", f64({2, 3}, xv)}});
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    double z = 0, sw = 0;
    for (int j = 0; j < 3; ++j) z += std::exp(xv[r * 3 + j]);
    for (int j = 0; j < 3; ++j) sw += std::exp(xv[r * 3 + j]) / z * wv[r * 3 + j];
    for (int j = 0; j < 3; ++j) expected.push_back(std::exp(xv[r * 3 + j]) / z * (wv[r * 3 + j] - sw));
  }
  expectValues(out.at("grad.x"), expected, kF64Tol);
}

TEST(Autodiff, PassAddsOneGradientOutputPerFloatParameter) {
  ir::Graph g("t");
  Value* x = g.addInput("x", {DType::f32, {4, 3}});
  Value* w = g.addParam("fc.weight", {DType::f32, {5, 3}}, zerosInit());
  Value* b = g.addParam("fc.bias", {DType::f32, {5}}, zerosInit());
  g.addParam("step", {DType::i64, {}}, zerosInit());
  Value* y = op(g, OpKind::Linear, {x, w, b});
  g.addOutput("loss", op(g, OpKind::ReduceMean, {y}, {{"axes", ir::Ints{}}}));
  passes::runPipeline(g, {"autodiff"});
  ASSERT_NE(g.findOutput("grad.fc.weight"), nullptr);
  ASSERT_NE(g.findOutput("grad.fc.bias"), nullptr);
  EXPECT_EQ(g.findOutput("grad.step"), nullptr);
  // decompose rebuilt the graph, so look the parameter up again.
  EXPECT_EQ(g.findOutput("grad.fc.weight")->value->type, g.findParam("fc.weight")->value->type);
  // d mean(x wᵀ + b) / db = 4 rows / 20 elements each.
  interp::TensorMap out = interp::runPrimitives(g, {{"x", f32({4, 3}, std::vector<double>(12, 1.0))}}, {});
  expectValues(out.at("grad.fc.bias"), std::vector<double>(5, 0.2), kF32Tol);
  expectValues(out.at("grad.fc.weight"), std::vector<double>(15, 0.2), kF32Tol);
}

}  // namespace
}  // namespace kiln::testing
