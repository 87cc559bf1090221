// Gradient rules of the movement ops: each is the adjoint movement (reshape back, the inverse
// permutation, a sum over broadcast axes, slice ↔ slice_grad, gather ↔ scatter_add).
#include "passes/autodiff/GradRules.h"

namespace kiln::passes::ad {

using ir::OpKind;
using ir::Value;

namespace {

Value* slice(Builder& b, Value* v, const ir::Ints& starts, const ir::Ints& ends, const ir::Ints& steps) {
  return b.op(OpKind::Slice, {v}, {{"starts", starts}, {"ends", ends}, {"steps", steps}});
}

}  // namespace

void gradReshape(GradContext& ctx) { ctx.set(0, ctx.b.reshape(ctx.dy, ctx.x(0)->type.shape)); }

void gradPermute(GradContext& ctx) {
  const ir::Ints& perm = ctx.node.attrInts("perm");
  ir::Ints inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  ctx.set(0, ctx.b.permute(ctx.dy, inverse));
}

// broadcast follows the same NumPy rule as elementwise broadcasting, so set() sums it back.
void gradBroadcast(GradContext& ctx) { ctx.set(0, ctx.dy); }

void gradSlice(GradContext& ctx) {
  ctx.set(0, ctx.b.op(OpKind::SliceGrad, {ctx.dy},
                      {{"shape", ctx.x(0)->type.shape},
                       {"starts", ctx.node.attrInts("starts")},
                       {"steps", ctx.node.attrInts("steps")}}));
}

// Each operand gets the slab of dy it was copied to.
void gradConcat(GradContext& ctx) {
  const ir::Shape& out = ctx.y()->type.shape;
  int64_t axis = ir::normalizeAxis(ctx.node.attrInt("axis"), static_cast<int64_t>(out.size()));
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.node.operands.size(); ++i) {
    int64_t size = ctx.x(i)->type.shape[axis];
    if (ctx.wants(i)) {
      ir::Ints starts(out.size(), 0), ends(out.begin(), out.end()), steps(out.size(), 1);
      starts[axis] = offset;
      ends[axis] = offset + size;
      ctx.set(i, slice(ctx.b, ctx.dy, starts, ends, steps));
    }
    offset += size;
  }
}

// The padding received constants, so only the interior carries a gradient.
void gradPad(GradContext& ctx) {
  const ir::Shape& x = ctx.x(0)->type.shape;
  const ir::Ints& low = ctx.node.attrInts("low");
  ir::Ints ends(x.size()), steps(x.size(), 1);
  for (size_t i = 0; i < x.size(); ++i) ends[i] = low[i] + x[i];
  ctx.set(0, slice(ctx.b, ctx.dy, low, ends, steps));
}

// gather(data, indices): rows picked several times accumulate (scatter_add); indices get none.
void gradGather(GradContext& ctx) {
  const ir::Shape& data = ctx.x(0)->type.shape;
  int64_t axis = ir::normalizeAxis(ctx.node.attrInt("axis"), static_cast<int64_t>(data.size()));
  ctx.set(0, ctx.b.op(OpKind::ScatterAdd, {ctx.x(1), ctx.dy}, {{"axis", axis}, {"dim_size", data[axis]}}));
}

// slice_grad is linear; its adjoint takes the same elements back out.
void gradSliceGrad(GradContext& ctx) {
  const ir::Shape& small = ctx.x(0)->type.shape;
  const ir::Ints& starts = ctx.node.attrInts("starts");
  const ir::Ints& steps = ctx.node.attrInts("steps");
  ir::Ints ends(small.size());
  for (size_t i = 0; i < small.size(); ++i)
    ends[i] = small[i] == 0 ? starts[i] : starts[i] + (small[i] - 1) * steps[i] + 1;
  ctx.set(0, slice(ctx.b, ctx.dy, starts, ends, steps));
}

// scatter_add(indices, updates) is linear in updates; its adjoint gathers.
void gradScatterAdd(GradContext& ctx) {
  ctx.set(1, ctx.b.op(OpKind::Gather, {ctx.dy, ctx.x(0)}, {{"axis", ctx.node.attrInt("axis")}}));
}

}  // namespace kiln::passes::ad
