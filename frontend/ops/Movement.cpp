// Reductions and movement ops. PyTorch conveniences (transpose, flatten, squeeze, narrow,
// index_select, -1 in reshape, negative axes) are resolved here so the IR only sees its primitives
// with explicit, non-negative attributes.
#include "frontend/OpHelpers.h"
#include "frontend/Ops.h"

#include <algorithm>

namespace kiln {
namespace {

using detail::axisOrThrow;
using detail::opError;

Ints normalizeAxes(std::string_view op, const Tensor& x, const Axes& axes, const SrcLoc& loc) {
  Ints out;
  for (int64_t a : axes.v) out.push_back(axisOrThrow(op, x, a, x.rank(), loc));
  return out;
}

Tensor reduce(ir::OpKind op, const Tensor& x, const Axes& axes, bool keepdim, const SrcLoc& loc) {
  Ints ax = normalizeAxes(ir::opName(op), x, axes, loc);
  return x.tracer().emit(op, {x}, {{"axes", ax}, {"keepdim", keepdim}}, loc);
}

Tensor argReduce(ir::OpKind op, const Tensor& x, int64_t axis, bool keepdim, const SrcLoc& loc) {
  int64_t a = axisOrThrow(ir::opName(op), x, axis, x.rank(), loc);
  return x.tracer().emit(op, {x}, {{"axis", a}, {"keepdim", keepdim}}, loc);
}

}  // namespace

Tensor sum(const Tensor& x, Axes axes, bool keepdim, SrcLoc loc) {
  return reduce(ir::OpKind::ReduceSum, x, axes, keepdim, loc);
}
Tensor mean(const Tensor& x, Axes axes, bool keepdim, SrcLoc loc) {
  return reduce(ir::OpKind::ReduceMean, x, axes, keepdim, loc);
}
Tensor max(const Tensor& x, Axes axes, bool keepdim, SrcLoc loc) {
  return reduce(ir::OpKind::ReduceMax, x, axes, keepdim, loc);
}
Tensor min(const Tensor& x, Axes axes, bool keepdim, SrcLoc loc) {
  return reduce(ir::OpKind::ReduceMin, x, axes, keepdim, loc);
}
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim, SrcLoc loc) {
  return argReduce(ir::OpKind::ArgMax, x, axis, keepdim, loc);
}
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim, SrcLoc loc) {
  return argReduce(ir::OpKind::ArgMin, x, axis, keepdim, loc);
}

Tensor reshape(const Tensor& x, Shape shape, SrcLoc loc) {
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) opError("reshape", x, loc, fmt::format("shape {} has more than one -1", ir::shapeStr(shape)));
      inferred = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      opError("reshape", x, loc, fmt::format("shape {} has a negative dimension", ir::shapeStr(shape)));
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      opError("reshape", x, loc, fmt::format("cannot reshape {} elements into {}", x.numel(), ir::shapeStr(shape)));
    shape[inferred] = x.numel() / known;
  }
  if (shape == x.shape()) return x;
  return x.tracer().emit(ir::OpKind::Reshape, {x}, {{"shape", shape}}, loc);
}

Tensor permute(const Tensor& x, Ints perm, SrcLoc loc) {
  for (int64_t& p : perm) p = axisOrThrow("permute", x, p, x.rank(), loc);
  return x.tracer().emit(ir::OpKind::Permute, {x}, {{"perm", perm}}, loc);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, SrcLoc loc) {
  int64_t a = axisOrThrow("transpose", x, dim0, x.rank(), loc);
  int64_t b = axisOrThrow("transpose", x, dim1, x.rank(), loc);
  Ints perm(static_cast<size_t>(x.rank()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[a], perm[b]);
  return permute(x, perm, loc);
}

Tensor flatten(const Tensor& x, int64_t startDim, int64_t endDim, SrcLoc loc) {
  if (x.rank() == 0) return reshape(x, {1}, loc);
  int64_t s = axisOrThrow("flatten", x, startDim, x.rank(), loc);
  int64_t e = axisOrThrow("flatten", x, endDim, x.rank(), loc);
  if (s > e) opError("flatten", x, loc, fmt::format("start_dim {} comes after end_dim {}", startDim, endDim));
  Shape out(x.shape().begin(), x.shape().begin() + s);
  int64_t merged = 1;
  for (int64_t i = s; i <= e; ++i) merged *= x.shape()[i];
  out.push_back(merged);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, out, loc);
}

