// The build API (frontend/Build.h): the training step and the inference graph share the model's
// parameters; one step lowers the loss; the inference graph (eval mode: dropout off) computes the
// training graph's logits; graphs rebuild for another batch; and mistakes in the spec are errors
// that name the user's line.
#include "FrontendTestUtil.h"

#include "interp/Interpreter.h"
#include "ir/Verifier.h"

#include <cmath>
#include <memory>

namespace kiln {
namespace {

using testing::contains;
using testing::errorOf;

/// fc1 → relu → dropout(p) → fc2: 8 features, 3 classes.
struct Mlp : nn::Module {
  explicit Mlp(double p) : drop(registerModule("drop", std::make_shared<nn::Dropout>(p))) {}
  std::shared_ptr<nn::Linear> fc1 = registerModule("fc1", std::make_shared<nn::Linear>(8, 16));
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::Linear> fc2 = registerModule("fc2", std::make_shared<nn::Linear>(16, 3));
  Tensor forward(const Tensor& x) { return (*fc2)((*drop)(relu((*fc1)(x)))); }
};

constexpr int64_t kBatch = 4;

Model mlpSpec(const std::shared_ptr<Mlp>& net) {
  Model spec;
  spec.name = "mlp";
  spec.seed = 11;
  spec.module = net.get();
  spec.inputs = {{"x", DType::f32, {kBatch, 8}}};
  spec.targets = {{"labels", DType::i64, {kBatch}}};
  spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"logits", net->forward(in["x"])}}; };
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) { return cross_entropy(out["logits"], t["labels"]); };
  return spec;
}

rt::HostTensor scalarF32(double v) {
  rt::HostTensor t(DType::f32, {});
  t.set(0, v);
  return t;
}

/// A fixed batch of `n` examples: x in [-1, 1), labels in [0, 3).
interp::TensorMap batchOf(int64_t n) {
  rt::HostTensor x(DType::f32, {n, 8}), labels(DType::i64, {n});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::sin(0.7 * static_cast<double>(i)));
  for (int64_t i = 0; i < n; ++i) labels.set(i, static_cast<double>(i % 3));
  return {{"x", x}, {"labels", labels}};
}

/// The inputs of an inference graph: x of batchOf(n).
interp::TensorMap xOf(int64_t n) { return {{"x", batchOf(n).at("x")}}; }

/// The parameters of `g` that `values` has, by name.
interp::TensorMap paramsOf(const ir::Graph& g, const interp::TensorMap& values) {
  interp::TensorMap out;
  for (const ir::Param& p : g.params()) out.emplace(p.value->name, values.at(p.value->name));
  return out;
}

bool drawsRandomNumbers(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (n->info().has(ir::kRandom)) return true;
  return false;
}

std::vector<std::string> names(const std::vector<ir::Value*>& values) {
  std::vector<std::string> out;
  for (const ir::Value* v : values) out.push_back(v->name);
  return out;
}

std::vector<std::string> outputNames(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Output& o : g.outputs()) out.push_back(o.name);
  return out;
}

/// Every parameter of `inference` is one of `step`'s, with the same type and initializer.
void expectSharedParameters(const ir::Graph& inference, const ir::Graph& step) {
  for (const ir::Param& p : inference.params()) {
    SCOPED_TRACE(p.value->name);
    const ir::Param* q = step.findParam(p.value->name);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->value->type, p.value->type);
    EXPECT_EQ(q->init, p.init);
  }
}

TEST(Build, TrainStepAndInferenceShareTheModelsParameters) {
  auto net = std::make_shared<Mlp>(0.5);
  OptimizerConfig adam;
  adam.kind = OptimizerConfig::Kind::Adam;
  BuiltModel m = build(mlpSpec(net), adam);
  EXPECT_TRUE(m.warnings.empty()) << fmt::format("{}", fmt::join(m.warnings, "\n"));
  EXPECT_TRUE(ir::verifyGraph(m.trainStep).empty());
  EXPECT_TRUE(ir::verifyGraph(m.inference).empty());
  EXPECT_EQ(m.batch, kBatch);

  EXPECT_EQ(m.trainStep.name(), "mlp_train");
  EXPECT_EQ(names(m.trainStep.inputs()), (std::vector<std::string>{"x", "labels", "lr"}));
  EXPECT_EQ(outputNames(m.trainStep), (std::vector<std::string>{"logits", "loss"}));
  EXPECT_EQ(m.inference.name(), "mlp");
  EXPECT_EQ(names(m.inference.inputs()), (std::vector<std::string>{"x"}));
  EXPECT_EQ(outputNames(m.inference), (std::vector<std::string>{"logits"}));

  std::vector<std::string> model = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  EXPECT_EQ(m.parameterNames, model);
  ASSERT_EQ(m.inference.params().size(), model.size());
  for (size_t i = 0; i < model.size(); ++i) EXPECT_EQ(m.inference.params()[i].value->name, model[i]);
  expectSharedParameters(m.inference, m.trainStep);
  // The step also holds Adam's state and the dropout stream's counter; inference has neither.
  EXPECT_NE(m.trainStep.findParam("fc1.weight.adam_m"), nullptr);
  EXPECT_NE(m.trainStep.findParam("optim.step"), nullptr);
  EXPECT_NE(m.trainStep.findParam("rng.step"), nullptr);
  EXPECT_TRUE(drawsRandomNumbers(m.trainStep));
  EXPECT_FALSE(drawsRandomNumbers(m.inference));
}

