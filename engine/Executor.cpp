#include "engine/Executor.h"

#include "codegen/cpu/Program.h"
#include "cost/CostModel.h"
#include "cost/MachineProfile.h"
#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/Program.h"
#endif
#include "ir/IndexInputs.h"
#include "passes/Pipeline.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace kiln::engine {

namespace {

/// The parameters of `g` that `params` names, checked against their types.
interp::TensorMap known(const ir::Graph& g, const interp::TensorMap& params) {
  interp::TensorMap out;
  for (const ir::Param& p : g.params()) {
    auto it = params.find(p.value->name);
    if (it == params.end()) continue;
    KILN_CHECK(it->second.dtype() == p.value->type.dtype && it->second.shape() == p.value->type.shape,
               "parameter '{}' of @{} is {}, given {}", p.value->name, g.name(), p.value->type.str(),
               it->second.typeStr());
    out.insert_or_assign(p.value->name, it->second);
  }
  return out;
}

/// The names of the inputs of `g` that `inputs` has (Executor::keepInputs).
std::set<std::string> inputNames(const ir::Graph& g, const interp::TensorMap& inputs) {
  std::set<std::string> names;
  for (const ir::Value* v : g.inputs())
    if (inputs.count(v->name)) names.insert(v->name);
  return names;
}

/// Checks that `inputs` or `kept` names every input of `g` (callers may pass more, e.g. labels to
/// an inference graph; the compiled programs ignore those).
void requireInputs(const ir::Graph& g, const interp::TensorMap& inputs, const std::set<std::string>& kept) {
  for (const ir::Value* v : g.inputs())
    KILN_CHECK(inputs.count(v->name) || kept.count(v->name), "missing input '{}' ({}) of @{}: neither given nor kept",
               v->name, v->type.str(), g.name());
}

/// Graph inputs read as indices (ir/IndexInputs.h): the compiled kernels do not check them, so the
/// executor does before each run, with the interpreter's message.
template <typename T>
void checkIndices(const ir::IndexInput& use, const T* at, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (at[i] < 0 || static_cast<int64_t>(at[i]) >= use.bound)
      KILN_THROW("{}{}: index {} (element {} of input '{}') is out of range [0, {}) along axis {}", use.loc, use.op,
                 static_cast<int64_t>(at[i]), i, use.input->name, use.bound, use.axis);
}

void checkIndexInputs(const std::vector<ir::IndexInput>& uses, const interp::TensorMap& inputs) {
  for (const ir::IndexInput& use : uses) {
    auto it = inputs.find(use.input->name);
    if (it == inputs.end()) continue;
    const rt::HostTensor& t = it->second;
    if (t.dtype() == DType::i64) checkIndices(use, static_cast<const int64_t*>(t.data()), t.numel());
    else if (t.dtype() == DType::i32) checkIndices(use, static_cast<const int32_t*>(t.data()), t.numel());
  }
}

/// Only the graph's inputs, copied from `inputs` or else `kept` (for the interpreter, which takes
/// nothing else); a given input replaces a kept one.
interp::TensorMap graphInputs(const ir::Graph& g, const interp::TensorMap& inputs, interp::TensorMap& kept) {
  interp::TensorMap out;
  for (const ir::Value* v : g.inputs()) {
    auto it = inputs.find(v->name);
    auto k = kept.find(v->name);
    KILN_CHECK(it != inputs.end() || k != kept.end(), "missing input '{}' ({}) of @{}: neither given nor kept",
               v->name, v->type.str(), g.name());
    if (it != inputs.end() && k != kept.end()) k->second = it->second;
    out.emplace(v->name, it != inputs.end() ? it->second : k->second);
  }
  return out;
}

class InterpExecutor final : public Executor {
 public:
  explicit InterpExecutor(const ir::Graph& g) : graph_(g.clone()), params_(interp::initializeParams(graph_)) {}

  using Executor::run;
  interp::TensorMap run(const interp::TensorMap& inputs) override {
    interp::TensorMap updated;
    interp::TensorMap out = interp::run(graph_, graphInputs(graph_, inputs, kept_), params_, &updated);
    for (auto& [name, t] : updated) params_.insert_or_assign(name, std::move(t));
    return out;
  }
  void setParams(const interp::TensorMap& params) override {
    for (auto& [name, t] : known(graph_, params)) params_.insert_or_assign(name, t);
  }
  void keepInputs(interp::TensorMap inputs) override {
    for (const ir::Value* v : graph_.inputs()) {
      auto it = inputs.find(v->name);
      if (it == inputs.end()) continue;
      KILN_CHECK(it->second.dtype() == v->type.dtype && it->second.shape() == v->type.shape,
                 "input '{}' is {}, expected {}", v->name, it->second.typeStr(), v->type.str());
      kept_.insert_or_assign(v->name, std::move(it->second));
    }
  }
  interp::TensorMap params() const override { return params_; }
  Target target() const override { return Target::Interp; }
  double compileMs() const override { return 0; }

