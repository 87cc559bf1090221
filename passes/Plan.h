// plan: memory planning. Places every arena buffer of a graph at a byte offset in one arena
// (ir::MemoryPlan, printed as the `plan arena=N align=A { %v at OFFSET … }` section) so that
// buffers whose lifetimes do not overlap share bytes.
//
//   Arena buffers  the materialized node results (ir::materializedResults: results that cross a
//                  kernel boundary) that are neither graph outputs nor update values. Outputs
//                  belong to the caller, update values to the parameter storage; results used
//                  inside one kernel only stay in registers.
//   Liveness       counted in kernel steps (ir::kernelSteps: each fusion group, and each
//                  ungrouped node on its own; before fusion every node is a step). A buffer is
//                  live from the step that writes it to the last step that reads it, both
//                  included. Two buffers live at the same step never share bytes, except in place.
//   In place       a buffer written by one elementwise node, or by a `loop` kernel, may take the
//                  slot of a buffer the same step reads for the last time, when both have the
//                  same byte size and every node of the step that depends on the operand is
//                  elementwise with the operand's shape (no broadcast, permute or other view in
//                  between): each output element is then computed from the same element of the
//                  operand, which is read before it is overwritten. Chains (a → b → c) share one
//                  slot.
//   Offsets        best fit, as in TFLite's and XLA's heap simulators: slots (an in-place chain
//                  is one slot, live over the union of its buffers) are placed one at a time, each
//                  in the smallest gap left between the placed slots whose lifetimes overlap its
//                  own, else above them. Two orders are tried — largest first (greedy by size)
//                  and by first step (greedy by breadth) — and the smaller arena is kept. Offsets
//                  and slot sizes are multiples of the 64-byte alignment; the arena is the highest
//                  slot end.
//
// Running plan again replaces the plan. A pass that changes nodes after plan makes the plan stale
// and must drop it with ir::Graph::clearSchedule() (which drops the fusion groups too).
#pragma once

#include "passes/Pass.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::passes {

/// Registered as "plan". Sets g's memory plan as described above, replacing any previous one;
/// debug builds check it with validatePlan. Works on unfused and fused graphs.
void plan(ir::Graph& g, const PassContext& ctx = {});

/// The figures of a graph's memory plan.
struct PlanStats {
  int64_t arenaBytes = 0;     // the plan's arena (0 without a plan)
  int64_t sumOfBuffers = 0;   // bytes of all arena buffers, as if none shared memory
  int64_t peakLiveBytes = 0;  // most bytes live at one step (an in-place pair counted once): a
                              // lower bound on the arena of any plan with the same in-place pairs
  int64_t buffers = 0;        // arena buffers
  int64_t inPlace = 0;        // buffers that took their operand's slot (0 without a plan)
};

/// The figures of g's current plan (liveness recomputed from the graph).
PlanStats planStats(const ir::Graph& g);

/// Checks g's plan against the liveness recomputed from the graph: every arena buffer has exactly
/// one slot inside the arena at an aligned offset, no slot names another value, and no two buffers
/// live at the same step share bytes — except an in-place pair at its handover step (the same
/// slot), which must satisfy the in-place rule above. Returns the problems as readable lines
/// (empty when the plan is valid, or one line when g has no plan).
std::vector<std::string> validatePlan(const ir::Graph& g);

}  // namespace kiln::passes
