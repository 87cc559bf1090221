// Queries over a graph's schedule (its fusion groups, ir::KernelGroup): which node results live in
// memory and the order kernels run in. Shared by the plan pass, the kernel lowering and the
// backends, so they agree on what is a buffer.
#pragma once

#include "ir/Graph.h"

#include <unordered_set>
#include <vector>

namespace kiln::ir {

/// Node results that must exist in memory: graph outputs, update values, and every result used by
/// a node of another kernel. Before fusion (no groups) every node is its own kernel, so every used
/// result is materialized. Values computed and consumed inside one kernel stay in registers.
std::unordered_set<const Value*> materializedResults(const Graph& g);

/// The graph's kernels in execution order: each fusion group, and each ungrouped node on its own.
/// Element i lists the nodes of step i in node order.
std::vector<std::vector<const Node*>> kernelSteps(const Graph& g);

}  // namespace kiln::ir
