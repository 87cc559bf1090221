// Per-step random streams: buildTrainingStep gives a graph with dropout the state `rng.step`, so
// successive steps draw different masks, while each step's gradient uses that step's own mask;
// the step's text form round-trips; and the step operand's type is checked.
//
// The graph is loss = reduce_sum(dropout(w * x)) with one element of w per element of x, so with
// SGD and lr = 1 the update w - w' is the gradient keep * x / (1 - p), and the forward output
// y = keep * w * x / (1 - p) gives the mask the forward pass used: (w - w') * w = y exactly where
// the backward pass saw the forward's mask.
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/TrainingStep.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::testing {
namespace {

using ir::OpKind;

constexpr double kP = 0.5;
const ir::Shape kShape = {4, 16};

rt::HostTensor scalar(DType t, double v) {
  rt::HostTensor s(t, {});
  s.set(0, v);
  return s;
}

/// param w (uniform in [0.5, 1.5)), input x; outputs y = dropout(w * x) and loss = sum(y).
/// With `stepInput`, the dropout node takes the graph input `step` as its step counter.
ir::Graph dropoutGraph(bool stepInput = false) {
  ir::Graph g("dropout_step");
  ir::Value* w = g.addParam("w", {DType::f32, kShape}, ir::Initializer{ir::Initializer::Kind::Uniform, 0.5, 1.5, 3});
  ir::Value* x = g.addInput("x", {DType::f32, kShape});
  std::vector<ir::Value*> operands = {g.addNode(OpKind::Mul, {w, x}, {})};
  if (stepInput) operands.push_back(g.addInput("step", {DType::i64, {}}));
  ir::Value* y = g.addNode(OpKind::Dropout, operands, std::vector<ir::NamedAttr>{{"p", kP}, {"seed", int64_t{9}}});
  g.addOutput("y", y);
  g.addOutput("loss", g.addNode(OpKind::ReduceSum, {y}, std::vector<ir::NamedAttr>{{"axes", ir::Ints{}}}));
  return g;
}

ir::Graph sgdStep(bool stepInput = false) {
  ir::Graph g = dropoutGraph(stepInput);
  passes::TrainingStepOptions options;
  passes::buildTrainingStep(g, options);
  std::vector<std::string> errors = ir::verifyGraph(g);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
  return g;
}

interp::TensorMap batch() {
  rt::HostTensor x(DType::f32, kShape);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 0.25 + 0.125 * static_cast<double>(i % 7));
  return {{"x", x}, {"lr", scalar(DType::f32, 1.0)}};
}

std::vector<bool> maskOf(const rt::HostTensor& y) {
  std::vector<bool> keep;
  for (int64_t i = 0; i < y.numel(); ++i) keep.push_back(y.at(i) != 0);
  return keep;
}

/// One step from `params`: checks that the update is the gradient of this step's mask and returns
/// the mask; `params` advances to the updated values.
std::vector<bool> stepAndCheckGradient(const ir::Graph& step, interp::TensorMap& params) {
  interp::TensorMap updated;
  interp::TensorMap out = interp::run(step, batch(), params, &updated);
  const rt::HostTensor &y = out.at("y"), &w0 = params.at("w"), &w1 = updated.at("w");
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_NEAR((w0.at(i) - w1.at(i)) * w0.at(i), y.at(i), 1e-5) << "element " << i;
  for (auto& [name, t] : updated) params.insert_or_assign(name, std::move(t));
  return maskOf(y);
}

TEST(RandomStep, SuccessiveStepsDrawFreshMasksAndGradientsFollowThem) {
  ir::Graph step = sgdStep();
  const ir::Param* rng = step.findParam("rng.step");
  ASSERT_NE(rng, nullptr);
  EXPECT_EQ(rng->value->type, (ir::TensorType{DType::i64, {}}));
  EXPECT_EQ(rng->init, ir::Initializer{});

  interp::TensorMap params = interp::initializeParams(step);
  interp::TensorMap start = params;
  std::vector<bool> first = stepAndCheckGradient(step, params);
  EXPECT_EQ(params.at("rng.step").at(0), 1);
  std::vector<bool> second = stepAndCheckGradient(step, params);
  EXPECT_EQ(params.at("rng.step").at(0), 2);
  EXPECT_NE(first, second) << "two steps drew the same dropout mask";
  // Each mask keeps about half of the 64 elements.
  for (const std::vector<bool>& m : {first, second}) {
    int kept = static_cast<int>(std::count(m.begin(), m.end(), true));
    EXPECT_GT(kept, 16);
    EXPECT_LT(kept, 48);
  }
  // The same step counter draws the same mask again: the streams are a function of the step.
  EXPECT_EQ(stepAndCheckGradient(step, start), first);
}

TEST(RandomStep, AStepOperandTheUserWiredIsKept) {
  ir::Graph step = sgdStep(/*stepInput=*/true);
  EXPECT_EQ(step.findParam("rng.step"), nullptr);
  interp::TensorMap params = interp::initializeParams(step);
  interp::TensorMap in = batch();
  in.emplace("step", scalar(DType::i64, 5));
  rt::HostTensor a = interp::run(step, in, params).at("y");
  rt::HostTensor b = interp::run(step, in, params).at("y");
  EXPECT_TRUE(a.identical(b));
  in.insert_or_assign("step", scalar(DType::i64, 6));
  EXPECT_NE(maskOf(interp::run(step, in, params).at("y")), maskOf(a));
}

TEST(RandomStep, GraphsWithoutRandomOpsGetNoCounter) {
  ir::Graph g("plain");
  ir::Value* w = g.addParam("w", {DType::f32, {3}}, ir::Initializer{});
  ir::Value* x = g.addInput("x", {DType::f32, {3}});
  g.addOutput("loss", g.addNode(OpKind::ReduceSum, {g.addNode(OpKind::Mul, {w, x}, {})},
                                std::vector<ir::NamedAttr>{{"axes", ir::Ints{}}}));
  passes::buildTrainingStep(g, {});
  EXPECT_EQ(g.findParam("rng.step"), nullptr);
}

TEST(RandomStep, TrainingStepTextRoundTrips) {
  ir::Graph step = sgdStep();
  std::string text = ir::printGraph(step);
  EXPECT_NE(text.find("random(%rng.step)"), std::string::npos) << text;
  EXPECT_NE(text.find("update %rng.step = "), std::string::npos) << text;
  ir::Graph reparsed = ir::parseGraph(text, "step.kir");
  EXPECT_EQ(ir::printGraph(reparsed), text);
}

TEST(RandomStep, TheStepOperandMustBeAnI64Scalar) {
  for (ir::TensorType bad : {ir::TensorType{DType::f32, {}}, ir::TensorType{DType::i64, {1}}}) {
    ir::Graph g("bad_step");
    ir::Value* x = g.addInput("x", {DType::f32, {2}});
    ir::Value* s = g.addInput("s", bad);
    try {
      g.addNode(OpKind::Dropout, {x, s}, std::vector<ir::NamedAttr>{{"p", 0.5}, {"seed", int64_t{1}}});
      ADD_FAILURE() << "no error for a step of type " << bad.str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the step operand must be an i64 scalar (i64[]), got " + bad.str()),
                std::string::npos)
          << e.what();
    }
    try {
      g.addNode(OpKind::Random, {s}, std::vector<ir::NamedAttr>{{"shape", ir::Ints{2}}, {"seed", int64_t{1}}});
      ADD_FAILURE() << "no error for a step of type " << bad.str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("op 'random'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln::testing
