// Elementwise ops and the arithmetic operators: scalar operands, type promotion, broadcasting
// (done by the IR ops themselves).
#include "frontend/OpHelpers.h"
#include "frontend/Ops.h"

#include <cmath>

namespace kiln {
namespace {

Tensor unary(ir::OpKind op, const Tensor& x, const SrcLoc& loc, std::vector<ir::NamedAttr> attrs = {}) {
  if (!x.defined()) detail::opError(ir::opName(op), x, loc, "the operand is an undefined tensor");
  return x.tracer().emit(op, {x}, std::move(attrs), loc);
}

/// Brings two operands to tensors of one element type: scalars become constants of the tensor's
/// type (an integer tensor meeting a fractional scalar becomes f32, as in PyTorch).
std::pair<Tensor, Tensor> unify(ir::OpKind op, const Operand& a, const Operand& b, const SrcLoc& loc) {
  if (!a.isTensor() && !b.isTensor())
    throw Error(SourceLoc::from(loc), fmt::format("op '{}': at least one operand must be a tensor", ir::opName(op)));
  if (a.isTensor() && b.isTensor()) {
    Tensor x = a.tensor(), y = b.tensor();
    if (x.dtype() != y.dtype()) {
      DType common = detail::promoteTypes(x.dtype(), y.dtype());
      x = cast(x, common, loc);
      y = cast(y, common, loc);
    }
    return {x, y};
  }
  Tensor t = a.isTensor() ? a.tensor() : b.tensor();
  double s = a.isTensor() ? b.scalar() : a.scalar();
  // A bool tensor in arithmetic or a comparison with a number counts as 0/1 (as in PyTorch):
  // mask * 2 is i64, mask * 0.5 is f32. Logical ops keep bool.
  bool logical = op == ir::OpKind::And || op == ir::OpKind::Or;
  if (t.dtype() == DType::boolean && !logical) t = cast(t, s == std::floor(s) ? DType::i64 : DType::f32, loc);
  else if (!isFloat(t.dtype()) && s != std::floor(s)) t = cast(t, DType::f32, loc);
  Tensor c = t.tracer().scalar(s, t.dtype(), loc);
  return a.isTensor() ? std::pair{t, c} : std::pair{c, t};
}

Tensor binary(ir::OpKind op, const Operand& a, const Operand& b, const SrcLoc& loc) {
  auto [x, y] = unify(op, a, b, loc);
  return x.tracer().emit(op, {x, y}, {}, loc);
}

}  // namespace

Tensor neg(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Neg, x, loc); }
Tensor abs(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Abs, x, loc); }
Tensor exp(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Exp, x, loc); }
Tensor log(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Log, x, loc); }
Tensor sqrt(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Sqrt, x, loc); }
Tensor rsqrt(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Rsqrt, x, loc); }
Tensor reciprocal(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Reciprocal, x, loc); }
Tensor tanh(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Tanh, x, loc); }
Tensor sigmoid(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Sigmoid, x, loc); }
Tensor sin(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Sin, x, loc); }
Tensor cos(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Cos, x, loc); }
Tensor erf(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Erf, x, loc); }
Tensor relu(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Relu, x, loc); }
Tensor floor(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Floor, x, loc); }
Tensor logical_not(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Not, x, loc); }
Tensor gelu(const Tensor& x, std::string_view approximate, SrcLoc loc) {
  return unary(ir::OpKind::Gelu, x, loc, {{"approximate", std::string(approximate)}});
}
Tensor silu(const Tensor& x, SrcLoc loc) { return unary(ir::OpKind::Silu, x, loc); }
Tensor cast(const Tensor& x, DType dtype, SrcLoc loc) {
  if (x.defined() && x.dtype() == dtype) return x;
  return unary(ir::OpKind::Cast, x, loc, {{"dtype", dtype}});
}

Tensor add(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Add, a, b, loc); }
Tensor sub(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Sub, a, b, loc); }
Tensor mul(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Mul, a, b, loc); }
Tensor div(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Div, a, b, loc); }
Tensor pow(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Pow, a, b, loc); }
Tensor maximum(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Max, a, b, loc); }
Tensor minimum(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Min, a, b, loc); }
Tensor logical_and(const Tensor& a, const Tensor& b, SrcLoc loc) {
  return a.tracer().emit(ir::OpKind::And, {a, b}, {}, loc);
}
Tensor logical_or(const Tensor& a, const Tensor& b, SrcLoc loc) {
  return a.tracer().emit(ir::OpKind::Or, {a, b}, {}, loc);
}
Tensor eq(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Eq, a, b, loc); }
Tensor ne(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Ne, a, b, loc); }
Tensor lt(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Lt, a, b, loc); }
Tensor le(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Le, a, b, loc); }
Tensor gt(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Gt, a, b, loc); }
Tensor ge(const Operand& a, const Operand& b, SrcLoc loc) { return binary(ir::OpKind::Ge, a, b, loc); }

Tensor where(const Tensor& cond, const Operand& a, const Operand& b, SrcLoc loc) {
  if (!cond.defined()) detail::opError("select", cond, loc, "the condition is an undefined tensor");
  Tensor x, y;
  if (a.isTensor() || b.isTensor()) {
    std::tie(x, y) = unify(ir::OpKind::Select, a, b, loc);
  } else {  // both scalars: take the default float type
    x = cond.tracer().scalar(a.scalar(), DType::f32, loc);
    y = cond.tracer().scalar(b.scalar(), DType::f32, loc);
  }
  return cond.tracer().emit(ir::OpKind::Select, {cond, x, y}, {}, loc);
}

Tensor operator+(LocatedOperand a, const Operand& b) { return add(a.operand, b, a.loc); }
Tensor operator-(LocatedOperand a, const Operand& b) { return sub(a.operand, b, a.loc); }
Tensor operator*(LocatedOperand a, const Operand& b) { return mul(a.operand, b, a.loc); }
Tensor operator/(LocatedOperand a, const Operand& b) { return div(a.operand, b, a.loc); }
Tensor operator-(LocatedOperand x) { return neg(x.operand.tensor(), x.loc); }
Tensor operator==(LocatedOperand a, const Operand& b) { return eq(a.operand, b, a.loc); }
Tensor operator!=(LocatedOperand a, const Operand& b) { return ne(a.operand, b, a.loc); }
Tensor operator<(LocatedOperand a, const Operand& b) { return lt(a.operand, b, a.loc); }
Tensor operator<=(LocatedOperand a, const Operand& b) { return le(a.operand, b, a.loc); }
Tensor operator>(LocatedOperand a, const Operand& b) { return gt(a.operand, b, a.loc); }
Tensor operator>=(LocatedOperand a, const Operand& b) { return ge(a.operand, b, a.loc); }

}  // namespace kiln
