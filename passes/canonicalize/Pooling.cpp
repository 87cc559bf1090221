// The ReLU gradient mask moved through max pooling. Backward of max_pool2d(relu(h)) masks the
// pooled gradient scattered back to h's size:
//
//     select(gt(h, 0), max_pool2d_grad(relu(h), dy), 0)
//   → max_pool2d_grad(relu(h), select(gt(max_pool2d(relu(h)), 0), dy, 0))
//
// so the mask and the select work on the pooled tensor (a quarter of the elements for 2×2
// windows), the full-size mask is no longer needed, and the scattered gradient is the masked one.
// max_pool2d(relu(h)) is the forward's own pooling (CSE finds it). Bit for bit the same:
// max_pool2d_grad adds each window's dy at the window's first maximum p of relu(h), and there
// the window's maximum is relu(h)[p], which is > 0 exactly when h[p] > 0 (relu(-0.0) = 0.0; a NaN
// is the maximum, and NaN > 0 is false on both sides). Positions no window picks get 0 on both
// sides, and a position several windows pick sees the same test for each.
#include "passes/canonicalize/Rewriter.h"

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

namespace {

bool isZero(const Value* v) { return isConstantEqualTo(v, 0.0) || isConstantEqualTo(v, -0.0); }

}  // namespace

Value* maskBeforeMaxPoolGrad(Rewriter& rw, const Candidate& c) {
  // select(gt(h, ±0), max_pool2d_grad(relu(h), dy), +0), the scattered gradient read only here.
  if (!isConstantEqualTo(c.operands[2], 0.0) || !c.isSoleUse(1)) return nullptr;
  const ir::Node* mask = producerOf(c.operands[0]);
  const ir::Node* grad = producerOf(c.operands[1]);
  if (mask == nullptr || mask->op != OpKind::Gt || !isZero(mask->operands[1])) return nullptr;
  if (grad == nullptr || grad->op != OpKind::MaxPool2dGrad) return nullptr;
  Value* h = mask->operands[0];
  Value* relu = grad->operands[0];
  const ir::Node* r = producerOf(relu);
  if (r == nullptr || r->op != OpKind::Relu || r->operands[0] != h || c.type != relu->type) return nullptr;
  std::vector<ir::NamedAttr> window{{"kernel", grad->attrInts("kernel")},
                                    {"stride", grad->attrInts("stride")},
                                    {"padding", grad->attrInts("padding")}};
  Value* pooled = rw.build(OpKind::MaxPool2d, {relu}, window);
  const ir::TensorType scalar{relu->type.dtype, {}};
  Value* kept = rw.build(OpKind::Gt, {pooled, rw.constant(scalar, {0.0})});
  Value* dy = rw.build(OpKind::Select, {kept, grad->operands[1], rw.constant(scalar, {0.0})});
  return rw.build(OpKind::MaxPool2dGrad, {relu, dy}, window);
}

}  // namespace kiln::passes::canon
