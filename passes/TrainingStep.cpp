#include "passes/TrainingStep.h"

#include "passes/Amp.h"
#include "passes/Autodiff.h"
#include "passes/Canonicalize.h"
#include "passes/Decompose.h"
#include "passes/amp/LossScaling.h"
#include "passes/decompose/Builder.h"

#include <cmath>
#include <optional>

namespace kiln::passes {

using ir::OpKind;
using ir::Value;

OptimizerConfig::Kind optimizerKindFromName(std::string_view name) {
  if (name == "sgd") return OptimizerConfig::Kind::Sgd;
  if (name == "adam") return OptimizerConfig::Kind::Adam;
  if (name == "adamw") return OptimizerConfig::Kind::AdamW;
  KILN_THROW("unknown optimizer '{}' (known: sgd, adam, adamw)", name);
}

namespace {

void checkConfig(const OptimizerConfig& c) {
  KILN_CHECK(c.momentum >= 0 && c.weightDecay >= 0 && c.clipNorm >= 0,
             "optimizer: momentum, weight decay and clip norm must be >= 0");
  KILN_CHECK(!c.nesterov || (c.kind == OptimizerConfig::Kind::Sgd && c.momentum > 0),
             "optimizer: Nesterov momentum needs SGD with momentum > 0");
  KILN_CHECK(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1 && c.eps > 0,
             "optimizer: betas must be in [0, 1) and eps > 0");
}

/// Scales every gradient by min(1, maxNorm / (global L2 norm + 1e-6)), as clip_grad_norm_.
void clipByGlobalNorm(decomp::Builder& b, std::vector<Value*>& grads, double maxNorm) {
  Value* total = nullptr;
  for (Value* g : grads) {
    Value* sq = b.reduce(OpKind::ReduceSum, b.mul(g, g), decomp::allAxes(g->type.rank()), false);
    total = total ? b.add(total, sq) : sq;
  }
  if (!total) return;
  Value* norm = b.unary(OpKind::Sqrt, total);
  DType t = norm->type.dtype;
  Value* factor = b.div(b.constant(maxNorm, t), b.add(norm, b.constant(1e-6, t)));
  factor = b.op(OpKind::Min, {factor, b.constant(1.0, t)});
  for (Value*& g : grads) g = b.mul(g, g->type.dtype == t ? factor : b.op(OpKind::Cast, {factor}, {{"dtype", g->type.dtype}}));
}

/// 1 - beta^t for the f32 step count t. The direct form cancels: 0.999 is not representable in
/// f32 and 1 - f32(0.999) is 1.3e-5 off relative, which Adam's sqrt(v / (1 - beta2^t)) carries into
/// every update. With y = t*ln(beta) (ln taken in double), 1 - e^y = -2*tanh(y/2) / (1 - tanh(y/2)),
/// where every op is well conditioned, so the result is accurate to a few f32 ulps.
Value* oneMinusPow(decomp::Builder& b, double beta, Value* t) {
  if (beta == 0) return b.constant(1, DType::f32);  // ln(0): 1 - 0^t = 1 for t >= 1
  Value* th = b.unary(OpKind::Tanh, b.mul(t, b.constant(std::log(beta) / 2, DType::f32)));
  return b.div(b.mul(th, b.constant(-2, DType::f32)), b.sub(b.constant(1, DType::f32), th));
}

Value* stateParam(ir::Graph& g, const Value* weight, const std::string& suffix) {
  return g.addParam(weight->name + "." + suffix, weight->type, ir::Initializer{}, weight->loc);
}

/// Gives every random op that has no step counter yet the parameter `rng.step` (i64[], zeros),
/// which each step increments, so successive steps draw fresh dropout masks. The forward and the
/// backward read the same random node, so a step's gradient sees that step's mask.
void addRandomStep(ir::Graph& g, decomp::Builder& b) {
  std::vector<ir::Node*> unstepped;
  for (const auto& n : g.nodes())
    if (n->info().has(ir::kRandom) && static_cast<int>(n->operands.size()) < n->info().maxOperands)
      unstepped.push_back(n.get());
  if (unstepped.empty()) return;
  Value* step = g.addParam("rng.step", ir::TensorType{DType::i64, {}}, ir::Initializer{}, {});
  for (ir::Node* n : unstepped) n->operands.push_back(step);  // a parameter precedes every node
  g.addUpdate(step, b.add(step, b.constant(1, DType::i64)));
}

}  // namespace

std::vector<std::string> buildTrainingStep(ir::Graph& g, const TrainingStepOptions& options) {
  const OptimizerConfig& c = options.optimizer;
  checkConfig(c);
  decompose(g);
  const ir::Output* lossOut = g.findOutput(options.lossOutput);
  KILN_CHECK(lossOut != nullptr, "graph @{} has no output '{}' to minimize", g.name(), options.lossOutput);
  std::vector<Value*> weights;
  for (const ir::Param& p : g.params())
    if (isFloat(p.value->type.dtype)) weights.push_back(p.value);
  KILN_CHECK(!weights.empty(), "graph @{} has no float parameters to train", g.name());

  Value* loss = lossOut->value;
  std::optional<lossscale::DynamicLossScaling> scaling;
  if (options.precision == Precision::F16) scaling.emplace(g, options.lossScale);
  GradientResult grads = appendGradients(g, loss, weights, scaling ? scaling->seed(loss) : nullptr);
  decomp::Builder b(g, SourceLoc{"<optimizer>", 0, 0});
  addRandomStep(g, b);
  std::vector<Value*> gs = grads.grads;
  if (scaling) scaling->unscale(gs);
  // With loss scaling, a step whose gradients overflowed leaves every parameter and state as it was.
  auto commit = [&](Value* param, Value* v) { g.addUpdate(param, scaling ? scaling->guard(param, v) : v); };
  if (c.clipNorm > 0) clipByGlobalNorm(b, gs, c.clipNorm);

  Value* lr = g.addInput("lr", ir::TensorType{DType::f32, {}});
  Value* step = nullptr;
  Value* biasFix1 = nullptr;
  Value* biasFix2 = nullptr;
  if (c.kind != OptimizerConfig::Kind::Sgd) {
    Value* t = g.addParam("optim.step", ir::TensorType{DType::f32, {}}, ir::Initializer{}, {});
    step = b.add(t, b.constant(1, DType::f32));
    commit(t, step);
    // 1 - beta^t, computed once for all parameters.
    biasFix1 = oneMinusPow(b, c.beta1, step);
    biasFix2 = oneMinusPow(b, c.beta2, step);
  }

  for (size_t i = 0; i < weights.size(); ++i) {
    Value* w = weights[i];
    Value* grad = gs[i];
    DType t = w->type.dtype;
    auto k = [&](double v) { return b.constant(v, t); };
    Value* lrT = t == DType::f32 ? lr : b.op(OpKind::Cast, {lr}, {{"dtype", t}});
    bool decoupled = c.kind == OptimizerConfig::Kind::AdamW;
    if (c.weightDecay > 0 && !decoupled) grad = b.add(grad, b.mul(w, k(c.weightDecay)));
    Value* base = w;
    if (c.weightDecay > 0 && decoupled) base = b.sub(w, b.mul(b.mul(lrT, k(c.weightDecay)), w));
    Value* delta = nullptr;
    Value* rate = lrT;  // the update is base - rate * delta
    if (c.kind == OptimizerConfig::Kind::Sgd) {
      delta = grad;
      if (c.momentum > 0) {
        Value* buf = stateParam(g, w, "momentum");
        Value* newBuf = b.add(b.mul(buf, k(c.momentum)), grad);
        commit(buf, newBuf);
        delta = c.nesterov ? b.add(grad, b.mul(newBuf, k(c.momentum))) : newBuf;
      }
    } else {
      Value* m = stateParam(g, w, "adam_m");
      Value* v = stateParam(g, w, "adam_v");
      Value* newM = b.add(b.mul(m, k(c.beta1)), b.mul(grad, k(1 - c.beta1)));
      Value* newV = b.add(b.mul(v, k(c.beta2)), b.mul(b.mul(grad, grad), k(1 - c.beta2)));
      commit(m, newM);
      commit(v, newV);
      Value* fix1 = t == DType::f32 ? biasFix1 : b.op(OpKind::Cast, {biasFix1}, {{"dtype", t}});
      Value* fix2 = t == DType::f32 ? biasFix2 : b.op(OpKind::Cast, {biasFix2}, {{"dtype", t}});
      // lr · m̂ / (sqrt(v̂) + eps) with m̂ = m / fix1, v̂ = v / fix2, the bias corrections folded
      // into scalars: lr / fix1 and 1 / fix2 once per step, so each element divides once (three
      // element-wise divisions cost as much as the rest of the update together).
      rate = b.div(lrT, fix1);
      Value* vHat = b.mul(newV, b.div(k(1), fix2));
      delta = b.div(newM, b.add(b.unary(OpKind::Sqrt, vHat), k(c.eps)));
    }
    commit(w, b.sub(base, b.mul(rate, delta)));
  }
  PassContext ampContext;
  ampContext.precision = options.precision;
  // Transposes become matmul flags first (the pipeline's canonicalize would come too late for the
  // casts amp puts between them): amp then casts a layer's weight as it is stored, not a
  // transposed copy of it, and a weight gradient's product is computed in the parameter's layout,
  // so the optimizer's update stays in its epilogue.
  if (options.precision != Precision::F32) canonicalize(g, ampContext);
  amp(g, ampContext);
  return grads.warnings;
}

}  // namespace kiln::passes
