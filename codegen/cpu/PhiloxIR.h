// The `random` op's Philox4x32-10 draws (support/Philox.h) as LLVM IR, lane-wise on a scalar or
// vector counter, so generated kernels draw the interpreter's numbers: uniform draws bit for bit,
// normal draws within VecMath's documented log error (the cosine is llvm.cos, the C library's).
// The seed is a compile-time constant, so the ten rounds' keys fold into the code; each round is
// two 32×32→64-bit multiplies (vpmuludq on x86) and a few xors.
#pragma once

#include <cstdint>

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::cpu {

/// The f32 draw (float or <N x float>, like `counter`) of philoxUniform / philoxNormal for key
/// `seed`, the counter's low 64 bits `counter` (i64 or <N x i64>: offset + element index, wrapping)
/// and its high 64 bits `step` (an i64 scalar: the training step, 0 without one).
llvm::Value* emitPhiloxDraw(llvm::IRBuilderBase& b, uint64_t seed, llvm::Value* counter, llvm::Value* step,
                            bool normal);

}  // namespace kiln::cpu
