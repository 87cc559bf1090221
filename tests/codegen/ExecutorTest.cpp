// engine::Executor's kept inputs (Executor::keepInputs) on the reference interpreter and the LLVM CPU
// backend: runs that leave kept inputs out compute what runs given them compute, a run that gives
// a kept input replaces it for the runs after, and an input neither given nor kept is an error
// naming it. (The CUDA backend's: tests/aot/AotCudaEmulatedTest.cpp on the stand-in driver and
// tests/codegen/CudaModelTest.cpp on a device, with CUDA-graph replay.)
#include "RandomGraphs.h"

#include "engine/Executor.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/TrainingStep.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

using namespace kiln;

namespace {

/// mnist_mlp's Adam step at batch 3 (eps 1e-3 as the other zoo training tests).
ir::Graph adamStep() {
  ZooOptions o;
  o.batch = 3;
  ir::Graph g = buildZooModel("mnist_mlp", o);
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
  to.optimizer.eps = 1e-3;
  passes::buildTrainingStep(g, to);
  return g;
}

interp::TensorMap inputsOf(const ir::Graph& g, uint64_t seed) {
  interp::TensorMap in = kiln::testing::randomInputs(g, seed);
  in.at("lr").set(0, 0.01);
  return in;
}

void expectSame(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": no " << name;
    EXPECT_TRUE(t.identical(got.at(name))) << what << ": " << name << " differs";
  }
}

class ExecutorKeptInputs : public ::testing::TestWithParam<engine::Target> {};

TEST_P(ExecutorKeptInputs, RunAsGivenOnes) {
  const ir::Graph g = adamStep();
  engine::ExecutorOptions eo;
  eo.target = GetParam();
  std::unique_ptr<engine::Executor> given = engine::Executor::create(g, eo);
  std::unique_ptr<engine::Executor> kept = engine::Executor::create(g, eo);
  const interp::TensorMap a = inputsOf(g, 7), b = inputsOf(g, 8);

  // Everything kept: runs of nothing.
  kept->keepInputs(a);
  for (int step = 0; step < 2; ++step)
    expectSame(given->run(a), kept->run({}), fmt::format("all kept, step {}", step));
  // A run that gives a kept input uses it, and it stays kept.
  expectSame(given->run(b), kept->run(b), "given over kept");
  expectSame(given->run(b), kept->run({}), "the given value kept");
  // Only the data kept, the learning rate and labels given each run (what is kept is the batch).
  interp::TensorMap x;
  x.emplace("x", a.at("x"));
  kept->keepInputs(x);
  interp::TensorMap rest = a;
  rest.erase("x");
  expectSame(given->run(a), kept->run(rest), "x kept, the rest given");
  expectSame(given->params(), kept->params(), "parameters after 5 steps");

  // Neither given nor kept: an error naming the input; nothing ran.
  std::unique_ptr<engine::Executor> fresh = engine::Executor::create(g, eo);
  try {
    fresh->run(rest);
    ADD_FAILURE() << "a run without x did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing input 'x'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("neither given nor kept"), std::string::npos) << e.what();
  }
  // A kept tensor of the wrong shape: an error naming it.
  interp::TensorMap wrong;
  wrong.emplace("x", rt::HostTensor(DType::f32, {2, 2}));
  EXPECT_THROW(fresh->keepInputs(wrong), Error);
}

// Token ids and scatter indices out of range: an error naming the op, the input, the element and
// the range on every target, as the interpreter gives (the compiled kernels would read zeros).
TEST_P(ExecutorKeptInputs, IndicesOutOfRangeAreErrors) {
  ir::Graph g = ir::parseGraph(R"(graph @idx {
  input %table : f32[4,3]
  input %tokens : i64[2,2]
  input %rows : i32[2]
  input %u : f32[2,3]
  %flat = reshape(%tokens) {shape=[4]} : i64[4]
  %e = gather(%table, %flat) {axis=0} : f32[4,3]
  %s = scatter_add(%rows, %u) {axis=0, dim_size=5} : f32[5,3]
  output %e = %e
  output %s = %s
}
)",
                               "idx.kir");
  engine::ExecutorOptions eo;
  eo.target = GetParam();
  std::unique_ptr<engine::Executor> exec = engine::Executor::create(g, eo);
  interp::TensorMap in = kiln::testing::randomInputs(g, 3);
  for (int i = 0; i < 4; ++i) in.at("tokens").set(i, i);
  in.at("rows").set(0, 4), in.at("rows").set(1, 0);
  const interp::TensorMap good = exec->run(in);
  EXPECT_EQ(good.at("e").at(11), in.at("table").at(11));
  auto errorOf = [&](const interp::TensorMap& bad) -> std::string {
    try {
      exec->run(bad);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  interp::TensorMap bad = in;
  bad.at("tokens").set(3, 4);
  EXPECT_NE(errorOf(bad).find("index 4 (element 3"), std::string::npos) << errorOf(bad);
  EXPECT_NE(errorOf(bad).find("out of range [0, 4)"), std::string::npos) << errorOf(bad);
  bad = in;
  bad.at("rows").set(1, -1);
  EXPECT_NE(errorOf(bad).find("index -1 (element 1"), std::string::npos) << errorOf(bad);
  EXPECT_NE(errorOf(bad).find("out of range [0, 5)"), std::string::npos) << errorOf(bad);
  // Kept inputs are checked too (the compiled targets when they are kept, the interpreter as it runs).
  EXPECT_THROW(
      {
        exec->keepInputs(bad);
        exec->run({});
      },
      Error);
}

INSTANTIATE_TEST_SUITE_P(Targets, ExecutorKeptInputs, ::testing::Values(engine::Target::Interp, engine::Target::Cpu),
                         [](const auto& info) { return std::string(engine::targetName(info.param)); });

}  // namespace
