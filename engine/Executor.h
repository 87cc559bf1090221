// An executor runs one graph — an inference graph or a whole training step — on a target and owns
// its parameters (and optimizer state) between runs:
//
//   cpu     the LLVM CPU backend (the default): the default pass pipeline, then one JIT-compiled
//           program of vectorized, multi-threaded kernels (codegen/cpu/Program.h)
//   cuda    the CUDA backend: the same pipeline, then one NVRTC-compiled program of kernels and
//           cuBLASLt products on a GPU, replayed as a CUDA graph (codegen/cuda/Program.h)
//   interp  the reference interpreter: slow and obvious, the oracle
//   auto    the device the cost model (cost/CostModel.h) predicts to be faster for this graph; after
//           the first steps the measurement is set beside the prediction, and when the prediction
//           was wrong by more than a margin and the other device may win, that one is tried too
//           and the faster kept
//
//   auto step = kiln::engine::Executor::create(model.trainStep);      // --target cpu
//   for (…) {
//     TensorMap out = step->run({{"x", x}, {"labels", y}, {"lr", lr}});   // parameters update
//   }
//   auto infer = kiln::engine::Executor::create(model.inferenceForBatch(n));
//   infer->setParams(step->params());   // the names the inference graph shares with the step
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "passes/Pass.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

enum class Target { Cpu, Cuda, Interp, Auto };

/// "cpu", "cuda", "interp" or "auto"; kiln::Error listing the targets for anything else.
Target parseTarget(std::string_view name);
const char* targetName(Target t);

struct ExecutorOptions {
  Target target = Target::Cpu;
  /// The amp pass's policy: f32, or bf16/f16 contractions with f32 accumulation.
  passes::Precision precision = passes::Precision::F32;
  /// When set, the compilation is dumped there (pass by pass, kernels, and for cpu each kernel's
  /// LLVM IR and assembly; see docs/CLI.md "Dumps").
  std::string dumpDir;
  /// Times every kernel of every run (cpu; see Executor::kernelProfile).
  bool profile = false;
  /// Where target auto reports its choice and, after the first steps, the measurement beside the
  /// prediction (one line each); null: quiet.
  std::function<void(const std::string&)> log;
};

/// One kernel's share of a run (Executor::kernelProfile).
struct KernelTime {
  std::string name;   // "k3_matmul_add_relu"
  double micros = 0;  // mean per run
};

class Executor {
 public:
  /// Compiles `graph` for the target (the executor keeps its own copy). Parameters start from
  /// their initializers. Throws kiln::Error when the graph cannot be compiled.
  static std::unique_ptr<Executor> create(const ir::Graph& graph, const ExecutorOptions& options = {});
  virtual ~Executor() = default;

  /// Runs the graph once: every graph input by name, exact dtype and shape (extra entries are
  /// ignored). Returns the outputs by name; parameters the graph updates take their new values.
  virtual interp::TensorMap run(const interp::TensorMap& inputs) = 0;
  /// As run(inputs), into `outputs`: on the cpu target an entry that already has its output's
  /// dtype and shape is reused — nothing is allocated or copied for it (cpu::Program::run) —, so a
  /// loop that keeps `outputs` allocates nothing per step. Other targets replace the entries.
  virtual void run(const interp::TensorMap& inputs, interp::TensorMap& outputs) {
    for (auto& [name, t] : run(inputs)) outputs.insert_or_assign(name, std::move(t));
  }
  /// Keeps `inputs` (graph inputs by name, exact dtype and shape; other entries are ignored) for
  /// the runs that follow, which may leave them out: a full batch that stays the same is moved to
  /// the device once (cuda) and never copied again. A run that gives a kept input uses that value
  /// and keeps it from then on. A run that leaves out an input neither given nor kept is a
  /// kiln::Error naming it.
  virtual void keepInputs(interp::TensorMap inputs) = 0;
  /// Replaces the parameters named in `params` that this graph has (others are ignored; a
  /// parameter of another dtype or shape is a kiln::Error).
  virtual void setParams(const interp::TensorMap& params) = 0;
  /// The current parameters by name.
  virtual interp::TensorMap params() const = 0;
  /// The target it runs on (for auto: the device chosen so far).
  virtual Target target() const = 0;
  /// With ExecutorOptions::profile on the cpu or cuda target: per kernel, in schedule order, its mean time
  /// per run since the last call (then reset); empty otherwise.
  virtual std::vector<KernelTime> kernelProfile() { return {}; }
  /// Milliseconds spent compiling (pipeline and code generation; 0 for the interpreter).
  virtual double compileMs() const = 0;
};

/// Executor::create for Target::Auto with the cached machine profile (measured on first use).
std::unique_ptr<Executor> createAuto(const ir::Graph& graph, const ExecutorOptions& options);

}  // namespace kiln::engine
