// The default compilation pipeline and the summary of a compiled graph: what every command that
// compiles runs, and what `--dump DIR` writes next to the per-pass IR.
#pragma once

#include "passes/Pass.h"

#include <string>
#include <vector>

namespace kiln::passes {

/// decompose → canonicalize → amp (ctx.precision) → fuse → plan: composites become primitives,
/// the graph is simplified, contractions take the precision policy's operands, nodes are
/// partitioned into kernels, and the kernels' buffers are placed in one arena.
std::vector<std::string> defaultPipeline();

/// Runs defaultPipeline() on `g` (dumping through ctx as runPipeline does).
void compileGraph(ir::Graph& g, const PassContext& ctx = {});
/// A compiled copy of `g`: the default pipeline under `precision`, dumped to `dumpDir` when set.
ir::Graph compiledCopy(const ir::Graph& g, Precision precision = Precision::F32, const std::string& dumpDir = {});

/// Figures of a graph as its kernels would run it (kernels::lowerGraph) and its memory plan.
struct GraphSummary {
  int64_t nodes = 0, kernels = 0;
  int64_t kernelsByKind[5] = {};  // indexed by ir::KernelKind
  double flops = 0;
  int64_t bytesMoved = 0;  // each kernel's compulsory reads and writes, summed
  int64_t paramBytes = 0, inputBytes = 0, outputBytes = 0;
  int64_t arenaBytes = 0, sumOfBuffers = 0;  // from the memory plan (0 without one)
  /// Parameters + inputs + outputs + the arena: the memory a run of the program needs.
  int64_t peakBytes() const { return paramBytes + inputBytes + outputBytes + arenaBytes; }
};
GraphSummary summarize(const ir::Graph& g);

/// The human-readable summary (dumps' summary.txt, `kiln opt --summary`).
std::string summaryText(const ir::Graph& g, const GraphSummary& s);

/// Every kernel description of `g`, printed (dumps' kernels.txt).
std::string kernelListing(const ir::Graph& g);

}  // namespace kiln::passes
