// Rules for losses: cross_entropy, mse, bce_with_logits. Each computes a per-element loss, then
// applies the node's `reduction` (mean, sum or none).
#include "passes/decompose/Builder.h"

namespace kiln::passes::decomp {

using ir::OpKind;
using ir::Value;

Value* decomposeCrossEntropy(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value *logits = xs[0], *labels = xs[1];
  int64_t classAxis = logits->type.rank() - 1;
  Value* logProbs = b.logSoftmax(logits, classAxis);
  // Selecting each row's label through a one-hot mask keeps the whole loss elementwise plus one
  // reduction, which fuses into a single kernel. A select rather than a multiply, so a -inf logit
  // of another class (a masked class) gives 0, not -inf * 0 = NaN. A label out of range selects
  // nothing (loss 0), as documented at the op.
  Value* hot = b.op(OpKind::OneHot, {labels},
                    {{"num_classes", logits->type.shape[classAxis]}, {"dtype", DType::boolean}});
  Value* masked = b.op(OpKind::Select, {hot, logProbs, b.constant(0.0, logits->type.dtype)});
  Value* picked = b.reduce(OpKind::ReduceSum, masked, {classAxis}, false);
  double smoothing = node.attrFloat("label_smoothing");
  if (smoothing > 0) {
    // PyTorch's label smoothing: the target is (1-e) on the label plus e/C on every class.
    DType t = logits->type.dtype;
    Value* all = b.reduce(OpKind::ReduceSum, logProbs, {classAxis}, false);
    double classes = static_cast<double>(logits->type.shape[classAxis]);
    picked = b.add(b.mul(picked, b.constant(1 - smoothing, t)), b.mul(all, b.constant(smoothing / classes, t)));
  }
  return b.reduceLoss(b.unary(OpKind::Neg, picked), node.attrStr("reduction"));
}

Value* decomposeMse(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value* d = b.sub(xs[0], xs[1]);
  return b.reduceLoss(b.mul(d, d), node.attrStr("reduction"));
}

Value* decomposeBceWithLogits(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value *x = xs[0], *y = xs[1];
  // max(x, 0) - x*y + log(1 + exp(-|x|)): exp never sees a positive argument, so no overflow.
  Value* linear = b.sub(b.unary(OpKind::Relu, x), b.mul(x, y));
  Value* e = b.unary(OpKind::Exp, b.unary(OpKind::Neg, b.unary(OpKind::Abs, x)));
  Value* softplus = b.unary(OpKind::Log, b.add(e, b.constant(1.0, x->type.dtype)));
  return b.reduceLoss(b.add(linear, softplus), node.attrStr("reduction"));
}

}  // namespace kiln::passes::decomp
