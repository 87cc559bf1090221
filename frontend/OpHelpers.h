// Internal helpers shared by the DSL op implementations (not part of the public API).
#pragma once

#include "frontend/Tensor.h"

#include <string_view>

namespace kiln::detail {

/// Throws "file:line:col: op 'NAME' with operands (f32[2,3], …): MESSAGE", the same form the shape
/// rules use, for errors the front end detects before building a node.
[[noreturn]] void opError(std::string_view op, std::span<const Tensor> operands, const SrcLoc& loc,
                          const std::string& message);
[[noreturn]] inline void opError(std::string_view op, const Tensor& x, const SrcLoc& loc, const std::string& message) {
  opError(op, std::span<const Tensor>(&x, 1), loc, message);
}

/// Normalizes a possibly negative axis of `x` (rank `rank`), or throws naming `op`.
int64_t axisOrThrow(std::string_view op, const Tensor& x, int64_t axis, int64_t rank, const SrcLoc& loc);

/// The element type two operands are promoted to (see frontend/Ops.h).
DType promoteTypes(DType a, DType b);

}  // namespace kiln::detail
