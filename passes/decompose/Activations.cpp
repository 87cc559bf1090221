// Rules for activations and normalizing reductions: gelu, silu, reduce_mean, softmax, log_softmax.
#include "passes/decompose/Builder.h"

#include <cmath>
#include <numbers>

namespace kiln::passes::decomp {

using ir::OpKind;
using ir::Value;

namespace {
int64_t axisAttr(const ir::Node& node, const Value* x) {
  int64_t axis = ir::normalizeAxis(node.attrInt("axis"), x->type.rank());
  KILN_ASSERT(axis >= 0, "axis of a verified '{}' is out of range", node.info().name);
  return axis;
}
}  // namespace

Value* decomposeGelu(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value* x = xs[0];
  DType t = x->type.dtype;
  Value* phi2;  // 2 * Φ(x)
  if (node.attrStr("approximate") == "tanh") {
    // 1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value* cube = b.mul(b.mul(x, x), x);
    Value* inner = b.add(x, b.scale(cube, 0.044715));
    Value* th = b.unary(OpKind::Tanh, b.scale(inner, std::sqrt(2.0 / std::numbers::pi)));
    phi2 = b.add(th, b.constant(1.0, t));
  } else {
    // 1 + erf(x / sqrt(2))
    Value* e = b.unary(OpKind::Erf, b.scale(x, 1.0 / std::numbers::sqrt2));
    phi2 = b.add(e, b.constant(1.0, t));
  }
  return b.scale(b.mul(x, phi2), 0.5);
}

Value* decomposeSilu(Builder& b, const ir::Node&, std::span<Value* const> xs) {
  return b.mul(xs[0], b.unary(OpKind::Sigmoid, xs[0]));
}

Value* decomposeReduceMean(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value* x = xs[0];
  ir::Ints axes;
  for (int64_t a : node.attrInts("axes")) axes.push_back(ir::normalizeAxis(a, x->type.rank()));
  if (axes.empty()) axes = allAxes(x->type.rank());
  return b.mean(x, axes, node.attrBool("keepdim"));
}

Value* decomposeSoftmax(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  return b.softmax(xs[0], axisAttr(node, xs[0]));
}

Value* decomposeLogSoftmax(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  return b.logSoftmax(xs[0], axisAttr(node, xs[0]));
}

}  // namespace kiln::passes::decomp
