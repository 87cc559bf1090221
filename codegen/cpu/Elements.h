// How kiln's element types live in generated code: the storage type of a buffer element and the
// type values are computed in, and the conversions between them (shared by every emitter of the
// CPU backend, so all of them round the way support/DType.h and the interpreter do).
//
//   dtype   storage   compute
//   f32     float     float
//   f16     i16       float  (rounded to f16 after every op)
//   bf16    i16       float  (rounded to bf16 after every op, nearest even, NaN stays NaN)
//   f64     double    double
//   i32     i32       i64    (wrapped to i32 after every op)
//   i64     i64       i64
//   bool    i8 (0/1)  i1
//
// Every helper works lane-wise on scalars and on vectors of the compute/storage type.
#pragma once

#include "support/DType.h"

namespace llvm {
class IRBuilderBase;
class Module;
class Type;
class Value;
}  // namespace llvm

namespace kiln::cpu {

/// The in-memory element type of `t`, and the type values of `t` are computed in.
llvm::Type* storageType(llvm::IRBuilderBase& b, DType t);
llvm::Type* computeType(llvm::IRBuilderBase& b, DType t);
/// `lanes` > 1: a vector of the scalar type; 1: the scalar type.
llvm::Type* withLanes(llvm::Type* scalar, int lanes);

/// Marks module `m` as run with subnormal floats flushed to zero (support/FloatMode.h) on a CPU with
/// AVX512-BF16: its vector roundings to bf16 (roundTo, toStorage, convert) then take vcvtneps2bf16,
/// which rounds to nearest even, keeps NaNs quiet and overflows to infinity as the integer sequence
/// does, but reads and writes subnormals as zero whatever the control word says — as the flushing
/// mode has them anyway. One instruction for 16 values instead of eight (100×784 bf16 result of
/// 100×128·(784×128)ᵀ on AMX tiles, its epilogue rounding the f32 tile: 39.5 → 34.3 µs on one
/// thread, Xeon with AMX, 2026-12-01). Scalars keep the integer sequence.
void setNativeBf16Rounding(llvm::Module& m);

/// A loaded storage value (scalar or vector) as the compute type, exactly.
llvm::Value* fromStorage(llvm::IRBuilderBase& b, DType t, llvm::Value* stored);
/// A compute value (already representable in `t`) as storage bits.
llvm::Value* toStorage(llvm::IRBuilderBase& b, DType t, llvm::Value* v);
/// Rounds a compute value to the nearest value of `t` (f16/bf16 rounding, i32 wrap); identity for
/// the other types. bf16 vectors of a module marked by setNativeBf16Rounding take vcvtneps2bf16.
llvm::Value* roundTo(llvm::IRBuilderBase& b, DType t, llvm::Value* v);
/// Converts a compute value of type `from` to the compute type of `to` with the semantics of the
/// `cast` op (docs/IR.md): float→int truncates toward zero and saturates, NaN → 0; →bool is != 0
/// (NaN → true); int→int wraps; the result is rounded to `to`.
llvm::Value* convert(llvm::IRBuilderBase& b, DType from, DType to, llvm::Value* v);
/// A constant of `t`'s compute type (splat to `lanes`), rounded to `t` as a store would.
llvm::Value* constant(llvm::IRBuilderBase& b, DType t, double value, int lanes);
/// `v` splat to `lanes` if it is a scalar and lanes > 1; unchanged otherwise.
llvm::Value* splat(llvm::IRBuilderBase& b, llvm::Value* v, int lanes);
/// The lane count of a value (1 for scalars).
int lanesOf(const llvm::Value* v);

}  // namespace kiln::cpu
