// Internal to buildTrainingStep: f16 dynamic loss scaling written into the training graph (the
// semantics are in passes/TrainingStep.h and docs/AUTODIFF.md). Not a public API.
#pragma once

#include "passes/TrainingStep.h"
#include "passes/decompose/Builder.h"

#include <vector>

namespace kiln::passes::lossscale {

/// The scale and its state for one training step under construction. Use in this order:
/// seed(loss) → appendGradients with that seed → unscale(grads) → guard(...) on every update.
class DynamicLossScaling {
 public:
  /// Adds the state parameters `amp.loss_scale` (f32[], c.initialScale) and `amp.good_steps`
  /// (f32[], zeros). Errors: a scale below 1 or beyond f32, an interval below 1 or above 2^24.
  DynamicLossScaling(ir::Graph& g, const LossScaleConfig& c);

  /// The scale in the loss's type: the backward pass's seed, so it computes the gradients of
  /// loss * scale.
  ir::Value* seed(const ir::Value* loss);
  /// Given the gradients of loss * scale: computes whether all of them are finite, divides them
  /// by the scale (in place), adds the updates of the scale and the good-step count and the output
  /// `amp.skipped`. Called once.
  void unscale(std::vector<ir::Value*>& grads);
  /// select(finite, v, param): `param`'s new value when the step is taken, its old one otherwise.
  ir::Value* guard(ir::Value* param, ir::Value* v);

 private:
  ir::Graph& g_;
  decomp::Builder b_;
  int64_t growthInterval_;
  ir::Value* scale_;
  ir::Value* goodSteps_;
  ir::Value* finite_ = nullptr;
};

}  // namespace kiln::passes::lossscale
