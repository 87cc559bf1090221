// What the CPU backend's tests (BackendTest.cpp: ops, graphs, programs; BackendTrainingTest.cpp:
// training steps and their updates) share: tolerances against the interpreter, the pools, and
// compiling a graph or a zoo model's step.
#pragma once

#include "RandomGraphs.h"
#include "tests/codegen/TensorClose.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/Program.h"
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace kiln::cputest {

using test::expectClose;
using test::tolerance;

inline rt::ThreadPool& pool(int threads) {
  static rt::ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

/// Compiles `g` with the default pipeline and runs it on the backend with `threads`.
inline std::unique_ptr<cpu::Program> compileFor(const ir::Graph& g, int threads) {
  ir::Graph compiled = g.clone();
  passes::compileGraph(compiled);
  cpu::ProgramOptions o;
  o.pool = &pool(threads);
  return cpu::Program::compile(compiled, o);
}

/// Inputs for a graph: random, with labels and token ids valid class indices and lr = 0.01.
inline interp::TensorMap modelInputs(const ir::Graph& g) {
  interp::TensorMap in = kiln::testing::randomInputs(g, 7);
  if (auto it = in.find("lr"); it != in.end()) it->second.set(0, 0.01);
  return in;
}

/// Zoo model `name`'s Adam training step at `batch`, compiled by the default pipeline.
inline ir::Graph adamStep(const std::string& name, int64_t batch) {
  ZooOptions o;
  o.batch = batch;
  ir::Graph g = buildZooModel(name, o);
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
  passes::buildTrainingStep(g, to);
  passes::compileGraph(g);
  return g;
}

/// `g` (compiled already) as a program of `jit` on a pool of 2 threads.
inline std::unique_ptr<cpu::Program> compileWith(const ir::Graph& g, cpu::Jit& jit) {
  cpu::ProgramOptions po;
  po.pool = &pool(2);
  po.jit = &jit;
  return cpu::Program::compile(g, po);
}

/// Checks max |want - got| <= rel * max(floor, max |want|): a bound on the whole tensor, for
/// results whose every element may move by a rounding of the tensor's scale (low-precision steps).
inline void expectWithinScale(const rt::HostTensor& want, const rt::HostTensor& got, double rel, double floor,
                              const std::string& what) {
  ASSERT_EQ(want.numel(), got.numel()) << what;
  double scale = floor, worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.at(i)));
  for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(want.at(i) - got.at(i)));
  EXPECT_LE(worst, rel * scale) << what;
}

/// `outputs` with `params` added as "param NAME": a step's results in one map.
inline interp::TensorMap withParams(interp::TensorMap outputs, const interp::TensorMap& params) {
  for (const auto& [key, t] : params) outputs.insert_or_assign("param " + key, t);
  return outputs;
}

}  // namespace kiln::cputest
