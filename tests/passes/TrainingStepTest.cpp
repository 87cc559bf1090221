// The training step (passes/TrainingStep.h): each optimizer's parameter and state updates over
// three steps against PyTorch's torch.optim formulas evaluated here in double precision; one step
// of every zoo model with a loss lowers the loss and prints/parses back to the same text; and the
// user errors.
//
// The hand-made graph is loss = reduce_sum(w * x), so the gradient with respect to w is exactly x
// and the expected trajectories need no autodiff of their own.
#include "passes/TrainingStep.h"

#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::testing {
namespace {

using passes::OptimizerConfig;
using Kind = OptimizerConfig::Kind;

constexpr double kW0 = 0.5;                  // every element of w starts here (constant initializer)
const std::vector<double> kX = {1.5, -2.0};  // the gradient of the loss with respect to w
const std::vector<double> kLr = {0.1, 0.05, 0.2};  // one learning rate per step: lr is an input

rt::HostTensor scalarF32(double v) {
  rt::HostTensor t(DType::f32, {});
  t.set(0, v);
  return t;
}

std::vector<double> values(const rt::HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.at(i);
  return v;
}

/// param w f32[2] = constant(0.5); input x f32[2]; output loss = reduce_sum(w * x).
ir::Graph linearLossGraph() {
  ir::Graph g("linear_loss");
  ir::Initializer init;
  init.kind = ir::Initializer::Kind::Constant;
  init.a = kW0;
  ir::Value* w = g.addParam("w", {DType::f32, {2}}, init);
  ir::Value* x = g.addInput("x", {DType::f32, {2}});
  ir::Value* wx = g.addNode(ir::OpKind::Mul, {w, x}, {});
  std::vector<ir::NamedAttr> all = {{"axes", ir::Ints{}}};
  g.addOutput("loss", g.addNode(ir::OpKind::ReduceSum, {wx}, all));
  return g;
}

/// torch.optim's update for one element, in doubles. SGD: dampening 0; clip_grad_norm_ scales
/// the gradient by min(1, clip / (norm + 1e-6)) before the optimizer sees it.
struct Reference {
  OptimizerConfig c;
  std::vector<double> w = std::vector<double>(2, kW0), buf = std::vector<double>(2, 0.0),
                      m = std::vector<double>(2, 0.0), v = std::vector<double>(2, 0.0);
  int step = 0;

