// The build API: from a model written with the DSL (its inputs, forward function and loss) and an
// optimizer to the graphs a program runs: one whole training step (forward, loss, backward and the
// optimizer's update; passes::buildTrainingStep) and the matching inference graph, traced in eval
// mode (dropout off), whose parameters have the training step's names, types and initializers, so
// the weights a training run leaves feed it directly.
//
//   auto net = std::make_shared<Mlp>();               // an nn::Module
//   kiln::Model spec;
//   spec.name = "mlp";
//   spec.module = net.get();                          // build switches it to train() / eval()
//   spec.inputs = {{"x", DType::f32, {32, 64}}};      // the first dimension is the batch
//   spec.targets = {{"labels", DType::i64, {32}}};
//   spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"logits", (*net)(in["x"])}}; };
//   spec.loss = [](const NamedTensors& out, const NamedTensors& t) {
//     return cross_entropy(out["logits"], t["labels"]);
//   };
//   kiln::BuiltModel m = kiln::build(spec, optimizer);
//   m.trainStep;                 // inputs x, labels, lr; outputs logits, loss; params + optimizer state
//   m.inferenceForBatch(17);     // inputs x [17, 64]; output logits
//
// Every graph is traced afresh from the spec, so a model is rebuilt for another batch size (a
// smaller last evaluation batch) by calling the forward function again; the spec's forward and
// loss, and the modules they capture, must outlive the BuiltModel. Mistakes in the spec are
// kiln::Errors naming the user's line: the declaration of an input, the assignment of `forward`
// or `loss`, or the op that computed a non-scalar loss.
#pragma once

#include "frontend/Tensor.h"
#include "passes/TrainingStep.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln {

namespace nn {
class Module;
}

using OptimizerConfig = passes::OptimizerConfig;

/// A data input or a target of a model. The first dimension of `shape` is the batch.
struct InputSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  /// Where the spec was written (filled in by the user's aggregate initialization).
  SrcLoc loc = SrcLoc::current();
};

/// A tensor with a name: a model input, target, output or metric.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

/// Tensors in order, looked up by position (`in[0]`) or by name (`in["x"]`). Looking up a name that
/// is not there is a kiln::Error at the caller's line, listing the names there are.
class NamedTensors {
 public:
  /// The key of a lookup by name; converting to it records the caller's location.
  struct Name {
    std::string_view text;
    SrcLoc loc;
    Name(const char* t, SrcLoc l = SrcLoc::current()) : text(t), loc(l) {}         // NOLINT: implicit
    Name(const std::string& t, SrcLoc l = SrcLoc::current()) : text(t), loc(l) {}  // NOLINT: implicit
  };

  NamedTensors() = default;
  NamedTensors(std::initializer_list<NamedTensor> entries) : entries_(entries) {}
  NamedTensors(std::vector<NamedTensor> entries) : entries_(std::move(entries)) {}  // NOLINT: implicit

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const Tensor& operator[](size_t i) const;
  const Tensor& operator[](Name name) const;
  bool contains(std::string_view name) const;
  /// The names in order, joined with ", " (for messages).
  std::string names() const;
  void add(std::string name, Tensor tensor) { entries_.push_back({std::move(name), std::move(tensor)}); }
  std::vector<NamedTensor>::const_iterator begin() const { return entries_.begin(); }
  std::vector<NamedTensor>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<NamedTensor> entries_;
};

/// A std::function that remembers where the user assigned it (`spec.loss = [](…) {…};`), so
/// build() can name that line when what the function returns is wrong.
template <typename Signature>
class UserFunction;

template <typename R, typename... A>
class UserFunction<R(A...)> {
 public:
  UserFunction() = default;
  template <typename F>
    requires(std::is_invocable_r_v<R, F&, A...> && !std::is_same_v<std::decay_t<F>, UserFunction>)
  UserFunction(F f, SrcLoc loc = SrcLoc::current()) : fn_(std::move(f)), loc_(loc) {}  // NOLINT: implicit

  explicit operator bool() const { return static_cast<bool>(fn_); }
  R operator()(A... args) const { return fn_(std::forward<A>(args)...); }
  /// Where the function was assigned (line 0 for a default-constructed one).
  const SrcLoc& loc() const { return loc_; }

