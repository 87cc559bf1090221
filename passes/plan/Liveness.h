// Buffer liveness over a graph's kernel steps and the in-place rule: what the plan pass
// (passes/Plan.cpp) places, and what its validator and statistics recompute, so the three agree.
#pragma once

#include "ir/Graph.h"
#include "ir/Lexer.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::passes::planning {

/// The arena buffers of a graph (materialized node results that are neither graph outputs nor
/// update values) and, per buffer, the kernel steps (ir::kernelSteps) it is live over: from the
/// step that writes it to the last step that reads it, both included.
struct Liveness {
  std::vector<std::vector<const ir::Node*>> steps;
  std::vector<const ir::Value*> buffers;  // node order
  std::vector<int> def;                   // per buffer: the step that writes it
  std::vector<int> last;                  // per buffer: the last step that reads it
  std::unordered_map<const ir::Value*, int> index;  // buffer → position in `buffers`

  /// Whether buffers i and j are both live at some step.
  bool overlap(int i, int j) const { return def[i] <= last[j] && def[j] <= last[i]; }
  int64_t bytes(int i) const { return buffers[i]->type.bytes(); }
};

Liveness computeLiveness(const ir::Graph& g);

/// Why buffer `result` may not take the slot of buffer `operand` ("" when it may). It may when
/// the step writing `result` is the last to read `operand`, both have the same byte size, the
/// step is one elementwise node or a `loop` kernel, and every node of the step that depends on
/// `operand` — `result`'s producer among them — is elementwise with `operand`'s shape: then each
/// element of every such node is computed from the same element of `operand` (no broadcast,
/// permute or other view in between), so element i is read before element i is overwritten.
std::string inPlaceProblem(const ir::Graph& g, const Liveness& live, int operand, int result,
                           const ir::text::ValueNames& names);

}  // namespace kiln::passes::planning
