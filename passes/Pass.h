// Passes: graph → graph transformations, registered by name so any pipeline can run from the
// command line (`kiln opt --passes=decompose,verify model.kir`). A pass is one header with a
// documented factory and one source file; it receives options through PassContext, never through
// globals or the environment.
#pragma once

#include "ir/Graph.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::passes {

/// Mixed-precision policy of the `amp` pass: f32 leaves the graph alone; bf16 and f16 run
/// contractions on low-precision operands with f32 accumulation (see passes/Amp.h).
enum class Precision { F32, BF16, F16 };
/// "f32", "bf16", "f16" → Precision (kiln::Error listing the names otherwise).
Precision precisionFromName(std::string_view name);
std::string_view precisionName(Precision p);

/// Options and sinks shared by every pass of one pipeline run.
struct PassContext {
  /// When non-empty, the pipeline writes the IR after every pass into this directory as
  /// NN-<pass>.kir.
  std::string dumpDir;
  /// The amp pass's policy.
  Precision precision = Precision::F32;
  /// Receives each warning a pass reports (a parameter the loss does not depend on, a fusion that
  /// was refused for a reason the user can fix, …). When unset, warnings go to stderr.
  std::function<void(const std::string&)> warn;

  /// Reports a warning through `warn` (or to stderr).
  void warning(const std::string& message) const;
};

struct Pass {
  std::string name;
  std::string description;
  /// Transforms `g` in place. Must leave a graph that verifies.
  std::function<void(ir::Graph& g, const PassContext& ctx)> run;
};

/// All registered passes, in registration order.
const std::vector<Pass>& registeredPasses();
/// The pass called `name`, or nullptr.
const Pass* findPass(std::string_view name);

/// Runs `names` in order, verifying the graph after each pass and dumping when ctx.dumpDir is set.
/// An unknown name is a kiln::Error listing the known passes.
void runPipeline(ir::Graph& g, const std::vector<std::string>& names, const PassContext& ctx = {});

}  // namespace kiln::passes
