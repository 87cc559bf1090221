// The fuse pass and the kernel descriptions it implies: every zoo model's inference graph and
// training step, and a few hundred random graphs, compute the same values through their kernel
// descriptions (interp::runKernels) as the reference interpreter computes from the unfused graph,
// bit for bit (the descriptions evaluate each op with the interpreter's own evaluators).
#include "RandomGraphs.h"

#include "frontend/Zoo.h"
#include "interp/KernelExec.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Schedule.h"
#include "ir/Verifier.h"
#include "kernels/Kernel.h"
#include "passes/Decompose.h"
#include "passes/Fuse.h"
#include "passes/Pipeline.h"
#include "passes/Plan.h"
#include "passes/TrainingStep.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace kiln;

namespace {

std::string describe(const rt::HostTensor& t) {
  std::string s = t.typeStr() + " [";
  for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 8); ++i) s += std::to_string(t.at(i)) + " ";
  return s + "...]";
}

void expectSame(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": missing " << name;
    EXPECT_TRUE(t.identical(it->second)) << what << ": " << name << " differs: " << describe(t) << " vs "
                                         << describe(it->second);
  }
}

/// Labels and token ids must be valid class indices; everything else random.
interp::TensorMap modelInputs(const ir::Graph& g) {
  interp::TensorMap in = kiln::testing::randomInputs(g, 7);
  if (auto it = in.find("lr"); it != in.end()) it->second.set(0, 0.01);
  return in;
}

size_t kernelCount(const ir::Graph& g) { return kernels::lowerGraph(g).size(); }

/// Decomposes, fuses, checks the result verifies, round-trips as text and computes what the
/// unfused graph computes (outputs and parameter updates).
void checkFused(ir::Graph g, const std::string& what) {
  passes::decompose(g);
  interp::TensorMap in = modelInputs(g);
  interp::TensorMap params = interp::initializeParams(g);
  interp::TensorMap wantUpdates, gotUpdates, unfusedUpdates;
  interp::TensorMap want = interp::runPrimitives(g, in, params, &wantUpdates);
  // Unfused: every node its own kernel.
  expectSame(want, interp::runKernels(g, in, params, &unfusedUpdates), what + " (unfused kernels)");
  expectSame(wantUpdates, unfusedUpdates, what + " (unfused kernels, updates)");
  size_t before = kernelCount(g);
  ir::Graph fused = g.clone();
  passes::fuse(fused);
  ASSERT_TRUE(ir::verifyGraph(fused).empty()) << what << ":\n" << ir::verifyGraph(fused)[0];
  expectSame(want, interp::runKernels(fused, in, params, &gotUpdates), what + " (fused)");
  expectSame(wantUpdates, gotUpdates, what + " (fused, updates)");
  size_t after = kernelCount(fused);
  EXPECT_LT(after, before) << what;
  std::printf("%-28s %4zu nodes: %4zu kernels unfused, %4zu fused\n", what.c_str(), g.nodes().size(), before, after);
  // The text form keeps the grouping.
  std::string text = ir::printGraph(fused);
  ir::Graph reparsed = ir::parseGraph(text, what + ".kir");
  reparsed.mutableGroups() = fused.groups();  // notes are comments, not parsed
  EXPECT_EQ(ir::printGraph(reparsed), text) << what;
}

}  // namespace

TEST(Fuse, ZooModelsInference) {
  for (const std::string& name : zooModelNames()) {
    ZooOptions o;
    o.batch = 2;
    o.withLoss = false;
    checkFused(buildZooModel(name, o), name);
  }
}

// f16 Adam steps add dynamic loss scaling: one overflow check (a reduction over every gradient)
// that every update selects on, next to Adam's scalar bias corrections, which the gradient kernels
// read — once a cycle between kernels (see fuse_no_cycle.kir). SGD adds nothing new in f16.
TEST(Fuse, ZooModelsTrainingSteps) {
  struct Step {
    const char* optimizer;
    passes::Precision precision;
  };
  const Step steps[] = {
      {"sgd", passes::Precision::F32}, {"adam", passes::Precision::F32}, {"adam", passes::Precision::F16}};
  for (const std::string& name : zooModelNames())
    for (const Step& step : steps) {
      ZooOptions o;
      o.batch = 2;
      ir::Graph g = buildZooModel(name, o);
      passes::TrainingStepOptions to;
      to.optimizer.kind = passes::optimizerKindFromName(step.optimizer);
      to.optimizer.momentum = 0.9;
      to.precision = step.precision;
      passes::buildTrainingStep(g, to);
      std::string what = fmt::format("{} train {} {}", name, step.optimizer, passes::precisionName(step.precision));
      checkFused(std::move(g), what);
    }
}

