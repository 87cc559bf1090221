// The generated contraction of a contraction kernel (matmul, conv2d, conv2d_grad_input,
// conv2d_grad_weight): a packed, register-blocked GEMM in LLVM IR whose packing routines read the
// operands through the kernel's GEMM form (kernels/Gemm.h), so transposes, broadcast batches and
// convolution windows (implicit GEMM: no im2col beyond one packed panel) cost the same as the
// plain case. Finished result tiles are handed to the kernel's epilogue while still in cache.
#pragma once

#include "codegen/cpu/KernelAbi.h"
#include "support/DType.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::cpu {

/// The element type of the accumulator tiles an epilogue receives: f32 for f32/f16/bf16 operands,
/// f64 for f64, i64 for integer operands.
enum class AccType : uint8_t { F32, F64, I64 };
AccType accTypeOf(const kernels::Kernel& k);
/// The accumulator type as a kiln dtype.
inline DType dtypeOf(AccType t) { return t == AccType::F64 ? DType::f64 : t == AccType::I64 ? DType::i64 : DType::f32; }

/// Bytes of scratch the contraction needs (bufs[k.buffers.size()], 64-byte aligned), for
/// packed panels and result tiles of every thread of a pool of `threads`: the kernel must run on
/// a pool of at most that many threads (each chunk of its kiln_parallel_for claims one part).
/// 0 when the result is empty.
int64_t contractionScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads);

/// Whether contraction `k` packs its bf16 operands as k pairs for the dot-product micro-kernel
/// (vdpbf16ps, or its emulation: VectorIsa::emulateBf16Dot) instead of converting them to f32.
bool contractionUsesBf16Pairs(const kernels::Kernel& k, const VectorIsa& isa);
/// Whether contraction `k` is on that path on AMX tiles (GemmAmx.cpp; natively or emulated).
bool contractionUsesAmx(const kernels::Kernel& k, const VectorIsa& isa);

/// Emits into `m` the kernel function `name` (KernelAbi.h) for contraction kernel `k`. It computes
/// the contraction in the GEMM form [batch, M, N] = Σ_K A[batch, M, K] · B[batch, K, N] and calls
///
///     void epilogue(void** bufs, const ACC* tile, int64_t ldt,
///                   int64_t b, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
///
/// exactly once for every finished block of the result: the product at (b, m, n) for
/// m0 <= m < m1, n0 <= n < n1 is tile[(m - m0) * ldt + (n - n0)], complete over all of K.
/// (b, m, n) index the result-level view [batch, M, N] of kernels::GemmForm (its result*Dims
/// split the node's result dimensions; a convolution's group is part of M), so the element's
/// flat index in the result is (b·M + m)·N + n. Blocks are disjoint and may be handed over from
/// any thread of the pool, concurrently; the values do not depend on the thread count.
llvm::Function* emitContraction(llvm::Module& m, const std::string& name, const kernels::Kernel& k,
                                llvm::Function* epilogue, const VectorIsa& isa);

/// What a point epilogue does at one point: `element` is the address of its accumulator in the
/// tile, `index` its flat index (b·M + m)·N + n in the result, `buffers` the pointers the epilogue
/// loaded from the kernel's buffer table (pointEpilogue's `buffers`, in that order).
using EpiloguePoint = std::function<void(llvm::IRBuilderBase& b, const std::vector<llvm::Value*>& buffers,
                                         llvm::Value* element, llvm::Value* index)>;

/// An epilogue function `name` in `m` of the signature above for tiles of `acc`: it loads
/// bufs[i] for each i of `buffers` once, then visits the points of its block one by one (rows,
/// then columns), running `point` at each, with M = resultM and N = resultN. For tests and tools
/// that check or copy a contraction's plain result; the kernels' own epilogues are rendered with
/// their fused ops.
llvm::Function* pointEpilogue(llvm::Module& m, const std::string& name, AccType acc, int64_t resultM, int64_t resultN,
                              const std::vector<size_t>& buffers, const EpiloguePoint& point);

}  // namespace kiln::cpu
