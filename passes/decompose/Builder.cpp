#include "passes/decompose/Builder.h"

namespace kiln::passes::decomp {

using ir::OpKind;
using ir::Value;

ir::Ints allAxes(int64_t rank) {
  ir::Ints axes;
  for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  return axes;
}

Value* Builder::op(OpKind k, std::vector<Value*> operands, std::vector<ir::NamedAttr> attrs) {
  return g_.addNode(k, std::move(operands), attrs, loc_);
}

Value* Builder::constant(double v, DType dtype) {
  return op(OpKind::Constant, {}, {{"shape", ir::Ints{}}, {"dtype", dtype}, {"value", ir::Floats{v}}});
}

Value* Builder::reduce(OpKind k, Value* x, const ir::Ints& axes, bool keepdim) {
  return op(k, {x}, {{"axes", axes}, {"keepdim", keepdim}});
}

Value* Builder::mean(Value* x, const ir::Ints& axes, bool keepdim) {
  // An explicit empty axis list means "all" for the reduction ops, so count the same way.
  int64_t n = 1;
  if (axes.empty()) n = x->type.numel();
  for (int64_t a : axes) n *= x->type.shape[a];
  // n == 0 gives sum 0 * inf = NaN, the mean of nothing.
  return scale(reduce(OpKind::ReduceSum, x, axes, keepdim), 1.0 / static_cast<double>(n));
}

Value* Builder::permute(Value* x, const ir::Ints& perm) { return op(OpKind::Permute, {x}, {{"perm", perm}}); }

Value* Builder::reshape(Value* x, const ir::Shape& shape) { return op(OpKind::Reshape, {x}, {{"shape", shape}}); }

// The max only keeps exp() from overflowing; softmax does not depend on it, so its gradient is
// zero in exact arithmetic. stop_gradient says so, and autodiff emits no backward for it.
static Value* maxShifted(Builder& b, Value* x, int64_t axis) {
  Value* max = b.unary(OpKind::StopGradient, b.reduce(OpKind::ReduceMax, x, {axis}, true));
  return b.sub(x, max);
}

Value* Builder::softmax(Value* x, int64_t axis) {
  Value* shifted = maxShifted(*this, x, axis);
  Value* e = unary(OpKind::Exp, shifted);
  return div(e, reduce(OpKind::ReduceSum, e, {axis}, true));
}

Value* Builder::logSoftmax(Value* x, int64_t axis) {
  Value* shifted = maxShifted(*this, x, axis);
  Value* sum = reduce(OpKind::ReduceSum, unary(OpKind::Exp, shifted), {axis}, true);
  return sub(shifted, unary(OpKind::Log, sum));
}

Value* Builder::reduceLoss(Value* perElement, const std::string& reduction) {
  if (reduction == "none") return perElement;
  ir::Ints axes = allAxes(perElement->type.rank());
  if (reduction == "sum") return reduce(OpKind::ReduceSum, perElement, axes, false);
  KILN_ASSERT(reduction == "mean", "unknown loss reduction '{}'", reduction);
  return mean(perElement, axes, false);
}

}  // namespace kiln::passes::decomp