  void update(double lr) {
    ++step;
    double scale = 1;
    if (c.clipNorm > 0) {
      double norm = std::sqrt(kX[0] * kX[0] + kX[1] * kX[1]);
      scale = std::min(1.0, c.clipNorm / (norm + 1e-6));
    }
    for (size_t i = 0; i < 2; ++i) {
      double g = kX[i] * scale;
      if (c.kind == Kind::AdamW) w[i] *= 1 - lr * c.weightDecay;
      else g += c.weightDecay * w[i];
      if (c.kind == Kind::Sgd) {
        if (c.momentum > 0) {
          buf[i] = step == 1 ? g : c.momentum * buf[i] + g;
          g = c.nesterov ? g + c.momentum * buf[i] : buf[i];
        }
        w[i] -= lr * g;
        continue;
      }
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
      double mHat = m[i] / (1 - std::pow(c.beta1, step)), vHat = v[i] / (1 - std::pow(c.beta2, step));
      w[i] -= lr * mHat / (std::sqrt(vHat) + c.eps);
    }
  }
};

void expectClose(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << what << "[" << i << "]";
}

/// Builds the training step for `c`, runs three steps carrying the parameters forward, and checks
/// w and the optimizer state after each against Reference.
void checkTrajectory(const OptimizerConfig& c) {
  ir::Graph g = linearLossGraph();
  passes::TrainingStepOptions options;
  options.optimizer = c;
  std::vector<std::string> warnings = passes::buildTrainingStep(g, options);
  EXPECT_TRUE(warnings.empty()) << fmt::format("{}", fmt::join(warnings, "\n"));
  std::vector<std::string> errors = ir::verifyGraph(g);
  ASSERT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n")) << "\n" << ir::printGraph(g);

  bool sgd = c.kind == Kind::Sgd;
  EXPECT_EQ(g.findParam("w.momentum") != nullptr, sgd && c.momentum > 0);
  EXPECT_EQ(g.findParam("w.adam_m") != nullptr, !sgd);
  EXPECT_EQ(g.findParam("w.adam_v") != nullptr, !sgd);
  EXPECT_EQ(g.findParam("optim.step") != nullptr, !sgd);
  EXPECT_EQ(g.updates().size(), g.params().size()) << "every parameter and state is updated";

  Reference ref{c};
  interp::TensorMap params = interp::initializeParams(g);
  interp::TensorMap inputs{{"x", rt::HostTensor::fromDoubles(DType::f32, {2}, kX)}};
  for (size_t s = 0; s < kLr.size(); ++s) {
    inputs.insert_or_assign("lr", scalarF32(kLr[s]));
    interp::TensorMap updated;
    interp::TensorMap out = interp::run(g, inputs, params, &updated);
    // The loss is that of the parameters before the step.
    EXPECT_NEAR(out.at("loss").at(0), ref.w[0] * kX[0] + ref.w[1] * kX[1], 1e-6) << "step " << s + 1;
    ref.update(kLr[s]);
    std::string at = fmt::format(" after step {}", s + 1);
    ASSERT_EQ(updated.size(), g.params().size());
    expectClose(values(updated.at("w")), ref.w, "w" + at);
    if (sgd && c.momentum > 0) expectClose(values(updated.at("w.momentum")), ref.buf, "w.momentum" + at);
    if (!sgd) {
      expectClose(values(updated.at("w.adam_m")), ref.m, "w.adam_m" + at);
      expectClose(values(updated.at("w.adam_v")), ref.v, "w.adam_v" + at);
      EXPECT_EQ(updated.at("optim.step").at(0), static_cast<double>(s + 1)) << at;
    }
    for (auto& [name, t] : updated) params.insert_or_assign(name, std::move(t));
  }
}

OptimizerConfig sgd(double momentum = 0, bool nesterov = false, double weightDecay = 0) {
  OptimizerConfig c;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weightDecay = weightDecay;
  return c;
}

OptimizerConfig adam(Kind kind, double weightDecay = 0) {
  OptimizerConfig c;
  c.kind = kind;
  c.weightDecay = weightDecay;
  return c;
}

TEST(TrainingStep, SgdPlain) { checkTrajectory(sgd()); }
TEST(TrainingStep, SgdMomentum) { checkTrajectory(sgd(0.9)); }
TEST(TrainingStep, SgdNesterov) { checkTrajectory(sgd(0.9, true)); }
TEST(TrainingStep, SgdWeightDecay) { checkTrajectory(sgd(0, false, 0.1)); }
TEST(TrainingStep, SgdMomentumAndWeightDecay) { checkTrajectory(sgd(0.9, false, 0.1)); }
TEST(TrainingStep, Adam) { checkTrajectory(adam(Kind::Adam)); }
TEST(TrainingStep, AdamOtherBetas) {
  OptimizerConfig c = adam(Kind::Adam);
  c.beta1 = 0.5;
  c.beta2 = 0.75;
  c.eps = 1e-3;
  checkTrajectory(c);
}
TEST(TrainingStep, AdamBeta1Zero) {
  OptimizerConfig c = adam(Kind::Adam);
  c.beta1 = 0;  // no first-moment averaging: 1 - beta1^t is exactly 1
  checkTrajectory(c);
}
TEST(TrainingStep, AdamWeightDecayIsL2) { checkTrajectory(adam(Kind::Adam, 0.1)); }
TEST(TrainingStep, AdamWDecoupledWeightDecay) { checkTrajectory(adam(Kind::AdamW, 0.1)); }

TEST(TrainingStep, ClipScalesAGradientLargerThanTheNorm) {
  OptimizerConfig c = sgd(0.9);
  c.clipNorm = 1.0;  // |x| = 2.5
  checkTrajectory(c);
  c = adam(Kind::Adam);
  c.clipNorm = 1.0;
  checkTrajectory(c);
}

TEST(TrainingStep, ClipLeavesASmallerGradientAlone) {
  OptimizerConfig c = sgd();
  c.clipNorm = 10.0;
  checkTrajectory(c);
}

TEST(TrainingStep, OptimizerNames) {
  EXPECT_EQ(passes::optimizerKindFromName("sgd"), Kind::Sgd);
  EXPECT_EQ(passes::optimizerKindFromName("adam"), Kind::Adam);
  EXPECT_EQ(passes::optimizerKindFromName("adamw"), Kind::AdamW);
  try {
    passes::optimizerKindFromName("rmsprop");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsprop"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("adamw"), std::string::npos) << e.what();
  }
}


// --- Every zoo model with a loss: one step lowers the loss; the step graph prints back unchanged.

struct ZooCase {
  const char* model;
  int64_t batch;
  int64_t tokenRange;  // vocabulary of a `tokens` input (0: none)
  bool adam;
};

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.model; }

/// A fixed pseudo-random batch: floats in [-1, 1); labels and targets in [0, classes) where classes
/// is the last dimension of `logits` (or 1 for a float target); tokens in [0, tokenRange).
interp::TensorMap randomBatch(const ir::Graph& g, const ZooCase& c) {
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  const ir::Output* logits = g.findOutput("logits");
  interp::TensorMap inputs;
  for (const ir::Value* in : g.inputs()) {
    if (in->name == "lr") continue;
    rt::HostTensor t(in->type.dtype, in->type.shape);
    int64_t range = in->name == "tokens" ? c.tokenRange : logits ? logits->value->type.shape.back() : 0;
    if (isFloat(in->type.dtype)) range = 0;
    EXPECT_TRUE(isFloat(in->type.dtype) || range > 0) << c.model << ": integer input " << in->name;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, range > 0 ? std::floor(next() * static_cast<double>(range)) : 2 * next() - 1);
    inputs.emplace(in->name, std::move(t));
  }
  return inputs;
}

