// canonicalize (passes/Canonicalize.h) keeps what the reference interpreter computes, bit for bit
// (the sign of zero included; any NaN equals any NaN): on every zoo model's inference graph and
// training step (SGD and Adam) after decompose, where it must also remove nodes, and on a few
// hundred random graphs (RandomGraphs.h), which also check its constant folding against the
// interpreter's arithmetic. Plus names, idempotence and the degenerate graphs. The golden files
// canonicalize_*.kir show each rule family's output.
#include "passes/Canonicalize.h"

#include "RandomGraphs.h"
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Decompose.h"
#include "passes/TrainingStep.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::testing {
namespace {

using interp::TensorMap;

::testing::AssertionResult sameBits(const rt::HostTensor& a, const rt::HostTensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.typeStr() << " vs " << b.typeStr();
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.at(i), y = b.at(i);
    bool same = std::isnan(x) ? std::isnan(y) : x == y && std::signbit(x) == std::signbit(y);
    if (!same) return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}

void expectSame(const TensorMap& before, const TensorMap& after, const std::string& what) {
  ASSERT_EQ(before.size(), after.size()) << what;
  for (const auto& [name, t] : before) {
    auto it = after.find(name);
    ASSERT_NE(it, after.end()) << what << ": " << name << " is missing";
    EXPECT_TRUE(sameBits(t, it->second)) << what << ": " << name;
  }
}

void expectVerifies(const ir::Graph& g) {
  std::vector<std::string> errors = ir::verifyGraph(g);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n")) << "\n" << ir::printGraph(g);
}

/// Canonicalizes a copy of `g` and checks: it verifies, the interpreter gives the same outputs and
/// updates, a second run changes nothing, and it has no more nodes. Returns the copy.
ir::Graph checkPreserved(const ir::Graph& g, const TensorMap& inputs, const std::string& what) {
  ir::Graph after = g.clone();
  passes::canonicalize(after);
  expectVerifies(after);
  std::string text = ir::printGraph(after);
  ir::Graph again = after.clone();
  passes::canonicalize(again);
  EXPECT_EQ(ir::printGraph(again), text) << what << ": a second run changed the graph";
  EXPECT_LE(after.nodes().size(), g.nodes().size()) << what;

  TensorMap updatesBefore, updatesAfter;
  TensorMap outBefore = interp::run(g, inputs, {}, &updatesBefore);
  TensorMap outAfter = interp::run(after, inputs, {}, &updatesAfter);
  expectSame(outBefore, outAfter, what + " outputs");
  expectSame(updatesBefore, updatesAfter, what + " updates");
  return after;
}

// ---- zoo models -----------------------------------------------------------------------------------

/// The number of valid indices for integer value `v` (labels, tokens): the smallest dimension it
/// gathers from or one-hot class count it feeds, through any movement ops on the way; 0 if none.
int64_t indexRange(const ir::Graph& g, const ir::Value* v) {
  int64_t range = 0;
  auto consider = [&](int64_t r) {
    if (r > 0) range = range == 0 ? r : std::min(range, r);
  };
  for (const auto& n : g.nodes()) {
    if (n->operands.empty() || n->operands.back() != v) continue;
    if (n->op == ir::OpKind::Gather) {
      const ir::Value* data = n->operands[0];
      consider(data->type.shape[static_cast<size_t>(ir::normalizeAxis(n->attrInt("axis"), data->type.rank()))]);
    } else if (n->op == ir::OpKind::OneHot) {
      consider(n->attrInt("num_classes"));
    } else if (n->info().has(ir::kMovement)) {
      consider(indexRange(g, n->result));
    }
  }
  return range;
}

TensorMap zooBatch(const ir::Graph& g) {
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  TensorMap inputs;
  for (const ir::Value* in : g.inputs()) {
    rt::HostTensor t(in->type.dtype, in->type.shape);
    int64_t range = isFloat(in->type.dtype) ? 0 : indexRange(g, in);
    EXPECT_TRUE(isFloat(in->type.dtype) || range > 0) << "integer input " << in->name << " indexes nothing";
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, in->name == "lr" ? 0.01 : range > 0 ? std::floor(next() * static_cast<double>(range)) : 2 * next() - 1);
    inputs.emplace(in->name, std::move(t));
  }
  return inputs;
}

enum class Mode { Inference, Sgd, Adam };

struct ZooCase {
  std::string model;
  Mode mode;
};

std::string caseName(const ZooCase& c) {
  static const char* const modes[] = {"inference", "sgd", "adam"};
  return c.model + "_" + modes[static_cast<int>(c.mode)];
}

