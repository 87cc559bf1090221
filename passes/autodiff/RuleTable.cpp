// The gradient rule table (the one place saying which rule differentiates which op), the list of
// ops without a gradient and why, and the helpers the rules share.
#include "passes/Autodiff.h"
#include "passes/autodiff/GradRules.h"

#include <algorithm>

namespace kiln::passes {

using ir::OpKind;

namespace {

constexpr NoGradient kNoGradient[] = {
    {OpKind::Floor, "piecewise constant: its derivative is zero almost everywhere (undefined at integers), so no "
                    "gradient flows through it"},
    {OpKind::Not, "bool operand and result"},
    {OpKind::And, "bool operands and result"},
    {OpKind::Or, "bool operands and result"},
    {OpKind::Eq, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::Ne, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::Lt, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::Le, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::Gt, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::Ge, "comparison: bool result, piecewise constant in its operands"},
    {OpKind::ArgMax, "integer (i64) result: an index is piecewise constant in the data"},
    {OpKind::ArgMin, "integer (i64) result: an index is piecewise constant in the data"},
    {OpKind::OneHot, "its operand is integer indices"},
    {OpKind::StopGradient, "detach: blocks the gradient by definition"},
    {OpKind::MaxPool2dGrad, "second derivative of max pooling: zero almost everywhere in x, and linear in dy "
                            "through a per-window argmax routing that no primitive expresses yet"},
    {OpKind::Constant, "source: no operands"},
    {OpKind::Iota, "source: no operands (integer by default)"},
    {OpKind::Random, "source: the draws depend on no value but the optional step operand, an integer counter"},
};

struct RuleEntry {
  OpKind op;
  ad::GradRule rule;
};

// Every primitive op not listed in kNoGradient has exactly one entry here (AutodiffTest checks).
constexpr RuleEntry kRules[] = {
    {OpKind::Neg, ad::gradNeg},
    {OpKind::Abs, ad::gradAbs},
    {OpKind::Exp, ad::gradExp},
    {OpKind::Log, ad::gradLog},
    {OpKind::Sqrt, ad::gradSqrt},
    {OpKind::Rsqrt, ad::gradRsqrt},
    {OpKind::Reciprocal, ad::gradReciprocal},
    {OpKind::Tanh, ad::gradTanh},
    {OpKind::Sigmoid, ad::gradSigmoid},
    {OpKind::Sin, ad::gradSin},
    {OpKind::Cos, ad::gradCos},
    {OpKind::Erf, ad::gradErf},
    {OpKind::Relu, ad::gradRelu},
    {OpKind::Cast, ad::gradCast},
    {OpKind::Add, ad::gradAdd},
    {OpKind::Sub, ad::gradSub},
    {OpKind::Mul, ad::gradMul},
    {OpKind::Div, ad::gradDiv},
    {OpKind::Pow, ad::gradPow},
    {OpKind::Max, ad::gradMax},
    {OpKind::Min, ad::gradMin},
    {OpKind::Select, ad::gradSelect},
    {OpKind::ReduceSum, ad::gradReduceSum},
    {OpKind::ReduceMax, ad::gradReduceMaxMin},
    {OpKind::ReduceMin, ad::gradReduceMaxMin},
    {OpKind::Reshape, ad::gradReshape},
    {OpKind::Permute, ad::gradPermute},
    {OpKind::Broadcast, ad::gradBroadcast},
    {OpKind::Slice, ad::gradSlice},
    {OpKind::Concat, ad::gradConcat},
    {OpKind::Pad, ad::gradPad},
    {OpKind::Gather, ad::gradGather},
    {OpKind::MatMul, ad::gradMatMul},
    {OpKind::Conv2d, ad::gradConv2d},
    {OpKind::MaxPool2d, ad::gradMaxPool2d},
    {OpKind::AvgPool2d, ad::gradAvgPool2d},
    // The gradient helpers are linear, so their own rules are cheap and keep gradients of
    // gradients possible.
    {OpKind::SliceGrad, ad::gradSliceGrad},
    {OpKind::ScatterAdd, ad::gradScatterAdd},
    {OpKind::Conv2dGradInput, ad::gradConv2dGradInput},
    {OpKind::Conv2dGradWeight, ad::gradConv2dGradWeight},
    {OpKind::AvgPool2dGrad, ad::gradAvgPool2dGrad},
};

}  // namespace

std::span<const NoGradient> opsWithoutGradient() { return kNoGradient; }

namespace ad {

GradRule findGradRule(OpKind op) {
  for (const RuleEntry& e : kRules)
    if (e.op == op) return e.rule;
  return nullptr;
}

void GradContext::set(size_t i, ir::Value* g) {
  KILN_ASSERT(i < dx.size() && dx[i] == nullptr, "gradient of operand {} of '{}' set twice", i, node.info().name);
  const ir::TensorType& want = node.operands[i]->type;
  g = sumToShape(b, g, want.shape);
  KILN_ASSERT(g->type == want, "gradient rule of '{}' gave {} for operand {} of type {}", node.info().name,
              g->type.str(), i, want.str());
  dx[i] = g;
}

ir::Value* sumToShape(Builder& b, ir::Value* g, const ir::Shape& target) {
  const ir::Shape& s = g->type.shape;
  if (s == target) return g;
  KILN_ASSERT(s.size() >= target.size(), "cannot sum {} back to {}", ir::shapeStr(s), ir::shapeStr(target));
  size_t lead = s.size() - target.size();
  ir::Ints axes;
  for (size_t i = 0; i < s.size(); ++i) {
    bool broadcastAxis = i < lead || (target[i - lead] == 1 && s[i] != 1);
    KILN_ASSERT(broadcastAxis || i < lead || target[i - lead] == s[i], "cannot sum {} back to {}",
                ir::shapeStr(s), ir::shapeStr(target));
    if (broadcastAxis) axes.push_back(static_cast<int64_t>(i));
  }
  // keepdim then reshape: one reduction covers both the new leading axes and the size-1 ones.
  ir::Value* r = axes.empty() ? g : b.reduce(OpKind::ReduceSum, g, axes, true);
  return r->type.shape == target ? r : b.reshape(r, target);
}

ir::Value* zeros(Builder& b, const ir::TensorType& type) {
  return b.op(OpKind::Constant, {}, {{"shape", type.shape}, {"dtype", type.dtype}, {"value", ir::Floats{0.0}}});
}

ir::Value* ones(Builder& b, const ir::TensorType& type) {
  return b.op(OpKind::Constant, {}, {{"shape", type.shape}, {"dtype", type.dtype}, {"value", ir::Floats{1.0}}});
}

ir::Ints normalizeAxes(const ir::Ints& axes, int64_t rank) {
  if (axes.empty()) return decomp::allAxes(rank);
  ir::Ints out;
  for (int64_t a : axes) {
    int64_t n = ir::normalizeAxis(a, rank);
    KILN_ASSERT(n >= 0, "axis {} out of range for rank {}", a, rank);
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ir::Shape keptShape(const ir::Shape& shape, const ir::Ints& axes) {
  ir::Shape kept = shape;
  for (int64_t a : axes) kept[a] = 1;
  return kept;
}

}  // namespace ad
}  // namespace kiln::passes
