// `--profile` on train, run and bench: each kernel's measured time beside its work.
#pragma once

#include "engine/Executor.h"
#include "ir/Graph.h"
#include "passes/Pass.h"

#include <string>
#include <vector>

namespace kiln::cli {

/// The executor options of `kiln train` and `kiln run`: the target, the dump directory, per-kernel
/// profiling, and target auto's report lines on stderr.
engine::ExecutorOptions executorOptions(engine::Target target, const std::string& dumpDir, bool profile);

/// The table `--profile` prints: per kernel (slowest first) its time per run, share of the step,
/// achieved GFLOP/s and GB/s, and the model source lines of its ops. `graph` is the graph the
/// executor compiled (before the pipeline), `precision` the pipeline's.
std::string profileTable(const ir::Graph& graph, passes::Precision precision,
                         const std::vector<engine::KernelTime>& times);

}  // namespace kiln::cli