void PrintTo(const ZooCase& c, std::ostream* os) { *os << caseName(c); }

std::vector<ZooCase> zooCases() {
  std::vector<ZooCase> cases;
  for (const std::string& m : zooModelNames())
    for (Mode mode : {Mode::Inference, Mode::Sgd, Mode::Adam}) cases.push_back({m, mode});
  return cases;
}

class CanonicalizeZoo : public ::testing::TestWithParam<ZooCase> {};

TEST_P(CanonicalizeZoo, SameResultsWithFewerNodes) {
  const ZooCase& c = GetParam();
  ZooOptions zo;
  zo.batch = c.model == "cnn" ? 1 : 2;
  zo.withLoss = c.mode != Mode::Inference;
  ir::Graph g = buildZooModel(c.model, zo);
  if (c.mode != Mode::Inference) {
    passes::TrainingStepOptions options;
    options.optimizer.kind = c.mode == Mode::Adam ? passes::OptimizerConfig::Kind::Adam
                                                  : passes::OptimizerConfig::Kind::Sgd;
    passes::buildTrainingStep(g, options);
  }
  passes::decompose(g);
  ir::Graph after = checkPreserved(g, zooBatch(g), caseName(c));
  EXPECT_LT(after.nodes().size(), g.nodes().size()) << caseName(c);
  fmt::print("{}: {} -> {} nodes\n", caseName(c), g.nodes().size(), after.nodes().size());
}

INSTANTIATE_TEST_SUITE_P(Zoo, CanonicalizeZoo, ::testing::ValuesIn(zooCases()),
                         [](const auto& info) { return caseName(info.param); });

TEST(Canonicalize, GradientNamesSurviveOnTheirReplacements) {
  ZooOptions zo;
  zo.batch = 2;
  ir::Graph g = buildZooModel("mnist_mlp", zo);
  passes::autodiff(g);
  std::vector<std::string> named;
  for (const ir::Output& o : g.outputs())
    if (o.name.starts_with("grad.")) {
      ASSERT_EQ(o.value->name, o.name);  // autodiff names each gradient after its output
      named.push_back(o.name);
    }
  ASSERT_EQ(named.size(), 4u);
  passes::canonicalize(g);
  for (const std::string& name : named) {
    const ir::Output* o = g.findOutput(name);
    ASSERT_NE(o, nullptr) << name;
    EXPECT_EQ(o->value->name, name) << ir::printGraph(g);
  }
}

// ---- random graphs ----------------------------------------------------------------------------------

TEST(Canonicalize, PreservesRandomGraphs) {
  size_t before = 0, after = 0;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    ir::Graph g = randomGraph(seed);
    ASSERT_TRUE(ir::verifyGraph(g).empty()) << "generator bug, seed " << seed << "\n" << ir::printGraph(g);
    std::string what = fmt::format("random graph {}", seed);
    ir::Graph canonical = checkPreserved(g, randomInputs(g, seed), what);
    before += g.nodes().size();
    after += canonical.nodes().size();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << what << " before:\n" << ir::printGraph(g) << "after:\n" << ir::printGraph(canonical);
      return;
    }
  }
  fmt::print("500 random graphs: {} -> {} nodes\n", before, after);
}

// ---- ReLU masks through max pooling ------------------------------------------------------------------

