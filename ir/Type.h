// Tensor types: an element type and a static shape. Shapes are row-major (the last dimension is
// contiguous); a rank-0 shape is a scalar. Every dimension is a non-negative integer today; the
// `Dim` alias is the one place a symbolic (batch) dimension will later hook in.
#pragma once

#include "support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ir {

using Dim = int64_t;
using Shape = std::vector<Dim>;

/// Number of elements of a shape (1 for a scalar).
int64_t numElements(const Shape& s);
/// "[2,3]" ("[]" for a scalar).
std::string shapeStr(const Shape& s);
/// Row-major strides in elements.
std::vector<int64_t> rowMajorStrides(const Shape& s);
/// NumPy broadcasting of two shapes: right-aligned; each pair of dimensions must be equal or one
/// of them 1. Returns false when the shapes do not broadcast.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& out);
/// Largest element count a tensor type may have: byte counts then never overflow.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;
/// Why `shape` is not a valid tensor shape — a negative dimension, or a dimension or element count
/// above kMaxElements (every dimension counts, even beside a 0) — or "" when it is valid. The one
/// check used by shape rules, the parser, the verifier and the DSL.
std::string shapeProblem(const Shape& shape);

/// Normalizes a possibly negative axis (Python style) against `rank`; returns -1 when out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank);

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return numElements(shape); }
  int64_t bytes() const { return numel() * dtypeSize(dtype); }
  /// "f32[2,3]"; the text form of a type in .kir files and messages.
  std::string str() const;
  bool operator==(const TensorType&) const = default;
};

}  // namespace kiln::ir
