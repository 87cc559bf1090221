// The reductions of loop nests (reduce_sum, reduce_max, reduce_min) as LLVM IR on accumulators of
// one compute type (codegen/cpu/Elements.h), scalar or vector: the identity, the combine of the
// loop, and the lanes of a vector accumulator combined into one value.
#pragma once

#include "ir/OpInfo.h"
#include "support/DType.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::cpu {

/// The identity of reduction `op` on accumulators of `acc`, `lanes` wide (1: a scalar).
llvm::Value* reductionIdentity(llvm::IRBuilderBase& b, ir::OpKind op, DType acc, int lanes);

/// `acc` combined with `x`: a sum, or the max/min with the interpreter's semantics (NaN sticky: the
/// accumulator keeps the first NaN it meets; on ties it keeps itself).
llvm::Value* reductionCombine(llvm::IRBuilderBase& b, ir::OpKind op, DType acc, llvm::Value* a, llvm::Value* x);

/// The lanes of vector accumulator `v` combined into one value (a scalar is returned as it is).
llvm::Value* reductionHorizontal(llvm::IRBuilderBase& b, ir::OpKind op, DType acc, llvm::Value* v);

}  // namespace kiln::cpu
