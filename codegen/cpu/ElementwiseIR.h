// The elementwise primitives of ir/Ops.def as LLVM IR, lane-wise on scalars or vectors of the
// compute types of codegen/cpu/Elements.h, with the interpreter's semantics (ir/ScalarOps.h):
// f16/bf16 rounded after every op, i32 wrapped, integer division by zero 0, max/min propagating
// NaN, relu(NaN) = NaN and relu(-0) = +0, casts as Elements.h convert(). exp, log, tanh, sigmoid
// and erf on f32 are VecMath's; sin, cos, pow and the f64 forms are the C library's.
#pragma once

#include "ir/OpInfo.h"
#include "support/DType.h"

#include <vector>

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::cpu {

/// `op` applied to `args` (compute values of `argType`, all of the same lane count) giving a
/// value of `result`'s compute type; nullptr when `op` is not an elementwise primitive. Library
/// functions it calls are declared in `m`.
llvm::Value* emitElementwise(llvm::IRBuilderBase& b, llvm::Module& m, ir::OpKind op, DType argType, DType result,
                             const std::vector<llvm::Value*>& args);

}  // namespace kiln::cpu
