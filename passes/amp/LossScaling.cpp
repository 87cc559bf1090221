// Dynamic loss scaling as graph nodes: the seed, the finiteness flag, the unscaled gradients, the
// guarded updates and the scale's own update (semantics in passes/TrainingStep.h).
#include "passes/amp/LossScaling.h"

#include <cfloat>

namespace kiln::passes::lossscale {

using ir::OpKind;
using ir::Value;

namespace {

/// The largest power of two in f32: the scale's ceiling, so doubling never makes it infinite.
constexpr double kMaxScale = 0x1p127;

double largestFinite(DType t) {
  switch (t) {
    case DType::f16: return 65504.0;
    case DType::bf16: return 0x1.FEp127;
    case DType::f64: return DBL_MAX;
    default: return FLT_MAX;
  }
}

}  // namespace

DynamicLossScaling::DynamicLossScaling(ir::Graph& g, const LossScaleConfig& c)
    : g_(g), b_(g, SourceLoc{"<loss scaling>", 0, 0}), growthInterval_(c.growthInterval) {
  KILN_CHECK(c.initialScale >= 1 && c.initialScale <= FLT_MAX, "loss scaling: the initial scale {} is not in [1, {}]",
             c.initialScale, FLT_MAX);
  KILN_CHECK(c.growthInterval >= 1 && c.growthInterval <= (int64_t{1} << 24),
             "loss scaling: the growth interval {} is not in [1, 2^24]", c.growthInterval);
  ir::Initializer init;
  init.kind = ir::Initializer::Kind::Constant;
  init.a = c.initialScale;
  scale_ = g.addParam("amp.loss_scale", ir::TensorType{DType::f32, {}}, init);
  goodSteps_ = g.addParam("amp.good_steps", ir::TensorType{DType::f32, {}}, ir::Initializer{});
}

Value* DynamicLossScaling::seed(const Value* loss) {
  DType t = loss->type.dtype;
  return t == DType::f32 ? scale_ : b_.op(OpKind::Cast, {scale_}, {{"dtype", t}});
}

void DynamicLossScaling::unscale(std::vector<Value*>& grads) {
  KILN_ASSERT(finite_ == nullptr, "loss scaling: unscale called twice");
  // max(|g|) <= the largest finite value of g's type holds exactly when no element of g is inf or
  // NaN (a NaN makes the maximum NaN, which compares false). Nothing here can overflow, and no
  // valid simplification (unlike folding x*0 or x-x to 0) can remove the check.
  for (Value* grad : grads) {
    DType t = grad->type.dtype;
    Value* maxAbs = b_.reduce(OpKind::ReduceMax, b_.unary(OpKind::Abs, grad), decomp::allAxes(grad->type.rank()),
                              false);
    Value* ok = b_.op(OpKind::Le, {maxAbs, b_.constant(largestFinite(t), t)});
    finite_ = finite_ ? b_.op(OpKind::And, {finite_, ok}) : ok;
  }
  KILN_ASSERT(finite_ != nullptr, "loss scaling: no gradients");
  g_.nameValue(finite_, "amp.grads_finite");

  Value* inverse = b_.unary(OpKind::Reciprocal, scale_);
  for (Value*& grad : grads) {
    DType t = grad->type.dtype;
    grad = b_.mul(grad, t == DType::f32 ? inverse : b_.op(OpKind::Cast, {inverse}, {{"dtype", t}}));
  }

  // A finite step counts; the growthInterval-th in a row doubles the scale and restarts the count.
  // An overflow halves the scale (down to 1) and restarts the count.
  Value* one = b_.constant(1, DType::f32);
  Value* zero = b_.constant(0, DType::f32);
  Value* good = b_.add(goodSteps_, one);
  Value* grow = b_.op(OpKind::Ge, {good, b_.constant(static_cast<double>(growthInterval_), DType::f32)});
  Value* grown = b_.op(OpKind::Min, {b_.scale(scale_, 2), b_.constant(kMaxScale, DType::f32)});
  Value* shrunk = b_.op(OpKind::Max, {b_.scale(scale_, 0.5), one});
  Value* keptScale = b_.op(OpKind::Select, {grow, grown, scale_});
  g_.addUpdate(scale_, b_.op(OpKind::Select, {finite_, keptScale, shrunk}));
  g_.addUpdate(goodSteps_, b_.op(OpKind::Select, {finite_, b_.op(OpKind::Select, {grow, zero, good}), zero}));
  g_.addOutput("amp.skipped", b_.op(OpKind::Cast, {b_.unary(OpKind::Not, finite_)}, {{"dtype", DType::f32}}));
}

Value* DynamicLossScaling::guard(Value* param, Value* v) {
  KILN_ASSERT(finite_ != nullptr, "loss scaling: guard called before unscale");
  return b_.op(OpKind::Select, {finite_, v, param});
}

}  // namespace kiln::passes::lossscale
