#include "frontend/Build.h"

#include "frontend/nn/Module.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

namespace kiln {

const Tensor& NamedTensors::operator[](size_t i) const {
  KILN_CHECK(i < entries_.size(), "tensor index {} is out of range: there are {} ({})", i, entries_.size(), names());
  return entries_[i].tensor;
}

const Tensor& NamedTensors::operator[](Name name) const {
  for (const NamedTensor& e : entries_)
    if (e.name == name.text) return e.tensor;
  throw Error(SourceLoc::from(name.loc),
              fmt::format("no tensor named '{}' (there are: {})", name.text, entries_.empty() ? "none" : names()));
}

bool NamedTensors::contains(std::string_view name) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const NamedTensor& e) { return e.name == name; });
}

std::string NamedTensors::names() const {
  std::vector<std::string_view> n;
  for (const NamedTensor& e : entries_) n.push_back(e.name);
  return fmt::format("{}", fmt::join(n, ", "));
}

namespace {

constexpr std::string_view kLossName = "loss";
constexpr std::string_view kLearningRateName = "lr";  // the input passes::buildTrainingStep adds

/// `preferred` when it is known (where a user function was assigned), else `fallback` (the build
/// call).
const SrcLoc& knownOr(const SrcLoc& preferred, const SrcLoc& fallback) {
  return preferred.line() > 0 ? preferred : fallback;
}

[[noreturn]] void specError(const Model& spec, const SourceLoc& loc, const std::string& message) {
  throw Error(loc, fmt::format("model '{}': {}", spec.name, message));
}

/// Puts a module tree into train or eval mode for one trace and restores every module's own mode
/// afterwards (a submodule the user froze in eval mode stays so).
class ModeScope {
 public:
  ModeScope(nn::Module* root, bool training) {
    if (root == nullptr) return;
    snapshot(root);
    root->train(training);
  }
  ~ModeScope() {
    // Parents first: Module::train recurses, so each child's own mode is set after its parent's.
    for (auto& [m, mode] : saved_) m->train(mode);
  }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

