// From a forward graph with a scalar loss to a whole training step in one graph: decompose,
// gradients of the loss with respect to every float parameter (autodiff), optional clipping by the
// global gradient norm, and the optimizer's update of parameters and optimizer state, written as
// primitive ops and `update` statements (ir::Update), so one compiled program runs the step.
//
// Semantics follow PyTorch's torch.optim:
//   SGD:   g = grad + wd*w;  buf = momentum*buf + g;  g = nesterov ? g + momentum*buf : buf (if momentum);
//          w = w - lr*g
//   Adam:  g = grad + wd*w;  t = t + 1;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//          w = w - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps), evaluated as
//          w - (lr / (1-b1^t)) * m / (sqrt(v * (1 / (1-b2^t))) + eps): one division per element
//   AdamW: as Adam without wd in g, and w = w - lr*wd*w first (decoupled weight decay).
// The learning rate is a graph input `lr` (f32[]), so schedules need no recompile. Optimizer state
// is parameters named after their weight (`fc1.weight.momentum`, `fc1.weight.adam_m`, `.adam_v`)
// plus the step counter `optim.step` (f32[]; exact up to 2^24 steps), all initialized to zeros.
// A graph that draws random numbers (dropout) gets the parameter `rng.step` (i64[], zeros, +1 per
// step) as the step operand of every random op that has none, so each step draws fresh masks.
//
// Mixed precision (`precision`): bf16 and f16 run the amp pass (passes/Amp.h) over the whole step
// after differentiation, so forward and backward contractions take low-precision operands while
// the loss, the gradients and the optimizer stay f32. f16 adds dynamic loss scaling in the graph:
//   state: scale = param amp.loss_scale (f32[], initialScale), good = param amp.good_steps (f32[])
//   the backward pass is seeded with scale (the gradients of loss * scale), then each gradient is
//   multiplied by 1/scale;
//   finite = every gradient element is finite (max |g| <= the type's largest finite value);
//   every parameter and optimizer-state update (optim.step included) is select(finite, new, old);
//   finite:  good += 1; when good reaches growthInterval: scale = min(2*scale, 2^127), good = 0
//   else:    scale = max(scale / 2, 1), good = 0
// and the output `amp.skipped` (f32[]) is 1 for a skipped step, 0 otherwise. The loss output is
// the unscaled loss. (rng.step advances on a skipped step too, so the next try draws new masks.)
#pragma once

#include "ir/Graph.h"
#include "passes/Pass.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::passes {

struct OptimizerConfig {
  enum class Kind { Sgd, Adam, AdamW };
  Kind kind = Kind::Sgd;
  double momentum = 0;     // SGD
  bool nesterov = false;   // SGD (needs momentum > 0)
  double weightDecay = 0;  // SGD and Adam: L2 added to the gradient; AdamW: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam, AdamW
  double clipNorm = 0;     // > 0: scale all gradients so their global L2 norm is at most this
};

/// "sgd", "adam", "adamw" → kind (kiln::Error listing the names otherwise).
OptimizerConfig::Kind optimizerKindFromName(std::string_view name);

/// f16 dynamic loss scaling (see above): the first scale, and how many finite steps in a row
/// double it (PyTorch's GradScaler defaults).
struct LossScaleConfig {
  double initialScale = 65536;  // in [1, FLT_MAX]
  int64_t growthInterval = 2000;  // in [1, 2^24]
};

struct TrainingStepOptions {
  std::string lossOutput = "loss";
  OptimizerConfig optimizer;
  /// f32: no change; bf16, f16: the amp pass over the whole step; f16 adds loss scaling.
  Precision precision = Precision::F32;
  LossScaleConfig lossScale;  // f16 only
};

/// Rewrites the forward graph `g` (with a scalar float output `lossOutput`) into a training step.
/// Outputs are kept (loss, logits, …). Returns autodiff's warnings (parameters the loss does not
/// depend on). Errors: no such output, a non-scalar loss, inconsistent options.
std::vector<std::string> buildTrainingStep(ir::Graph& g, const TrainingStepOptions& options);

}  // namespace kiln::passes
