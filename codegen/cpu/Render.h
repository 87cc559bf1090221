// The renderer of the LLVM CPU backend: turns one backend-neutral kernel description
// (kernels/Kernel.h) into an LLVM function with the calling convention of KernelAbi.h.
//
// Loop and reduction nests are vectorized explicitly: the innermost domain dimension (after
// dimensions of size 1 are dropped and contiguous ones merged) is the lane dimension, evaluated
// VectorIsa::f32Lanes points at a time with a scalar tail. Loads whose index advances by one
// element per lane are vector loads, broadcasts are scalar loads, anything else (strides,
// padding bounds) gathers under a mask. Reductions keep one accumulator per lane. The outer
// points are split across the thread pool when the nest is big enough to pay for it.
//
// Semantics are the interpreter's (ir/ScalarOps.h, docs/IR.md): f16 and bf16 values are computed
// in f32 and rounded to their type after every op, integers in wrapping i64 (i32 re-wrapped after
// every op), integer division by zero is 0, max/min propagate NaN, float→integer casts truncate
// and saturate with NaN → 0. Results differ from the interpreter's only by f32 rounding (the
// interpreter computes in f64), the order of sums, and VecMath's documented error.
#pragma once

#include "codegen/cpu/KernelAbi.h"

#include <cstdint>

namespace kiln::cpu {

/// Emits the function named k.name into `m`. Throws kiln::Error naming the kernel and the
/// construct when the kernel holds something the renderer does not support.
llvm::Function* renderKernel(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa);

/// Bytes of scratch the kernel needs after its buffers (bufs[k.buffers.size()]) when it runs on a
/// pool of `threads`; 0 for kernels without scratch.
int64_t kernelScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads);

}  // namespace kiln::cpu