// The mask moved before max_pool2d_grad keeps every bit where the values that decide it meet:
// ties (the first maximum wins), zeros of both signs, NaN (the maximum, never > 0), infinities,
// all-negative windows, overlapping padded windows. Inputs drawn from those values, 200 seeds.
TEST(Canonicalize, ReluMaskThroughMaxPoolKeepsEveryBit) {
  const ir::Graph g = ir::parseGraph(R"(graph @relu_pool {
  input %h : f32[2,3,5,5]
  input %dy : f32[2,3,2,2]
  input %dy3 : f32[2,3,5,5]
  %zero = constant() {shape=[], dtype=f32, value=[0]} : f32[]
  %negzero = constant() {shape=[], dtype=f32, value=[-0]} : f32[]
  %r = relu(%h) : f32[2,3,5,5]
  %p = max_pool2d(%r) {kernel=[2,2], stride=[2,2]} : f32[2,3,2,2]
  output %p = %p
  %g = max_pool2d_grad(%r, %dy) {kernel=[2,2], stride=[2,2]} : f32[2,3,5,5]
  %m = gt(%h, %zero) : bool[2,3,5,5]
  %dh = select(%m, %g, %zero) : f32[2,3,5,5]
  output %dh = %dh
  %g3 = max_pool2d_grad(%r, %dy3) {kernel=[3,3], stride=[1,1], padding=[1,1]} : f32[2,3,5,5]
  %m3 = gt(%h, %negzero) : bool[2,3,5,5]
  %dh3 = select(%m3, %g3, %zero) : f32[2,3,5,5]
  output %dh3 = %dh3
})",
                                     "relu_pool.kir");
  const double values[] = {-1.0, -0.0, 0.0, 0.5, 0.5, 2.0, NAN, INFINITY, -INFINITY, 1e-30};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    auto pick = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return values[(state >> 33) % std::size(values)];
    };
    TensorMap inputs;
    for (const ir::Value* in : g.inputs()) {
      rt::HostTensor t(in->type.dtype, in->type.shape);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, pick());
      inputs.emplace(in->name, std::move(t));
    }
    const ir::Graph after = checkPreserved(g, inputs, fmt::format("seed {}", seed));
    int masksOfH = 0;  // both masks now test the pooled values
    for (const auto& n : after.nodes()) masksOfH += n->op == ir::OpKind::Gt && n->operands[0] == after.findValue("h");
    EXPECT_EQ(masksOfH, 0) << ir::printGraph(after);
    if (::testing::Test::HasFailure()) return;
  }
}

// ---- edge cases -----------------------------------------------------------------------------------

TEST(Canonicalize, GraphWithoutNodes) {
  ir::Graph g("empty");
  passes::canonicalize(g);
  EXPECT_TRUE(g.nodes().empty());
  EXPECT_EQ(ir::printGraph(g), "graph @empty {\n}\n");
}

TEST(Canonicalize, OutputsThatAreInputs) {
  ir::Graph g("passthrough");
  ir::Value* x = g.addInput("x", {DType::f32, {2}});
  ir::Value* y = g.addInput("y", {DType::i32, {}});
  g.addNode(ir::OpKind::Exp, {x}, {});  // read by nothing
  g.addOutput("a", x);
  g.addOutput("b", x);
  g.addOutput("c", y);
  passes::canonicalize(g);
  EXPECT_TRUE(g.nodes().empty());
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.outputs()[0].value, g.findValue("x"));
  EXPECT_EQ(g.outputs()[1].value, g.findValue("x"));
  EXPECT_EQ(g.outputs()[2].value, g.findValue("y"));
  expectVerifies(g);
}

TEST(Canonicalize, LongChainsCollapseInOneSweep) {
  // neg(neg(v)) is v: every other value of the chain maps onto x, the rest onto one neg of it. The
  // sweep counts the remaining uses of such a value instead of searching its preimages (a chain of
  // 40000 took 20 s that way).
  for (int length : {20000, 20001}) {
    ir::Graph g("chain");
    ir::Value* v = g.addInput("x", {DType::f32, {4}});
    for (int i = 0; i < length; ++i) v = g.addNode(ir::OpKind::Neg, {v}, {});
    g.addOutput("y", v);
    passes::canonicalize(g);
    expectVerifies(g);
    ASSERT_EQ(g.nodes().size(), static_cast<size_t>(length % 2)) << length;
    if (length % 2) {
      EXPECT_EQ(g.nodes()[0]->op, ir::OpKind::Neg);
      EXPECT_EQ(g.nodes()[0]->operands[0], g.findValue("x"));
    } else {
      EXPECT_EQ(g.outputs()[0].value, g.findValue("x"));
    }
  }
}

TEST(Canonicalize, LeavesStopGradientAndCompositesAlone) {
  // Run before autodiff, stop_gradient still matters, and composites are decompose's business.
  ir::Graph g("t");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  ir::Value* w = g.addInput("w", {DType::f32, {4, 3}});
  ir::Value* s = g.addNode(ir::OpKind::StopGradient, {x}, {});
  g.addOutput("y", g.addNode(ir::OpKind::Linear, {s, w}, {}));
  std::string before = ir::printGraph(g);
  passes::canonicalize(g);
  EXPECT_EQ(ir::printGraph(g), before);
}

TEST(Canonicalize, IsRegisteredAndRunsInAPipeline) {
  ASSERT_NE(passes::findPass("canonicalize"), nullptr);
  ZooOptions zo;
  zo.batch = 2;
  ir::Graph g = buildZooModel("tiny_mlp", zo);
  passes::runPipeline(g, {"decompose", "canonicalize"});
  for (const auto& n : g.nodes()) EXPECT_NE(n->op, ir::OpKind::Permute) << ir::printGraph(g);
}

}  // namespace
}  // namespace kiln::testing