TEST(Build, RestoresEachModulesMode) {
  auto net = std::make_shared<Mlp>(0.5);
  net->drop->eval();  // the user froze dropout: the training step must still switch it on
  BuiltModel m = build(mlpSpec(net));
  EXPECT_TRUE(drawsRandomNumbers(m.trainStep));
  EXPECT_TRUE(net->isTraining());
  EXPECT_TRUE(net->fc1->isTraining());
  EXPECT_FALSE(net->drop->isTraining());
}

TEST(Build, OneTrainingStepLowersTheLoss) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  OptimizerConfig sgd;
  BuiltModel m = build(spec, sgd);
  // The loss before and after the step, measured by the forward graph with the loss in eval mode.
  ir::Graph lossGraph = buildForward(spec, {.training = false});
  interp::TensorMap params = interp::initializeParams(m.trainStep);
  double before = interp::run(lossGraph, batchOf(kBatch), paramsOf(lossGraph, params)).at("loss").at(0);

  interp::TensorMap in = batchOf(kBatch);
  in.emplace("lr", scalarF32(0.1));
  interp::TensorMap updated;
  double during = interp::run(m.trainStep, in, params, &updated).at("loss").at(0);
  EXPECT_NEAR(during, before, 1e-6) << "the step's loss is the loss at the old parameters";
  for (auto& [name, t] : updated) params.insert_or_assign(name, std::move(t));
  double after = interp::run(lossGraph, batchOf(kBatch), paramsOf(lossGraph, params)).at("loss").at(0);
  EXPECT_LT(after, before);
}

TEST(Build, InferenceComputesTheTrainingLogitsWithDropoutOff) {
  // p = 0: Dropout is the identity in both modes, so both graphs compute the same function.
  auto plain = std::make_shared<Mlp>(0.0);
  BuiltModel m = build(mlpSpec(plain));
  interp::TensorMap params = interp::initializeParams(m.trainStep);
  interp::TensorMap in = batchOf(kBatch);
  in.emplace("lr", scalarF32(0.1));
  rt::HostTensor trained = interp::run(m.trainStep, in, params).at("logits");
  rt::HostTensor inferred = interp::run(m.inference, xOf(kBatch), paramsOf(m.inference, params)).at("logits");
  EXPECT_TRUE(trained.identical(inferred));

  // p = 0.5, same seed and names: the training step drops units, the eval-mode graph does not.
  auto dropping = std::make_shared<Mlp>(0.5);
  BuiltModel d = build(mlpSpec(dropping));
  expectSharedParameters(d.inference, m.trainStep);
  rt::HostTensor dropped = interp::run(d.trainStep, in, interp::initializeParams(d.trainStep)).at("logits");
  EXPECT_FALSE(dropped.identical(trained));
  EXPECT_TRUE(interp::run(d.inference, xOf(kBatch), paramsOf(d.inference, params)).at("logits").identical(trained));
}

TEST(Build, RebuildsForAnotherBatch) {
  auto net = std::make_shared<Mlp>(0.5);
  BuiltModel m = build(mlpSpec(net));
  ir::Graph small = m.inferenceForBatch(3);
  EXPECT_EQ(small.inputs().at(0)->type, (ir::TensorType{DType::f32, {3, 8}}));
  EXPECT_EQ(small.findOutput("logits")->value->type, (ir::TensorType{DType::f32, {3, 3}}));
  expectSharedParameters(small, m.trainStep);
  EXPECT_EQ(small.params().size(), m.inference.params().size());

  ir::Graph step = m.trainStepForBatch(5);
  EXPECT_EQ(step.findInput("labels")->type, (ir::TensorType{DType::i64, {5}}));
  ASSERT_EQ(step.params().size(), m.trainStep.params().size());
  expectSharedParameters(step, m.trainStep);

  // The inference graph runs on the training step's parameters at any batch size.
  interp::TensorMap params = interp::initializeParams(m.trainStep);
  rt::HostTensor logits = interp::run(small, xOf(3), paramsOf(small, params)).at("logits");
  EXPECT_EQ(logits.shape(), (std::vector<int64_t>{3, 3}));
}

