#include "frontend/OpHelpers.h"

namespace kiln {
namespace detail {

void opError(std::string_view op, std::span<const Tensor> operands, const SrcLoc& loc, const std::string& message) {
  std::vector<std::string> types;
  for (const Tensor& t : operands) types.push_back(t.defined() ? t.str() : "undefined");
  throw Error(SourceLoc::from(loc),
              fmt::format("op '{}' with operands ({}): {}", op, fmt::join(types, ", "), message));
}

int64_t axisOrThrow(std::string_view op, const Tensor& x, int64_t axis, int64_t rank, const SrcLoc& loc) {
  int64_t a = ir::normalizeAxis(axis, rank);
  if (a < 0) opError(op, x, loc, fmt::format("axis {} is out of range for rank {}", axis, rank));
  return a;
}

namespace {
int promotionRank(DType t) {
  switch (t) {
    case DType::boolean: return 0;
    case DType::i32: return 1;
    case DType::i64: return 2;
    case DType::f16:
    case DType::bf16: return 3;
    case DType::f32: return 4;
    case DType::f64: return 5;
  }
  return 0;
}
}  // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
  return promotionRank(a) >= promotionRank(b) ? a : b;
}

}  // namespace detail

}  // namespace kiln