class ZooTrainingStep : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooTrainingStep, OneStepLowersTheLossAndPrintsBack) {
  const ZooCase& c = GetParam();
  ZooOptions zo;
  zo.batch = c.batch;
  ir::Graph g = buildZooModel(c.model, zo);
  std::vector<std::string> weights;
  for (const ir::Param& p : g.params()) weights.push_back(p.value->name);
  passes::TrainingStepOptions options;
  options.optimizer.kind = c.adam ? Kind::Adam : Kind::Sgd;
  double lr = c.adam ? 1e-3 : 0.05;
  passes::buildTrainingStep(g, options);
  std::vector<std::string> errors = ir::verifyGraph(g);
  ASSERT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
  EXPECT_NE(g.findInput("lr"), nullptr);
  EXPECT_FALSE(g.updates().empty());

  std::string text = ir::printGraph(g);
  ir::Graph reparsed = ir::parseGraph(text, std::string(c.model) + ".kir");
  EXPECT_EQ(ir::printGraph(reparsed), text) << "print -> parse -> print differs for " << c.model;

  interp::TensorMap inputs = randomBatch(g, c);
  inputs.emplace("lr", scalarF32(lr));
  interp::TensorMap params = interp::initializeParams(g);
  interp::TensorMap updated;
  double before = interp::run(g, inputs, params, &updated).at("loss").at(0);
  ASSERT_TRUE(std::isfinite(before));
  for (const ir::Param& p : g.params()) EXPECT_EQ(updated.count(p.value->name), 1u) << p.value->name;
  for (auto& [name, t] : updated) params.insert_or_assign(name, std::move(t));

  // lr = 0: the loss at the new parameters, which stay as they are (Adam still moves its state).
  inputs.insert_or_assign("lr", scalarF32(0));
  interp::TensorMap unchanged;
  double after = interp::run(g, inputs, params, &unchanged).at("loss").at(0);
  EXPECT_LT(after, before) << c.model << ": loss " << before << " -> " << after;
  for (const std::string& w : weights) EXPECT_EQ(values(unchanged.at(w)), values(params.at(w))) << w;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTrainingStep,
                         ::testing::Values(ZooCase{"tiny_mlp", 2, 0, false}, ZooCase{"mnist_mlp", 2, 0, false},
                                           ZooCase{"digits_mlp", 2, 0, true}, ZooCase{"simplenet", 2, 0, false},
                                           ZooCase{"cnn", 1, 0, false}, ZooCase{"lstm", 2, 64, true},
                                           ZooCase{"transformer", 2, 128, true}),
                         [](const auto& info) { return std::string(info.param.model); });

// --- User errors.

std::string stepError(ir::Graph& g, const passes::TrainingStepOptions& options) {
  try {
    passes::buildTrainingStep(g, options);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(TrainingStepErrors, NoLossOutput) {
  ZooOptions zo;
  zo.batch = 2;
  zo.withLoss = false;
  ir::Graph g = buildZooModel("mnist_mlp", zo);
  std::string msg = stepError(g, {});
  EXPECT_NE(msg.find("no output 'loss'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mnist_mlp"), std::string::npos) << msg;
}

TEST(TrainingStepErrors, NamedLossOutputMissing) {
  ir::Graph g = linearLossGraph();
  passes::TrainingStepOptions options;
  options.lossOutput = "objective";
  std::string msg = stepError(g, options);
  EXPECT_NE(msg.find("'objective'"), std::string::npos) << msg;
}

TEST(TrainingStepErrors, NonScalarLoss) {
  ir::Graph g("vector_loss");
  ir::Value* w = g.addParam("w", {DType::f32, {2}}, ir::Initializer{});
  ir::Value* x = g.addInput("x", {DType::f32, {2}});
  g.addOutput("loss", g.addNode(ir::OpKind::Mul, {w, x}, {}));
  std::string msg = stepError(g, {});
  EXPECT_NE(msg.find("loss"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scalar"), std::string::npos) << msg;
}

TEST(TrainingStepErrors, NesterovWithoutMomentum) {
  ir::Graph g = linearLossGraph();
  passes::TrainingStepOptions options;
  options.optimizer.nesterov = true;
  std::string msg = stepError(g, options);
  EXPECT_NE(msg.find("Nesterov"), std::string::npos) << msg;
  EXPECT_NE(msg.find("momentum"), std::string::npos) << msg;
}

TEST(TrainingStepErrors, BadBeta) {
  ir::Graph g = linearLossGraph();
  passes::TrainingStepOptions options;
  options.optimizer.kind = Kind::Adam;
  options.optimizer.beta2 = 1.0;
  std::string msg = stepError(g, options);
  EXPECT_NE(msg.find("betas"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::testing