 private:
  std::function<R(A...)> fn_;
  SrcLoc loc_;
};

/// What a user declares: the model's signature and the functions that trace it.
struct Model {
  /// The graphs' name; the training step is called NAME_train.
  std::string name = "model";
  /// The model seed: parameter initializers (and dropout seeds) derive from it.
  uint64_t seed = 0;
  /// Data inputs, in the order the forward function receives them.
  std::vector<InputSpec> inputs;
  /// What the loss compares the outputs with (labels); inputs of the training step only.
  std::vector<InputSpec> targets;
  /// The root module, if any: build() traces the training step in train() mode and the inference
  /// graph in eval() mode, and restores the module's mode afterwards. Not owned.
  nn::Module* module = nullptr;
  /// The model: named outputs from the inputs (at least one output; "loss" is reserved).
  UserFunction<NamedTensors(const NamedTensors& inputs)> forward;
  /// A float scalar from the forward outputs and the targets.
  UserFunction<Tensor(const NamedTensors& outputs, const NamedTensors& targets)> loss;
  /// Optional: extra outputs of the training step (accuracy, …) from the outputs and the targets.
  UserFunction<NamedTensors(const NamedTensors& outputs, const NamedTensors& targets)> metrics;
};

/// What buildForward traces.
struct ForwardOptions {
  /// The batch size; 0 keeps the spec's.
  int64_t batch = 0;
  /// Declares the targets and adds the output `loss` and the metrics after the forward outputs.
  bool withLoss = true;
  /// The module's mode while tracing (train: dropout on).
  bool training = true;
};

/// The forward graph named after the model: inputs (then targets), the forward outputs and, with
/// withLoss, `loss` and the metrics. Not yet a training step: what the model zoo returns and
/// `kiln export` prints.
ir::Graph buildForward(const Model& spec, const ForwardOptions& options = {}, SrcLoc loc = SrcLoc::current());

/// The inference graph: the spec's inputs at `batch` (0: the spec's batch), the forward outputs,
/// traced in eval mode.
ir::Graph buildInference(const Model& spec, int64_t batch = 0, SrcLoc loc = SrcLoc::current());

/// The training step NAME_train (see passes/TrainingStep.h): inputs, targets and `lr`; outputs
/// the forward outputs, `loss` and the metrics; parameters, optimizer state and, when the model
/// draws random numbers, `rng.step`. Autodiff's warnings are appended to `warnings` when given.
ir::Graph buildTrainStep(const Model& spec, const passes::TrainingStepOptions& options, int64_t batch = 0,
                         std::vector<std::string>* warnings = nullptr, SrcLoc loc = SrcLoc::current());

/// A model built for training: both graphs at the spec's batch size, and the spec to rebuild them.
class BuiltModel {
 public:
  ir::Graph trainStep;
  ir::Graph inference;
  /// Parameters the loss does not depend on, an inference graph that still draws random numbers.
  std::vector<std::string> warnings;
  /// The model's own parameters in graph order (without optimizer state): what to save.
  std::vector<std::string> parameterNames;
  /// The batch size of both graphs.
  int64_t batch = 0;

  /// Made by build(): keeps the spec and the options to rebuild the graphs at another batch size.
  BuiltModel(Model spec, passes::TrainingStepOptions options) : spec_(std::move(spec)), options_(std::move(options)) {}

  /// The inference graph for another batch size (same parameters).
  ir::Graph inferenceForBatch(int64_t batchSize) const { return buildInference(spec_, batchSize); }
  /// The training step for another batch size (same parameters and state).
  ir::Graph trainStepForBatch(int64_t batchSize) const { return buildTrainStep(spec_, options_, batchSize); }
  const Model& spec() const { return spec_; }
  const passes::TrainingStepOptions& options() const { return options_; }

 private:
  Model spec_;
  passes::TrainingStepOptions options_;
};

/// Builds the training step and the inference graph; checks that they share every model parameter.
/// options.lossOutput is ignored: the loss is the spec's.
BuiltModel build(const Model& spec, const passes::TrainingStepOptions& options, SrcLoc loc = SrcLoc::current());
/// The same with default training-step options around `optimizer`.
BuiltModel build(const Model& spec, const OptimizerConfig& optimizer = {}, SrcLoc loc = SrcLoc::current());

}  // namespace kiln