// Walks of 48 steps build kernels with several unrelated members, where a merge can close a cycle
// through a third kernel (seeds 96 and 262 did, before the fuse pass searched paths by kernel).
TEST(Fuse, RandomGraphs) {
  for (int steps : {12, 48})
    for (uint64_t seed = 1; seed <= 300; ++seed) {
      kiln::testing::RandomGraphOptions options;
      options.steps = steps;
      ir::Graph g = kiln::testing::randomGraph(seed, options);
      std::string what = fmt::format("random graph {} ({} steps)", seed, steps);
      interp::TensorMap in = kiln::testing::randomInputs(g, seed);
      interp::TensorMap want = interp::runPrimitives(g, in, {});
      ir::Graph fused = g.clone();
      passes::fuse(fused);
      ASSERT_TRUE(ir::verifyGraph(fused).empty()) << what << ":\n" << ir::printGraph(fused);
      expectSame(want, interp::runKernels(fused, in, {}), what);
      if (HasFailure()) {
        ADD_FAILURE() << ir::printGraph(g) << "\nfused:\n" << ir::printGraph(fused);
        return;
      }
    }
}

TEST(Fuse, LongChainsSplitIntoBoundedKernels) {
  // A chain of 1000 elementwise ops: kernels of at most 256 nodes (each merge lowers the merged
  // group, so unbounded kernels made fusing a chain quadratic), computing what the unfused chain
  // computes.
  ir::Graph g("chain");
  ir::Value* v = g.addInput("x", {DType::f32, {3, 5}});
  for (int i = 0; i < 1000; ++i) v = g.addNode(i % 2 ? ir::OpKind::Sin : ir::OpKind::Tanh, {v}, {});
  g.addOutput("y", v);
  interp::TensorMap in = modelInputs(g), params;
  interp::TensorMap want = interp::runPrimitives(g, in, params);
  passes::fuse(g);
  ASSERT_TRUE(ir::verifyGraph(g).empty()) << ir::verifyGraph(g)[0];
  std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
  EXPECT_EQ(ks.size(), 4u);
  for (const std::vector<const ir::Node*>& step : ir::kernelSteps(g)) EXPECT_LE(step.size(), 256u);
  expectSame(want, interp::runKernels(g, in, params), "chain");
}

TEST(Fuse, SoftmaxIsOneReductionKernel) {
  ir::Graph g = ir::parseGraph(R"(graph @softmax {
  input %x : f32[4,10]
  %y = softmax(%x) : f32[4,10]
  output %y = %y
}
)",
                               "softmax.kir");
  passes::decompose(g);
  passes::fuse(g);
  std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
  ASSERT_EQ(ks.size(), 1u) << ir::printGraph(g);
  EXPECT_EQ(ks[0].kind, ir::KernelKind::Reduction);
  ASSERT_EQ(ks[0].nests.size(), 1u);
  EXPECT_EQ(ks[0].nests[0].reductions.size(), 2u);  // max, then the sum of exponentials
  EXPECT_EQ(ks[0].bytesRead, 4 * 10 * 4);
  EXPECT_EQ(ks[0].bytesWritten, 4 * 10 * 4);
}

// Products of depth 1 and 2 (every transpose, f32 and f64) become loops of outer products, bit
// for bit the interpreter's matmul, fused with their ReLU and the column sum after it; a -0
// product alone gives +0 as the interpreter's sum from 0 does. bf16 products and depth 3 stay
// contractions.
TEST(Fuse, ThinMatMulsAreOuterProducts) {
  auto graph = [](const char* dt, int64_t k, bool ta, bool tb) {
    std::string a = ta ? fmt::format("{}[{},7]", dt, k) : fmt::format("{}[7,{}]", dt, k);
    std::string b = tb ? fmt::format("{}[33,{}]", dt, k) : fmt::format("{}[{},33]", dt, k);
    return ir::parseGraph(fmt::format(R"(graph @thin {{
  input %a : {0}
  input %b : {1}
  %c = matmul(%a, %b) {{transpose_a={2}, transpose_b={3}}} : {4}[7,33]
  %r = relu(%c) : {4}[7,33]
  %s = reduce_sum(%r) {{axes=[0]}} : {4}[33]
  output %r = %r
  output %s = %s
}}
)",
                                      a, b, ta, tb, dt),
                          "thin.kir");
  };
  auto contractions = [](const ir::Graph& g) {
    std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
    return std::count_if(ks.begin(), ks.end(), [](const kernels::Kernel& k) { return k.kind == ir::KernelKind::Contraction; });
  };
  for (const char* dt : {"f32", "f64"})
    for (int64_t k : {1, 2})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          std::string what = fmt::format("{} depth {} ta {} tb {}", dt, k, ta, tb);
          checkFused(graph(dt, k, ta, tb), what);
          ir::Graph fused = graph(dt, k, ta, tb);
          passes::fuse(fused);
          EXPECT_EQ(contractions(fused), 0) << what << "\n" << ir::printGraph(fused);
          EXPECT_EQ(kernels::lowerGraph(fused).size(), 1u) << what << "\n" << ir::printGraph(fused);
        }
  // -0 · 1 alone: +0, as 0 + (-0) in the interpreter.
  ir::Graph g = graph("f32", 1, false, false);
  interp::TensorMap in = kiln::testing::randomInputs(g, 3);
  in.at("a").set(0, -0.0);
  in.at("b").set(0, 1.0);
  ir::Graph fused = g.clone();
  passes::fuse(fused);
  interp::TensorMap want = interp::runPrimitives(g, in, {}), got = interp::runKernels(fused, in, {});
  EXPECT_FALSE(std::signbit(want.at("r").at(0)));
  expectSame(want, got, "-0 product");
  for (auto [dt, k] : {std::pair{"bf16", int64_t{2}}, std::pair{"f32", int64_t{3}}}) {
    ir::Graph stays = graph(dt, k, false, false);
    passes::fuse(stays);
    EXPECT_EQ(contractions(stays), 1) << dt << " depth " << k;
  }
}