TEST(Build, MetricsBecomeTrainingStepOutputs) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  spec.metrics = [](const NamedTensors& out, const NamedTensors& t) -> NamedTensors {
    return {{"accuracy", mean(cast(argmax(out["logits"], -1) == t["labels"], DType::f32))}};
  };
  BuiltModel m = build(spec);
  EXPECT_EQ(outputNames(m.trainStep), (std::vector<std::string>{"logits", "loss", "accuracy"}));
  EXPECT_EQ(outputNames(m.inference), (std::vector<std::string>{"logits"}));
}

TEST(Build, WarnsWhenInferenceStillDrawsRandomNumbers) {
  Model spec;
  spec.name = "functional";
  spec.inputs = {{"x", DType::f32, {2, 4}}};
  spec.targets = {{"y", DType::f32, {2, 4}}};
  auto w = std::make_shared<nn::Linear>(4, 4);
  spec.forward = [w](const NamedTensors& in) -> NamedTensors { return {{"pred", dropout((*w)(in[0]), 0.5)}}; };
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) { return mse_loss(out[0], t[0]); };
  BuiltModel m = build(spec);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_TRUE(
      contains(m.warnings[0], "the inference graph draws random numbers ('dropout' at tests/frontend/BuildTest.cpp:"))
      << m.warnings[0];
  EXPECT_TRUE(contains(m.warnings[0], "set Model::module")) << m.warnings[0];
}

// --- Errors name the user's line.

std::string at(int line) { return fmt::format("tests/frontend/BuildTest.cpp:{}:", line); }

TEST(BuildErrors, LossMustBeAScalar) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  const int line = __LINE__ + 2;
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) {
    return cross_entropy(out["logits"], t["labels"], "none");
  };
  std::string msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "model 'mlp': the loss must be a float scalar, but the loss function returned f32[4]"))
      << msg;
}

TEST(BuildErrors, MissingFunctionsNameTheBuildCall) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  spec.forward = {};
  const int line = __LINE__ + 1;
  std::string msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "model 'mlp': Model::forward is not set")) << msg;

  spec = mlpSpec(net);
  spec.loss = {};
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "Model::loss is not set"));
  // The inference graph needs no loss.
  EXPECT_EQ(buildInference(spec).outputs().size(), 1u);
}

TEST(BuildErrors, ForwardOutputs) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  int line = __LINE__ + 1;
  spec.forward = [](const NamedTensors&) { return NamedTensors{}; };
  std::string msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "forward returned no outputs")) << msg;

  line = __LINE__ + 1;
  spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"loss", net->forward(in[0])}}; };
  msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "forward returned an output named 'loss', which is reserved for the loss")) << msg;

  spec.forward = [net](const NamedTensors& in) -> NamedTensors {
    Tensor y = net->forward(in[0]);
    return {{"y", y}, {"y", y}};
  };
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "forward returned a second output named 'y'"));

  spec.forward = [](const NamedTensors&) -> NamedTensors { return {{"logits", Tensor()}}; };
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "output 'logits' is an undefined tensor"));
}

TEST(BuildErrors, InputsAndTargets) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  int line = __LINE__ + 1;
  spec.targets = {{"x", DType::i64, {kBatch}}};
  std::string msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "model 'mlp': 'x' is declared twice")) << msg;

  line = __LINE__ + 1;
  spec.targets = {{"labels", DType::i64, {3}}};
  msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "target 'labels' has batch size 3 but input 'x' has 4")) << msg;

  spec.targets = {{"lr", DType::i64, {kBatch}}};
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "'lr' is the training step's learning-rate input"));

  spec.targets = {{"labels", DType::i64, {}}};
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "target 'labels' is a scalar"));

  spec.inputs.clear();
  EXPECT_TRUE(contains(errorOf([&] { build(spec); }), "model 'mlp': no inputs"));
}

TEST(BuildErrors, UnknownNamesListTheKnownOnes) {
  auto net = std::make_shared<Mlp>(0.0);
  Model spec = mlpSpec(net);
  const int line = __LINE__ + 1;
  spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"logits", net->forward(in["images"])}}; };
  std::string msg = errorOf([&] { build(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "no tensor named 'images' (there are: x)")) << msg;
}

TEST(BuildErrors, ShapeMistakesInsideForwardKeepTheirLine) {
  Model spec;
  spec.inputs = {{"x", DType::f32, {2, 5}}};
  auto fc = std::make_shared<nn::Linear>(4, 3);
  const int line = __LINE__ + 1;
  spec.forward = [fc](const NamedTensors& in) -> NamedTensors { return {{"y", (*fc)(in[0])}}; };
  std::string msg = errorOf([&] { buildInference(spec); });
  EXPECT_TRUE(contains(msg, at(line))) << msg;
  EXPECT_TRUE(contains(msg, "op 'linear'")) << msg;
}

}  // namespace
}  // namespace kiln