 private:
  ir::Graph graph_;
  interp::TensorMap params_;
  interp::TensorMap kept_;
};

/// A compiled backend: the default pipeline (with the precision policy), then the backend's Program
/// (cpu::Program or cuda::Program, which share their interface).
template <typename Program, typename ProgramOptions, Target kTarget>
class CompiledExecutor final : public Executor {
 public:
  CompiledExecutor(const ir::Graph& g, const ExecutorOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    const ir::Graph compiled = passes::compiledCopy(g, options.precision, options.dumpDir);
    ProgramOptions po;
    po.dumpDir = options.dumpDir;
    if constexpr (requires { po.profile; }) po.profile = options.profile;
    // The CUDA program's disk cache of cubins (the CPU backend's is Jit::host()'s): opt-in.
    if constexpr (requires { po.cacheDir; }) po.cacheDir = codeCacheDir("cuda");
    program_ = Program::compile(compiled, po);
    indexInputs_ = ir::indexInputs(program_->graph());
    compileMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  interp::TensorMap run(const interp::TensorMap& inputs) override {
    requireInputs(program_->graph(), inputs, kept_);
    checkIndexInputs(indexInputs_, inputs);
    return program_->run(inputs);
  }
  void run(const interp::TensorMap& inputs, interp::TensorMap& outputs) override {
    if constexpr (requires { program_->run(inputs, outputs); }) {
      requireInputs(program_->graph(), inputs, kept_);
      checkIndexInputs(indexInputs_, inputs);
      program_->run(inputs, outputs);
    } else {
      Executor::run(inputs, outputs);
    }
  }
  void keepInputs(interp::TensorMap inputs) override {
    checkIndexInputs(indexInputs_, inputs);
    for (const std::string& name : inputNames(program_->graph(), inputs)) kept_.insert(name);
    program_->keepInputs(std::move(inputs));
  }
  void setParams(const interp::TensorMap& params) override { program_->setParams(known(program_->graph(), params)); }
  interp::TensorMap params() const override { return program_->params(); }
  Target target() const override { return kTarget; }
  double compileMs() const override { return compileMs_; }
  std::vector<KernelTime> kernelProfile() override {
    std::vector<KernelTime> out;
    if constexpr (requires { program_->kernelMicros(); }) {
      const std::vector<std::string> names = program_->kernelNames();
      const std::vector<double> micros = program_->kernelMicros();
      const double runs = static_cast<double>(std::max<int64_t>(program_->profiledRuns(), 1));
      if (program_->profiledRuns() > 0)
        for (size_t k = 0; k < names.size(); ++k) out.push_back({names[k], micros[k] / runs});
      program_->resetProfile();
    }
    return out;
  }

 private:
  std::unique_ptr<Program> program_;
  std::set<std::string> kept_;  // the inputs keepInputs named
  std::vector<ir::IndexInput> indexInputs_;
  double compileMs_ = 0;
};

/// Target auto: runs on the device the cost model predicts faster; after kCheckAfter runs it sets
/// the measured step time beside the prediction and, when the other device is predicted to beat
/// the measurement by more than kMargin, compiles it, times it on the same inputs and keeps the
/// faster of the two (the parameters move along).
class AutoExecutor final : public Executor {
 public:
  static constexpr int kCheckAfter = 5;
  static constexpr double kMargin = 1.25;

  AutoExecutor(const ir::Graph& g, const ExecutorOptions& options, const cost::ProgramCost& predicted, bool gpuPresent)
      : graph_(g.clone()), options_(options), predicted_(predicted), gpuPresent_(gpuPresent) {
    const bool gpuFaster = gpuPresent && predicted.hasGpu && predicted.gpuStepMicros < predicted.cpuStepMicros;
    current_ = make(gpuFaster ? Target::Cuda : Target::Cpu);
    report(fmt::format("target auto: {} (predicted {} per step on the cpu{})", targetName(current_->target()),
                       cost::timeText(predicted.cpuStepMicros),
                       predicted.hasGpu ? fmt::format(", {} on {}{}", cost::timeText(predicted.gpuStepMicros),
                                                      predicted.gpuName, gpuPresent ? "" : " (not present)")
                                        : "; no GPU"));
  }

  interp::TensorMap run(const interp::TensorMap& inputs) override {
    interp::TensorMap out;
    run(inputs, out);
    return out;
  }
  void run(const interp::TensorMap& inputs, interp::TensorMap& outputs) override {
    for (auto& [name, t] : kept_)  // a given input replaces the kept one
      if (auto it = inputs.find(name); it != inputs.end()) t = it->second;
    const auto t0 = std::chrono::steady_clock::now();
    current_->run(inputs, outputs);
    if (runs_++ > 0)  // the first run includes one-time work (CUDA graph capture)
      times_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (static_cast<int>(times_.size()) == kCheckAfter) check(inputs);
  }
  void keepInputs(interp::TensorMap inputs) override {
    // A copy for the device tried later (check()); the current one takes the tensors.
    for (const auto& [name, t] : inputs) kept_.insert_or_assign(name, t);
    current_->keepInputs(std::move(inputs));
  }
  void setParams(const interp::TensorMap& params) override { current_->setParams(params); }
  interp::TensorMap params() const override { return current_->params(); }
  Target target() const override { return current_->target(); }
  double compileMs() const override { return compileMs_; }
  std::vector<KernelTime> kernelProfile() override { return current_->kernelProfile(); }

