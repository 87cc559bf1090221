// Internal to the autodiff pass: what a gradient rule sees, the shared helpers several rules are
// made of (summing a broadcast gradient back to an operand's shape, zeros, axis lists), and the
// rule table. Not a public API.
#pragma once

#include "ir/Graph.h"
#include "passes/decompose/Builder.h"

#include <span>
#include <vector>

namespace kiln::passes::ad {

using decomp::Builder;

/// One application of a rule: the forward node, the adjoint of its result, and one slot per
/// operand. The rule fills the slots of the operands that want a gradient (wants(i)); the others
/// may stay null, so no dead backward nodes are emitted for data inputs or integer operands.
struct GradContext {
  Builder& b;  // appends at the forward node's source location
  const ir::Node& node;
  ir::Value* dy;
  std::vector<bool> needs;
  std::vector<ir::Value*> dx;

  ir::Value* x(size_t i) const { return node.operands[i]; }
  ir::Value* y() const { return node.result; }
  bool wants(size_t i) const { return needs[i]; }
  /// Sets operand i's gradient; `g` may still carry the forward result's (broadcast) shape and is
  /// summed back to the operand's shape here, so binary rules never repeat that step.
  void set(size_t i, ir::Value* g);
};

using GradRule = void (*)(GradContext&);

/// The rule for `op`, or nullptr when it has none (see opsWithoutGradient()).
GradRule findGradRule(ir::OpKind op);

// ---- helpers ------------------------------------------------------------------------------------

/// Sums `g` (a shape that `target` broadcasts to) back to `target`: reduce_sum with keepdim over
/// the broadcast axes, then a reshape dropping the leading ones. Returns `g` when shapes agree.
ir::Value* sumToShape(Builder& b, ir::Value* g, const ir::Shape& target);
/// A tensor of zeros of `type` (one splat constant).
ir::Value* zeros(Builder& b, const ir::TensorType& type);
/// A tensor of ones of `type` (the seed adjoint of the loss).
ir::Value* ones(Builder& b, const ir::TensorType& type);
/// `axes` made non-negative against `rank`; an empty list means every axis (the reduction ops'
/// convention).
ir::Ints normalizeAxes(const ir::Ints& axes, int64_t rank);
/// `shape` with the dimensions in `axes` set to 1 (the keepdim shape of a reduction).
ir::Shape keptShape(const ir::Shape& shape, const ir::Ints& axes);

// ---- rules, by family ---------------------------------------------------------------------------
// Elementwise.cpp
void gradNeg(GradContext&);
void gradAbs(GradContext&);
void gradExp(GradContext&);
void gradLog(GradContext&);
void gradSqrt(GradContext&);
void gradRsqrt(GradContext&);
void gradReciprocal(GradContext&);
void gradTanh(GradContext&);
void gradSigmoid(GradContext&);
void gradSin(GradContext&);
void gradCos(GradContext&);
void gradErf(GradContext&);
void gradRelu(GradContext&);
void gradCast(GradContext&);
void gradAdd(GradContext&);
void gradSub(GradContext&);
void gradMul(GradContext&);
void gradDiv(GradContext&);
void gradPow(GradContext&);
void gradMax(GradContext&);
void gradMin(GradContext&);
void gradSelect(GradContext&);
// Reduce.cpp
void gradReduceSum(GradContext&);
void gradReduceMaxMin(GradContext&);
// Movement.cpp
void gradReshape(GradContext&);
void gradPermute(GradContext&);
void gradBroadcast(GradContext&);
void gradSlice(GradContext&);
void gradConcat(GradContext&);
void gradPad(GradContext&);
void gradGather(GradContext&);
void gradSliceGrad(GradContext&);
void gradScatterAdd(GradContext&);
// Contraction.cpp
void gradMatMul(GradContext&);
void gradConv2d(GradContext&);
void gradMaxPool2d(GradContext&);
void gradAvgPool2d(GradContext&);
void gradConv2dGradInput(GradContext&);
void gradConv2dGradWeight(GradContext&);
void gradAvgPool2dGrad(GradContext&);

}  // namespace kiln::passes::ad
