// Gradient rules of the reductions. Both bring dy back to the keepdim shape (a reshape, free when
// keepdim was set) and broadcast it over the reduced axes.
#include "passes/autodiff/GradRules.h"

namespace kiln::passes::ad {

using ir::OpKind;
using ir::Value;

namespace {

// dy reshaped to the input's shape with the reduced axes kept as 1.
Value* keptGrad(GradContext& ctx, const ir::Ints& axes) {
  ir::Shape kept = keptShape(ctx.x(0)->type.shape, axes);
  return ctx.dy->type.shape == kept ? ctx.dy : ctx.b.reshape(ctx.dy, kept);
}

}  // namespace

void gradReduceSum(GradContext& ctx) {
  const ir::TensorType& x = ctx.x(0)->type;
  ir::Ints axes = normalizeAxes(ctx.node.attrInts("axes"), x.rank());
  Value* g = keptGrad(ctx, axes);
  ctx.set(0, g->type.shape == x.shape ? g : ctx.b.op(OpKind::Broadcast, {g}, {{"shape", x.shape}}));
}

// As PyTorch's amax/amin: dy is shared evenly among the positions equal to the result (ties split
// it), so the gradient is the same whichever tied element a backend happens to pick. A NaN result
// compares unequal everywhere; its gradient is then NaN (0 * dy/0), which is what a NaN loss
// deserves.
void gradReduceMaxMin(GradContext& ctx) {
  const ir::TensorType& x = ctx.x(0)->type;
  ir::Ints axes = normalizeAxes(ctx.node.attrInts("axes"), x.rank());
  ir::Shape kept = keptShape(x.shape, axes);
  Value* y = ctx.y()->type.shape == kept ? ctx.y() : ctx.b.reshape(ctx.y(), kept);
  Value* mask = ctx.b.op(OpKind::Cast, {ctx.b.op(OpKind::Eq, {ctx.x(0), y})}, {{"dtype", x.dtype}});
  Value* count = ctx.b.reduce(OpKind::ReduceSum, mask, axes, true);
  ctx.set(0, ctx.b.mul(mask, ctx.b.div(keptGrad(ctx, axes), count)));
}

}  // namespace kiln::passes::ad
