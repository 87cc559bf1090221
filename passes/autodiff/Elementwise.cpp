// Gradient rules of the elementwise ops. Binary and ternary rules compute each contribution at the
// broadcast result shape; GradContext::set sums it back to the operand's shape.
#include "passes/autodiff/GradRules.h"

#include <numbers>

namespace kiln::passes::ad {

using ir::OpKind;
using ir::Value;

namespace {

Value* c(GradContext& ctx, double v) { return ctx.b.constant(v, ctx.dy->type.dtype); }
Value* zero(GradContext& ctx) { return c(ctx, 0.0); }
Value* neg(GradContext& ctx, Value* v) { return ctx.b.unary(OpKind::Neg, v); }
Value* cmp(GradContext& ctx, OpKind k, Value* a, Value* b) { return ctx.b.op(k, {a, b}); }
Value* select(GradContext& ctx, Value* cond, Value* a, Value* b) { return ctx.b.op(OpKind::Select, {cond, a, b}); }

// Unary rules: dx = dy * f'(x), written with the result y where that saves work.
void unaryTimes(GradContext& ctx, Value* derivative) { ctx.set(0, ctx.b.mul(ctx.dy, derivative)); }

}  // namespace

void gradNeg(GradContext& ctx) { ctx.set(0, neg(ctx, ctx.dy)); }

// sign(x) * dy with sign(0) = 0, as PyTorch: no gradient at the kink.
void gradAbs(GradContext& ctx) {
  Value* x = ctx.x(0);
  Value* pos = select(ctx, cmp(ctx, OpKind::Gt, x, zero(ctx)), ctx.dy, zero(ctx));
  ctx.set(0, select(ctx, cmp(ctx, OpKind::Lt, x, zero(ctx)), neg(ctx, ctx.dy), pos));
}

void gradExp(GradContext& ctx) { unaryTimes(ctx, ctx.y()); }
void gradLog(GradContext& ctx) { ctx.set(0, ctx.b.div(ctx.dy, ctx.x(0))); }
// d sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y.
void gradSqrt(GradContext& ctx) { ctx.set(0, ctx.b.div(ctx.b.scale(ctx.dy, 0.5), ctx.y())); }
// d x^-1/2 = -0.5 x^-3/2 = -0.5 y^3.
void gradRsqrt(GradContext& ctx) {
  Value* y = ctx.y();
  unaryTimes(ctx, ctx.b.scale(ctx.b.mul(y, ctx.b.mul(y, y)), -0.5));
}
// d 1/x = -1/x^2 = -y^2.
void gradReciprocal(GradContext& ctx) { unaryTimes(ctx, neg(ctx, ctx.b.mul(ctx.y(), ctx.y()))); }
void gradTanh(GradContext& ctx) { unaryTimes(ctx, ctx.b.sub(c(ctx, 1.0), ctx.b.mul(ctx.y(), ctx.y()))); }
void gradSigmoid(GradContext& ctx) { unaryTimes(ctx, ctx.b.mul(ctx.y(), ctx.b.sub(c(ctx, 1.0), ctx.y()))); }
void gradSin(GradContext& ctx) { unaryTimes(ctx, ctx.b.unary(OpKind::Cos, ctx.x(0))); }
void gradCos(GradContext& ctx) { unaryTimes(ctx, neg(ctx, ctx.b.unary(OpKind::Sin, ctx.x(0)))); }
// d erf(x) = 2/sqrt(pi) e^(-x^2).
void gradErf(GradContext& ctx) {
  Value* x = ctx.x(0);
  Value* e = ctx.b.unary(OpKind::Exp, neg(ctx, ctx.b.mul(x, x)));
  unaryTimes(ctx, ctx.b.scale(e, 2.0 / std::sqrt(std::numbers::pi)));
}
// The mask x > 0: relu'(0) = 0 as in PyTorch.
void gradRelu(GradContext& ctx) {
  ctx.set(0, select(ctx, cmp(ctx, OpKind::Gt, ctx.x(0), zero(ctx)), ctx.dy, zero(ctx)));
}
// Float to float only: an integer source or result is never active (the dtype check sees to it).
void gradCast(GradContext& ctx) {
  DType src = ctx.x(0)->type.dtype;
  ctx.set(0, src == ctx.dy->type.dtype ? ctx.dy : ctx.b.op(OpKind::Cast, {ctx.dy}, {{"dtype", src}}));
}

void gradAdd(GradContext& ctx) {
  if (ctx.wants(0)) ctx.set(0, ctx.dy);
  if (ctx.wants(1)) ctx.set(1, ctx.dy);
}

void gradSub(GradContext& ctx) {
  if (ctx.wants(0)) ctx.set(0, ctx.dy);
  if (ctx.wants(1)) ctx.set(1, neg(ctx, ctx.dy));
}

void gradMul(GradContext& ctx) {
  if (ctx.wants(0)) ctx.set(0, ctx.b.mul(ctx.dy, ctx.x(1)));
  if (ctx.wants(1)) ctx.set(1, ctx.b.mul(ctx.dy, ctx.x(0)));
}

// d(a/b)/db = -a/b^2 = -(a/b)/b: reuses the forward result.
void gradDiv(GradContext& ctx) {
  if (ctx.wants(0)) ctx.set(0, ctx.b.div(ctx.dy, ctx.x(1)));
  if (ctx.wants(1)) ctx.set(1, neg(ctx, ctx.b.div(ctx.b.mul(ctx.dy, ctx.y()), ctx.x(1))));
}

// d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a). Nothing is guarded: for a <= 0 the b-gradient is
// NaN (or -inf * 0 = NaN at a = 0), as the real derivative does not exist there; keep the exponent
// a constant (no gradient asked) when the base can be non-positive.
void gradPow(GradContext& ctx) {
  Value *a = ctx.x(0), *b = ctx.x(1);
  if (ctx.wants(0)) {
    Value* p = ctx.b.op(OpKind::Pow, {a, ctx.b.sub(b, c(ctx, 1.0))});
    ctx.set(0, ctx.b.mul(ctx.dy, ctx.b.mul(b, p)));
  }
  if (ctx.wants(1)) ctx.set(1, ctx.b.mul(ctx.dy, ctx.b.mul(ctx.y(), ctx.b.unary(OpKind::Log, a))));
}

namespace {

// max/min route dy to the operand that was selected; on a tie `a` gets all of it (a subgradient,
// and what a fused kernel computing `a >= b ? a : b` would pick). With a NaN the comparison is
// false and `b` gets it.
void routeToSelected(GradContext& ctx, OpKind aWins) {
  Value* cond = cmp(ctx, aWins, ctx.x(0), ctx.x(1));
  if (ctx.wants(0)) ctx.set(0, select(ctx, cond, ctx.dy, zero(ctx)));
  if (ctx.wants(1)) ctx.set(1, select(ctx, cond, zero(ctx), ctx.dy));
}

}  // namespace

void gradMax(GradContext& ctx) { routeToSelected(ctx, OpKind::Ge); }
void gradMin(GradContext& ctx) { routeToSelected(ctx, OpKind::Le); }

// select(cond, a, b): dy goes to a where cond holds, to b elsewhere; cond (bool) gets none.
void gradSelect(GradContext& ctx) {
  Value* cond = ctx.x(0);
  if (ctx.wants(1)) ctx.set(1, select(ctx, cond, ctx.dy, zero(ctx)));
  if (ctx.wants(2)) ctx.set(2, select(ctx, cond, zero(ctx), ctx.dy));
}

}  // namespace kiln::passes::ad
