// The op kernels of the LLVM CPU backend: kernels::Kernel of kind `op`, one node with a dedicated
// implementation (gather, scatter_add, one_hot, concat, argmax/argmin, max/avg pooling and their
// gradients, slice_grad, random with a step counter), emitted with the calling convention of
// KernelAbi.h. Operand i is buffer k.inputs[i], the result buffer k.outputs[0].
//
// Results equal the interpreter's bit for bit for copies, one_hot, argmax/argmin, max pooling, the
// gradient of max pooling where windows do not overlap, and uniform draws; sums (avg pooling and its
// gradient, scatter_add, overlapping max-pooling gradients) accumulate in f32 (f64 for f64) and
// differ by rounding only; normal draws differ by VecMath's log error. The interpreter stops with an
// error on an out-of-range index, a kernel cannot: gather writes zeros for it, scatter_add skips it.
#pragma once

#include "codegen/cpu/KernelAbi.h"

#include <cstdint>

namespace kiln::cpu {

/// Emits the function named k.name for op kernel `k` into `m`. Throws kiln::Error naming the kernel
/// and the op when the op has no op-kernel implementation.
llvm::Function* renderOpKernel(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa);

/// Bytes of scratch (bufs[k.buffers.size()]) the op kernel needs: f32 accumulators shaped like the
/// result when an f16/bf16 result is a sum of several terms (scatter_add, overlapping max-pooling
/// gradients); 0 otherwise. It does not depend on the thread count.
int64_t opKernelScratchBytes(const kernels::Kernel& k);

}  // namespace kiln::cpu
