#include "ir/Type.h"

#include <fmt/format.h>

namespace kiln::ir {

int64_t numElements(const Shape& s) {
  int64_t n = 1;
  for (Dim d : s) n *= d;
  return n;
}

std::string shapeStr(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

std::string shapeProblem(const Shape& shape) {
  int64_t n = 1;
  for (Dim d : shape) {
    if (d < 0) return fmt::format("shape {} has a negative dimension", shapeStr(shape));
    if (d > kMaxElements || (d != 0 && n > kMaxElements / d))
      return fmt::format("shape {} has too many elements (the limit is 2^48)", shapeStr(shape));
    if (d != 0) n *= d;
  }
  return {};
}

std::vector<int64_t> rowMajorStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

bool broadcastShapes(const Shape& a, const Shape& b, Shape& out) {
  size_t r = std::max(a.size(), b.size());
  Shape res(r);
  for (size_t i = 0; i < r; ++i) {
    Dim da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    Dim db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    res[i] = da == 1 ? db : da;
  }
  out = std::move(res);
  return true;
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

std::string TensorType::str() const {
  return fmt::format("{}{}", dtypeName(dtype), shapeStr(shape));
}

}  // namespace kiln::ir
