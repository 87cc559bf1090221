// The scalar semantics of the elementwise primitives (ir/Ops.def): one row per unary or binary op,
// a float form computed in double and an integer form computed in wrapping int64 (nullptr where
// the op takes floats only, or bools only). The reference interpreter applies these rows, and
// constant folding in the canonicalize pass uses the same rows, so both agree bit for bit.
#pragma once

#include "ir/OpInfo.h"

#include <cstdint>
#include <span>

namespace kiln::ir {

struct ScalarUnary {
  OpKind op;
  double (*onFloat)(double);
  int64_t (*onInt)(int64_t);
};

struct ScalarBinary {
  OpKind op;
  double (*onFloat)(double, double);
  int64_t (*onInt)(int64_t, int64_t);
};

/// The row of a unary / binary elementwise op, or nullptr.
const ScalarUnary* scalarUnary(OpKind op);
const ScalarBinary* scalarBinary(OpKind op);
/// Every row, for registering evaluators.
std::span<const ScalarUnary> scalarUnaryOps();
std::span<const ScalarBinary> scalarBinaryOps();

/// Two's-complement arithmetic on int64 without undefined behaviour on overflow.
inline int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

}  // namespace kiln::ir
