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

/// Options and sinks shared by every pass of one pipeline run.
struct PassContext {
  /// When non-empty, the pipeline writes the IR after every pass into this directory as
  /// NN-<pass>.kir.
  std::string dumpDir;
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