 private:
  void snapshot(nn::Module* m) {
    saved_.emplace_back(m, m->isTraining());
    for (auto& [name, child] : m->children()) snapshot(child);
  }
  std::vector<std::pair<nn::Module*, bool>> saved_;
};

/// Checks the declared inputs and targets (names, batch dimension) and returns the batch size to
/// trace: `batch` when positive, else the spec's.
int64_t checkSignature(const Model& spec, int64_t batch, const SrcLoc& buildLoc) {
  if (spec.inputs.empty()) specError(spec, SourceLoc::from(buildLoc), "no inputs; declare them in Model::inputs");
  KILN_CHECK(batch >= 0, "model '{}': the batch size must be positive, got {}", spec.name, batch);
  std::set<std::string_view> seen;
  const InputSpec& first = spec.inputs.front();
  auto check = [&](const InputSpec& in, std::string_view role) {
    SourceLoc at = SourceLoc::from(in.loc);
    if (in.name.empty()) specError(spec, at, fmt::format("a {} has an empty name", role));
    if (!seen.insert(in.name).second)
      specError(spec, at, fmt::format("'{}' is declared twice (inputs and targets share one namespace)", in.name));
    if (in.shape.empty())
      specError(spec, at,
                fmt::format("{} '{}' is a scalar, but the first dimension of every input and target is the batch",
                            role, in.name));
    if (in.shape[0] != first.shape.at(0))
      specError(spec, at,
                fmt::format("{} '{}' has batch size {} but input '{}' has {} (the first dimension of every "
                            "input and target is the batch)",
                            role, in.name, in.shape[0], first.name, first.shape[0]));
  };
  for (const InputSpec& in : spec.inputs) check(in, "input");
  for (const InputSpec& in : spec.targets) check(in, "target");
  return batch > 0 ? batch : first.shape[0];
}

NamedTensors declare(Tracer& t, const std::vector<InputSpec>& specs, int64_t batch) {
  NamedTensors out;
  for (const InputSpec& in : specs) {
    Shape shape = in.shape;
    shape[0] = batch;
    out.add(in.name, t.input(in.name, in.dtype, std::move(shape), in.loc));
  }
  return out;
}

/// Adds `tensors` as graph outputs; `taken` holds the output names used so far.
void addOutputs(Tracer& t, const Model& spec, const NamedTensors& tensors, std::string_view what, const SrcLoc& at,
                std::set<std::string>& taken) {
  for (const NamedTensor& o : tensors) {
    if (o.name.empty())
      specError(spec, SourceLoc::from(at), fmt::format("{} returned an output with an empty name", what));
    if (o.name == kLossName)
      specError(spec, SourceLoc::from(at),
                fmt::format("{} returned an output named 'loss', which is reserved for the loss", what));
    if (!taken.insert(o.name).second)
      specError(spec, SourceLoc::from(at), fmt::format("{} returned a second output named '{}'", what, o.name));
    t.output(o.name, o.tensor, at);
  }
}

/// The loss function's result, checked: a defined float scalar of this trace.
Tensor checkedLoss(const Model& spec, Tracer& t, const Tensor& loss, const SrcLoc& at) {
  if (!loss.defined()) specError(spec, SourceLoc::from(at), "the loss function returned an undefined tensor");
  if (&loss.tracer() != &t)
    specError(spec, SourceLoc::from(at), "the loss function returned a tensor of another trace");
  if (isFloat(loss.dtype()) && loss.numel() == 1) return loss;
  // Point at the op that made the loss: that is the line to change.
  const ir::Node* producer = loss.value()->producer;
  SourceLoc where = producer != nullptr && producer->loc.known() ? producer->loc : SourceLoc::from(at);
  specError(spec, where,
            fmt::format("the loss must be a float scalar, but the loss function returned {}{}", loss.str(),
                        loss.numel() != 1 ? " (reduce it: reduction \"mean\" or \"sum\", or mean(...))" : ""));
}

ir::Graph trace(const Model& spec, const ForwardOptions& options, const std::string& graphName,
                const SrcLoc& buildLoc) {
  if (!spec.forward) specError(spec, SourceLoc::from(buildLoc), "Model::forward is not set");
  if (options.withLoss && !spec.loss) specError(spec, SourceLoc::from(buildLoc), "Model::loss is not set");
  int64_t batch = checkSignature(spec, options.batch, buildLoc);
  ModeScope mode(spec.module, options.training);
  Tracer t(graphName, spec.seed);
  NamedTensors inputs = declare(t, spec.inputs, batch);
  NamedTensors targets = options.withLoss ? declare(t, spec.targets, batch) : NamedTensors{};

  const SrcLoc& forwardAt = knownOr(spec.forward.loc(), buildLoc);
  NamedTensors outputs = spec.forward(inputs);
  if (outputs.empty()) specError(spec, SourceLoc::from(forwardAt), "forward returned no outputs");
  std::set<std::string> taken;
  addOutputs(t, spec, outputs, "forward", forwardAt, taken);
  if (options.withLoss) {
    const SrcLoc& lossAt = knownOr(spec.loss.loc(), buildLoc);
    Tensor loss = checkedLoss(spec, t, spec.loss(outputs, targets), lossAt);
    t.output(std::string(kLossName), loss, lossAt);
    if (spec.metrics) {
      const SrcLoc& metricsAt = knownOr(spec.metrics.loc(), buildLoc);
      addOutputs(t, spec, spec.metrics(outputs, targets), "metrics", metricsAt, taken);
    }
  }
  return t.finish();
}

/// The forward graph of a training step: traced in train mode with the loss, after checking that
/// no input takes the name of the learning-rate input the step adds.
ir::Graph traceForTraining(const Model& spec, int64_t batch, const SrcLoc& buildLoc) {
  for (const std::vector<InputSpec>* list : {&spec.inputs, &spec.targets})
    for (const InputSpec& in : *list)
      if (in.name == kLearningRateName)
        specError(spec, SourceLoc::from(in.loc),
                  "'lr' is the training step's learning-rate input; give this input another name");
  return trace(spec, {.batch = batch, .withLoss = true, .training = true}, spec.name, buildLoc);
}

/// Turns a traced forward graph with a loss into the training step.
ir::Graph toTrainStep(ir::Graph g, const Model& spec, passes::TrainingStepOptions options,
                      std::vector<std::string>* warnings) {
  g.setName(spec.name + "_train");
  options.lossOutput = std::string(kLossName);
  std::vector<std::string> w = passes::buildTrainingStep(g, options);
  if (warnings != nullptr) warnings->insert(warnings->end(), w.begin(), w.end());
  return g;
}

/// A warning when an inference graph still draws random numbers (dropout left on).
std::optional<std::string> randomInInference(const Model& spec, const ir::Graph& inference) {
  for (const auto& n : inference.nodes()) {
    if (!n->info().has(ir::kRandom)) continue;
    std::string at = n->loc.known() ? " at " + n->loc.str() : "";
    return fmt::format(
        "model '{}': the inference graph draws random numbers ('{}'{}) although it is traced in eval "
        "mode: {}",
        spec.name, n->info().name, at,
        spec.module == nullptr ? "set Model::module to the root module so build() can switch dropout off"
                               : "a functional dropout() ignores the module's mode; use nn::Dropout");
  }
  return std::nullopt;
}

}  // namespace

