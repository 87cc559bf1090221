// fuse: partitions a graph of primitives into kernels (ir::KernelGroup, printed as `kernel`
// blocks): (a) a contraction (matmul/conv) with its elementwise epilogue (bias, activation, cast,
// residual add, the backward's masks), (b) elementwise chains with the broadcasts, permutes,
// slices, pads and reshapes that feed them folded into index maps, (c) reductions with their
// elementwise prologue and epilogue (softmax, log_softmax, layer norm, mean/variance), (d) the
// optimizer's update of every parameter as one multi-tensor kernel.
//
// Legality is decided by the kernel description itself (kernels::tryLower): two groups merge when
// the merged group is one expressible kernel and no path leaves and re-enters it. Cheap nodes
// (views, splat constants, iota, random) are cloned for each consumer that can absorb them, so
// they never force a value into memory. Each kernel's notes say why its inputs were not fused.
#pragma once

#include "passes/Pass.h"

namespace kiln::passes {

/// Registered as "fuse". Requires primitives only (run decompose first); replaces any earlier
/// grouping and drops a memory plan.
void fuse(ir::Graph& g, const PassContext& ctx = {});

}  // namespace kiln::passes