TEST(Fuse, CompositeOpsAreRefused) {
  ir::Graph g = ir::parseGraph(R"(graph @g {
  input %x : f32[4,10]
  %y = softmax(%x) : f32[4,10]
  output %y = %y
}
)",
                               "g.kir");
  try {
    passes::fuse(g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'softmax' is a composite op; run decompose first"), std::string::npos)
        << e.what();
  }
}

// The whole default pipeline (decompose, canonicalize, amp f32, fuse, plan) on every zoo model's
// training step: the kernels compute what the interpreter computes from the traced graph, within
// 1e-5 relative (canonicalize may reassociate constants), and the memory plan validates.
TEST(Fuse, DefaultPipelineOnTrainingSteps) {
  for (const std::string& name : zooModelNames()) {
    ZooOptions o;
    o.batch = 2;
    ir::Graph g = buildZooModel(name, o);
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
    passes::buildTrainingStep(g, to);
    interp::TensorMap in = modelInputs(g);
    interp::TensorMap params = interp::initializeParams(g);
    interp::TensorMap wantUpdates, gotUpdates;
    interp::TensorMap want = interp::run(g, in, params, &wantUpdates);
    ir::Graph compiled = g.clone();
    passes::compileGraph(compiled);
    EXPECT_TRUE(passes::validatePlan(compiled).empty()) << name;
    interp::TensorMap got = interp::runKernels(compiled, in, params, &gotUpdates);
    auto close = [&](const interp::TensorMap& a, const interp::TensorMap& b, const std::string& what) {
      for (const auto& [key, t] : a) {
        const rt::HostTensor& u = b.at(key);
        for (int64_t i = 0; i < t.numel(); ++i)
          ASSERT_NEAR(t.at(i), u.at(i), 1e-5 * std::max(1.0, std::abs(t.at(i)))) << what << " " << key << "[" << i << "]";
      }
    };
    close(want, got, name + " outputs");
    close(wantUpdates, gotUpdates, name + " updates");
    passes::GraphSummary s = passes::summarize(compiled);
    std::printf("%-12s %4lld kernels, %.3g flops, %lld bytes moved, arena %lld of %lld bytes\n", name.c_str(),
                static_cast<long long>(s.kernels), s.flops, static_cast<long long>(s.bytesMoved),
                static_cast<long long>(s.arenaBytes), static_cast<long long>(s.sumOfBuffers));
  }
}

// Regression figures: the kernels of every zoo model after the default pipeline at batch 32, as
// docs/KERNELS.md lists them (scripts/kernel_table.sh prints the table). A change in fusion shows
// up here first; update both together.
TEST(Fuse, KernelCountsOfTheZoo) {
  struct Expected {
    const char* model;
    int64_t inference, sgd, adam;
  };
  const Expected expected[] = {
      {"tiny_mlp", 2, 8, 9},     {"mnist_mlp", 2, 11, 12}, {"digits_mlp", 2, 11, 12}, {"simplenet", 3, 14, 15},
      {"cnn", 5, 20, 21},        {"lstm", 36, 96, 97},     {"transformer", 31, 102, 103},
  };
  ASSERT_EQ(std::size(expected), zooModelNames().size());
  for (const Expected& e : expected) {
    for (const char* graph : {"inference", "sgd", "adam"}) {
      ZooOptions o;
      o.withLoss = std::string(graph) != "inference";
      ir::Graph g = buildZooModel(e.model, o);
      if (o.withLoss) {
        passes::TrainingStepOptions to;
        to.optimizer.kind = passes::optimizerKindFromName(graph);
        passes::buildTrainingStep(g, to);
      }
      passes::compileGraph(g);
      int64_t want = std::string(graph) == "inference" ? e.inference : std::string(graph) == "sgd" ? e.sgd : e.adam;
      EXPECT_EQ(passes::summarize(g).kernels, want) << e.model << " " << graph;
    }
  }
}