Tensor squeeze(const Tensor& x, int64_t dim, SrcLoc loc) {
  int64_t d = axisOrThrow("squeeze", x, dim, x.rank(), loc);
  if (x.shape()[d] != 1) opError("squeeze", x, loc, fmt::format("dimension {} has size {}, not 1", dim, x.shape()[d]));
  Shape out = x.shape();
  out.erase(out.begin() + d);
  return reshape(x, out, loc);
}

Tensor unsqueeze(const Tensor& x, int64_t dim, SrcLoc loc) {
  int64_t d = axisOrThrow("unsqueeze", x, dim, x.rank() + 1, loc);
  Shape out = x.shape();
  out.insert(out.begin() + d, 1);
  return reshape(x, out, loc);
}

Tensor broadcast_to(const Tensor& x, Shape shape, SrcLoc loc) {
  if (shape == x.shape()) return x;
  return x.tracer().emit(ir::OpKind::Broadcast, {x}, {{"shape", shape}}, loc);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step, SrcLoc loc) {
  int64_t d = axisOrThrow("slice", x, dim, x.rank(), loc);
  int64_t n = x.shape()[d];
  if (step < 1) opError("slice", x, loc, fmt::format("step {} must be >= 1", step));
  auto clampIndex = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  Ints starts(static_cast<size_t>(x.rank()), 0), ends = x.shape(), steps(static_cast<size_t>(x.rank()), 1);
  starts[d] = clampIndex(start);
  ends[d] = std::max(starts[d], clampIndex(end));
  steps[d] = step;
  return slice(x, starts, ends, steps, loc);
}

Tensor slice(const Tensor& x, Ints starts, Ints ends, Ints steps, SrcLoc loc) {
  if (steps.empty()) steps.assign(starts.size(), 1);
  return x.tracer().emit(ir::OpKind::Slice, {x}, {{"starts", starts}, {"ends", ends}, {"steps", steps}}, loc);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, SrcLoc loc) {
  int64_t d = axisOrThrow("narrow", x, dim, x.rank(), loc);
  int64_t n = x.shape()[d];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    opError("narrow", x, loc, fmt::format("range [{}, {}) is outside dimension {} of size {}", start, start + length, dim, n));
  return slice(x, d, start, start + length, 1, loc);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis, SrcLoc loc) {
  if (xs.empty()) throw Error(SourceLoc::from(loc), "op 'concat': needs at least one tensor");
  int64_t a = axisOrThrow("concat", xs[0], axis, xs[0].rank(), loc);
  return xs[0].tracer().emit(ir::OpKind::Concat, std::span<const Tensor>(xs), {{"axis", a}}, loc);
}

Tensor pad(const Tensor& x, Ints low, Ints high, double value, SrcLoc loc) {
  return x.tracer().emit(ir::OpKind::Pad, {x}, {{"low", low}, {"high", high}, {"value", value}}, loc);
}

Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis, SrcLoc loc) {
  int64_t a = axisOrThrow("gather", data, axis, data.rank(), loc);
  return data.tracer().emit(ir::OpKind::Gather, {data, indices}, {{"axis", a}}, loc);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, SrcLoc loc) {
  if (index.defined() && index.rank() != 1) {
    Tensor both[] = {x, index};
    opError("index_select", both, loc, "the index must be rank 1");
  }
  return gather(x, index, dim, loc);
}

Tensor one_hot(const Tensor& indices, int64_t numClasses, DType dtype, SrcLoc loc) {
  return indices.tracer().emit(ir::OpKind::OneHot, {indices}, {{"num_classes", numClasses}, {"dtype", dtype}}, loc);
}

}  // namespace kiln
