// The front half of compile time, per zoo model: trace the DSL to a graph, print it as .kir, parse
// it back (with verification), decompose composites; and the reference interpreter's forward
// pass, the oracle's cost. See docs/PERFORMANCE.md for the table and how to run it.
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Decompose.h"

#include <benchmark/benchmark.h>

namespace {

const char* kModels[] = {"tiny_mlp", "mnist_mlp", "simplenet", "cnn", "lstm", "transformer"};

void BM_Trace(benchmark::State& state) {
  std::string model = kModels[state.range(0)];
  state.SetLabel(model);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::buildZooModel(model, {}));
}

void BM_Print(benchmark::State& state) {
  std::string model = kModels[state.range(0)];
  auto g = kiln::buildZooModel(model, {});
  state.SetLabel(model);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::ir::printGraph(g));
}

void BM_ParseAndVerify(benchmark::State& state) {
  std::string model = kModels[state.range(0)];
  std::string text = kiln::ir::printGraph(kiln::buildZooModel(model, {}));
  state.SetLabel(model);
  state.SetBytesProcessed(0);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::ir::parseGraph(text, model));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_Decompose(benchmark::State& state) {
  std::string model = kModels[state.range(0)];
  auto g = kiln::buildZooModel(model, {});
  state.SetLabel(model);
  for (auto _ : state) {
    auto c = g.clone();
    kiln::passes::decompose(c);
    benchmark::DoNotOptimize(c);
  }
}

void BM_InterpretMnistMlp(benchmark::State& state) {
  kiln::ZooOptions o;
  o.batch = state.range(0);
  auto g = kiln::buildZooModel("mnist_mlp", o);
  kiln::interp::TensorMap inputs;
  for (const auto* in : g.inputs()) {
    kiln::rt::HostTensor t(in->type.dtype, in->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, in->type.dtype == kiln::DType::i64 ? i % 10 : (i % 97) / 97.0);
    inputs.emplace(in->name, std::move(t));
  }
  auto params = kiln::interp::initializeParams(g);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::interp::run(g, inputs, params));
  // Forward FLOPs of the two matmuls.
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * o.batch * (784 * 128 + 128 * 10) * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_Trace)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Print)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ParseAndVerify)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decompose)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InterpretMnistMlp)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
