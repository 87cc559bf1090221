// `kiln explain`: a model's kernels with their predicted CPU and GPU times and bounds, the totals
// and a verdict; with `measure`, the CPU program is also run and every kernel's measured time is
// set beside its prediction. The command (tools/kiln/ExplainCommand.cpp) is a thin shell around
// these functions, which tests call directly.
#pragma once

#include "cost/CostModel.h"
#include "cost/MachineProfile.h"
#include "ir/Graph.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cost {

struct ExplainOptions {
  std::string model;          // a zoo model name or a .kir file
  int64_t batch = 32;         // zoo models
  uint64_t seed = 0;          // zoo models
  bool train = false;         // the whole training step (zoo models)
  std::string optimizer = "sgd";
  std::string precision = "f32";  // f32, bf16, f16
  bool measure = false;       // run the CPU program and time its kernels
  double measureSeconds = 0.5;
  CostOptions cost;
};

/// The graph `options` describe, compiled (passes::compileGraph), and a title for it
/// ("mnist_mlp, inference, batch 32, f32").
struct ExplainGraph {
  ir::Graph graph;
  std::string title;
  std::vector<std::string> warnings;
};
ExplainGraph explainGraph(const ExplainOptions& options);

struct Measurement {
  std::vector<double> kernelMicros;  // per kernel, its fastest run
  double stepMicros = 0;             // Program::run, the fastest
  int64_t runs = 0;
  double compileMs = 0;
};

/// Runs `compiled` on the CPU (random inputs; scalar float inputs such as the learning rate 1e-3)
/// with per-kernel profiling for `seconds` (at least ten runs) after a warm-up: each kernel's and
/// the step's fastest run.
Measurement measureOnCpu(const ir::Graph& compiled, double seconds);

struct ExplainReport {
  std::string title;
  std::string cpuLabel;            // "AMD EPYC, 2 threads, avx2"
  std::string gpuLabel;            // the GPU profile's name and source, or why there is none
  ProgramCost cost;
  Verdict verdict;
  std::optional<Measurement> measured;
  /// With a measurement: (Σ predicted − Σ measured) / Σ measured over the kernels, and the same
  /// for the whole step (Program::run).
  double kernelError = 0, stepError = 0;
};

/// Builds, compiles and predicts (and measures, when asked) the graph of `options`. `gpu` may be
/// null: the report then says `noGpuReason`.
ExplainReport explain(const ExplainOptions& options, const CpuProfile& cpu, const GpuProfile* gpu,
                      const std::string& noGpuReason = "no GPU profile");

/// The report as `kiln explain` prints it: the per-kernel table, the totals and the verdict.
std::string explainText(const ExplainReport& r);
/// The report as JSON (`kiln explain --json`): the totals, the verdict and per kernel its figures,
/// predictions and, when measured, its measured time.
std::string explainJson(const ExplainReport& r);

}  // namespace kiln::cost