ir::Graph buildForward(const Model& spec, const ForwardOptions& options, SrcLoc loc) {
  return trace(spec, options, spec.name, loc);
}

ir::Graph buildInference(const Model& spec, int64_t batch, SrcLoc loc) {
  return trace(spec, {.batch = batch, .withLoss = false, .training = false}, spec.name, loc);
}

ir::Graph buildTrainStep(const Model& spec, const passes::TrainingStepOptions& options, int64_t batch,
                         std::vector<std::string>* warnings, SrcLoc loc) {
  return toTrainStep(traceForTraining(spec, batch, loc), spec, options, warnings);
}

BuiltModel build(const Model& spec, const passes::TrainingStepOptions& options, SrcLoc loc) {
  BuiltModel m(spec, options);
  ir::Graph forward = traceForTraining(spec, 0, loc);
  std::vector<std::string> modelParams;
  for (const ir::Param& p : forward.params()) modelParams.push_back(p.value->name);
  m.trainStep = toTrainStep(std::move(forward), spec, options, &m.warnings);
  m.inference = buildInference(spec, 0, loc);
  m.batch = m.inference.inputs().front()->type.shape[0];
  // The inference graph must run on the training step's weights: every parameter it has must be
  // one of the model's, with the same type and initializer.
  for (const ir::Param& p : m.inference.params()) {
    const ir::Param* trained = m.trainStep.findParam(p.value->name);
    bool shared =
        trained != nullptr && std::find(modelParams.begin(), modelParams.end(), p.value->name) != modelParams.end();
    if (!shared || trained->value->type != p.value->type || !(trained->init == p.init))
      specError(spec, SourceLoc::from(loc),
                fmt::format("the inference graph's parameter '{}' ({}) is not a parameter of the same type and "
                            "initializer in the training step; forward must declare the same parameters in train "
                            "and eval mode",
                            p.value->name, p.value->type.str()));
  }
  m.parameterNames = std::move(modelParams);
  if (std::optional<std::string> w = randomInInference(spec, m.inference)) m.warnings.push_back(*w);
  return m;
}

BuiltModel build(const Model& spec, const OptimizerConfig& optimizer, SrcLoc loc) {
  passes::TrainingStepOptions options;
  options.optimizer = optimizer;
  return build(spec, options, loc);
}

}  // namespace kiln
