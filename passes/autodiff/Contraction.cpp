// Gradient rules of the contractions and windows: matmul through two matmuls, conv2d and pooling
// through their dedicated gradient ops (ir/Ops.def, "Gradient helpers"), and the rules of those
// helpers themselves, which are linear, so gradients of gradients stay possible.
#include "passes/autodiff/GradRules.h"

namespace kiln::passes::ad {

using ir::OpKind;
using ir::Value;

namespace {

Value* matmul(Builder& b, Value* x, Value* y, bool transposeX, bool transposeY) {
  return b.op(OpKind::MatMul, {x, y}, {{"transpose_a", transposeX}, {"transpose_b", transposeY}});
}

// The convolution geometry shared by conv2d and its two gradient ops.
std::vector<ir::NamedAttr> convAttrs(const ir::Node& n) {
  return {{"stride", n.attrInts("stride")},
          {"padding", n.attrInts("padding")},
          {"dilation", n.attrInts("dilation")},
          {"groups", n.attrInt("groups")}};
}

std::vector<ir::NamedAttr> with(std::vector<ir::NamedAttr> attrs, ir::NamedAttr extra) {
  attrs.push_back(std::move(extra));
  return attrs;
}

std::vector<ir::NamedAttr> poolAttrs(const ir::Node& n) {
  return {{"kernel", n.attrInts("kernel")}, {"stride", n.attrInts("stride")}, {"padding", n.attrInts("padding")}};
}

}  // namespace

// y = A·B with A = op(a), B = op(b) (op transposes the last two dims when the flag is set) and
// broadcast batch dims: dA = dy·Bᵀ and dB = Aᵀ·dy. A transposed operand takes the transpose of its
// adjoint, (dy·Bᵀ)ᵀ = B·dyᵀ and (Aᵀ·dy)ᵀ = dyᵀ·A, so every case is one matmul whose flags absorb
// the transposes instead of permute nodes. Each is summed over the batch dims its operand was
// broadcast along (set() does that).
void gradMatMul(GradContext& ctx) {
  Value *a = ctx.x(0), *b = ctx.x(1), *dy = ctx.dy;
  bool ta = ctx.node.attrBool("transpose_a"), tb = ctx.node.attrBool("transpose_b");
  if (ctx.wants(0)) ctx.set(0, ta ? matmul(ctx.b, b, dy, tb, true) : matmul(ctx.b, dy, b, false, !tb));
  if (ctx.wants(1)) ctx.set(1, tb ? matmul(ctx.b, dy, a, true, ta) : matmul(ctx.b, a, dy, !ta, false));
}

void gradConv2d(GradContext& ctx) {
  Value *x = ctx.x(0), *w = ctx.x(1);
  if (ctx.wants(0))
    ctx.set(0, ctx.b.op(OpKind::Conv2dGradInput, {ctx.dy, w},
                        with(convAttrs(ctx.node), {"input_shape", x->type.shape})));
  if (ctx.wants(1))
    ctx.set(1, ctx.b.op(OpKind::Conv2dGradWeight, {x, ctx.dy},
                        with(convAttrs(ctx.node), {"weight_shape", w->type.shape})));
}

void gradMaxPool2d(GradContext& ctx) {
  ctx.set(0, ctx.b.op(OpKind::MaxPool2dGrad, {ctx.x(0), ctx.dy}, poolAttrs(ctx.node)));
}

void gradAvgPool2d(GradContext& ctx) {
  auto attrs = with(poolAttrs(ctx.node), {"input_shape", ctx.x(0)->type.shape});
  attrs.push_back({"count_include_pad", ctx.node.attrBool("count_include_pad")});
  ctx.set(0, ctx.b.op(OpKind::AvgPool2dGrad, {ctx.dy}, std::move(attrs)));
}

// r = conv2d_grad_input(g, w) is the adjoint of x ↦ conv2d(x, w), so <G, r> = <conv2d(G, w), g>:
// dg = conv2d(G, w) and dw = conv2d_grad_weight(G, g).
void gradConv2dGradInput(GradContext& ctx) {
  Value *g = ctx.x(0), *w = ctx.x(1);
  if (ctx.wants(0)) ctx.set(0, ctx.b.op(OpKind::Conv2d, {ctx.dy, w}, convAttrs(ctx.node)));
  if (ctx.wants(1))
    ctx.set(1, ctx.b.op(OpKind::Conv2dGradWeight, {ctx.dy, g},
                        with(convAttrs(ctx.node), {"weight_shape", w->type.shape})));
}

// r = conv2d_grad_weight(x, g) is the adjoint of w ↦ conv2d(x, w), so <G, r> = <conv2d(x, G), g>:
// dx = conv2d_grad_input(g, G) and dg = conv2d(x, G).
void gradConv2dGradWeight(GradContext& ctx) {
  Value *x = ctx.x(0), *g = ctx.x(1);
  if (ctx.wants(0))
    ctx.set(0, ctx.b.op(OpKind::Conv2dGradInput, {g, ctx.dy},
                        with(convAttrs(ctx.node), {"input_shape", x->type.shape})));
  if (ctx.wants(1)) ctx.set(1, ctx.b.op(OpKind::Conv2d, {x, ctx.dy}, convAttrs(ctx.node)));
}

// avg_pool2d_grad is the adjoint of avg_pool2d (same windows and divisors), so its own adjoint is
// avg_pool2d again.
void gradAvgPool2dGrad(GradContext& ctx) {
  auto attrs = poolAttrs(ctx.node);
  attrs.push_back({"count_include_pad", ctx.node.attrBool("count_include_pad")});
  ctx.set(0, ctx.b.op(OpKind::AvgPool2d, {ctx.dy}, std::move(attrs)));
}

}  // namespace kiln::passes::ad
