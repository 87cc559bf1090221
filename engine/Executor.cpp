#include "engine/Executor.h"

#include "codegen/cpu/Program.h"
#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/Program.h"
#endif
#include "passes/Pipeline.h"
#include "support/Error.h"

#include <chrono>

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

/// Only the graph's inputs (callers may pass more, e.g. labels to an inference graph).
interp::TensorMap graphInputs(const ir::Graph& g, const interp::TensorMap& inputs) {
  interp::TensorMap out;
  for (const ir::Value* v : g.inputs()) {
    auto it = inputs.find(v->name);
    KILN_CHECK(it != inputs.end(), "missing input '{}' ({}) of @{}", v->name, v->type.str(), g.name());
    out.emplace(v->name, it->second);
  }
  return out;
}

class InterpExecutor final : public Executor {
 public:
  explicit InterpExecutor(const ir::Graph& g) : graph_(g.clone()), params_(interp::initializeParams(graph_)) {}

  interp::TensorMap run(const interp::TensorMap& inputs) override {
    interp::TensorMap updated;
    interp::TensorMap out = interp::run(graph_, graphInputs(graph_, inputs), params_, &updated);
    for (auto& [name, t] : updated) params_.insert_or_assign(name, std::move(t));
    return out;
  }
  void setParams(const interp::TensorMap& params) override {
    for (auto& [name, t] : known(graph_, params)) params_.insert_or_assign(name, t);
  }
  interp::TensorMap params() const override { return params_; }
  Target target() const override { return Target::Interp; }
  double compileMs() const override { return 0; }

 private:
  ir::Graph graph_;
  interp::TensorMap params_;
};

/// A compiled backend: the default pipeline (with the precision policy), then the backend's Program
/// (cpu::Program or cuda::Program, which share their interface).
template <typename Program, typename ProgramOptions, Target kTarget>
class CompiledExecutor final : public Executor {
 public:
  CompiledExecutor(const ir::Graph& g, const ExecutorOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    ir::Graph compiled = g.clone();
    passes::PassContext ctx;
    ctx.dumpDir = options.dumpDir;
    ctx.precision = options.precision;
    passes::compileGraph(compiled, ctx);
    ProgramOptions po;
    po.dumpDir = options.dumpDir;
    program_ = Program::compile(compiled, po);
    compileMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  interp::TensorMap run(const interp::TensorMap& inputs) override {
    return program_->run(graphInputs(program_->graph(), inputs));
  }
  void setParams(const interp::TensorMap& params) override { program_->setParams(known(program_->graph(), params)); }
  interp::TensorMap params() const override { return program_->params(); }
  Target target() const override { return kTarget; }
  double compileMs() const override { return compileMs_; }

 private:
  std::unique_ptr<Program> program_;
  double compileMs_ = 0;
};

}  // namespace

Target parseTarget(std::string_view name) {
  if (name == "cpu") return Target::Cpu;
  if (name == "interp") return Target::Interp;
  if (name == "cuda") return Target::Cuda;
  KILN_THROW("unknown target '{}' (targets: cpu, cuda, interp)", name);
}

const char* targetName(Target t) {
  switch (t) {
    case Target::Cpu: return "cpu";
    case Target::Cuda: return "cuda";
    case Target::Interp: return "interp";
  }
  return "?";
}

std::unique_ptr<Executor> Executor::create(const ir::Graph& graph, const ExecutorOptions& options) {
  if (options.target == Target::Interp) return std::make_unique<InterpExecutor>(graph);
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