 private:
  std::unique_ptr<Executor> make(Target t) {
    ExecutorOptions o = options_;
    o.target = t;
    std::unique_ptr<Executor> e = Executor::create(graph_, o);
    compileMs_ += e->compileMs();
    return e;
  }
  double predictedFor(Target t) const { return t == Target::Cuda ? predicted_.gpuStepMicros : predicted_.cpuStepMicros; }
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  void report(const std::string& line) const {
    if (options_.log) options_.log(line);
  }
  void check(const interp::TensorMap& inputs) {
    const Target here = current_->target(), other = here == Target::Cpu ? Target::Cuda : Target::Cpu;
    const double measured = median(times_), predicted = predictedFor(here);
    report(fmt::format("target auto: {} measured {} per step, predicted {} ({:+.0f} %)", targetName(here),
                       cost::timeText(measured), cost::timeText(predicted), 100 * (predicted - measured) / measured));
    const bool otherPossible = other == Target::Cpu || (gpuPresent_ && predicted_.hasGpu);
    if (!otherPossible || predictedFor(other) * kMargin >= measured) return;
    // The prediction was off enough that the other device may win: time it on the same inputs.
    std::unique_ptr<Executor> candidate;
    try {
      candidate = make(other);
    } catch (const Error& e) {
      report(fmt::format("target auto: {} is not usable ({}); staying on {}", targetName(other), e.what(),
                         targetName(here)));
      return;
    }
    const interp::TensorMap params = current_->params();
    candidate->setParams(params);
    if (!kept_.empty()) candidate->keepInputs(kept_);
    std::vector<double> t;
    for (int i = 0; i <= kCheckAfter; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      candidate->run(inputs);
      if (i > 0) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    const double theirs = median(t);
    if (theirs < measured) {
      // The trial runs moved a training step's parameters on: restart from the current device's.
      candidate->setParams(params);
      report(fmt::format("target auto: switching to {} ({} per step measured against {})", targetName(other),
                         cost::timeText(theirs), cost::timeText(measured)));
      current_ = std::move(candidate);
    } else {
      report(fmt::format("target auto: staying on {} ({} measured on {})", targetName(here), cost::timeText(theirs),
                         targetName(other)));
    }
  }

  ir::Graph graph_;
  ExecutorOptions options_;
  cost::ProgramCost predicted_;
  bool gpuPresent_ = false;
  std::unique_ptr<Executor> current_;
  interp::TensorMap kept_;  // what keepInputs kept, for a device tried later
  std::vector<double> times_;
  int runs_ = 0;
  double compileMs_ = 0;
};

}  // namespace

std::unique_ptr<Executor> createAuto(const ir::Graph& graph, const ExecutorOptions& options) {
  cost::ProfileOptions po;
  po.progress = options.log;
  const cost::MachineProfile mp = cost::machineProfile(po);
  const ir::Graph compiled = passes::compiledCopy(graph, options.precision);
  const cost::GpuProfile* gpu = mp.gpus.empty() ? nullptr : &mp.gpus.front();
  const cost::ProgramCost predicted = cost::predictProgram(compiled, mp.cpu, gpu);
  return std::make_unique<AutoExecutor>(graph, options, predicted, gpu != nullptr);
}

Target parseTarget(std::string_view name) {
  if (name == "cpu") return Target::Cpu;
  if (name == "interp") return Target::Interp;
  if (name == "cuda") return Target::Cuda;
  if (name == "auto") return Target::Auto;
  KILN_THROW("unknown target '{}' (targets: cpu, cuda, interp, auto)", name);
}

const char* targetName(Target t) {
  switch (t) {
    case Target::Cpu: return "cpu";
    case Target::Cuda: return "cuda";
    case Target::Interp: return "interp";
    case Target::Auto: return "auto";
  }
  return "?";
}

std::unique_ptr<Executor> Executor::create(const ir::Graph& graph, const ExecutorOptions& options) {
  if (options.target == Target::Interp) return std::make_unique<InterpExecutor>(graph);
  if (options.target == Target::Auto) return createAuto(graph, options);
  if (options.target == Target::Cuda) {
#ifdef KILN_HAVE_CUDA
    return std::make_unique<CompiledExecutor<cuda::Program, cuda::ProgramOptions, Target::Cuda>>(graph, options);
#else
    KILN_THROW("target cuda: this kiln was built without the CUDA toolkit (no CUDA backend)");
#endif
  }
  return std::make_unique<CompiledExecutor<cpu::Program, cpu::ProgramOptions, Target::Cpu>>(graph, options);
}

}  // namespace kiln::engine
