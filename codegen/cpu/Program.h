// kiln::cpu::Program — a whole graph (an inference graph or a training step) compiled by the LLVM
// CPU backend into one module of kernels and run on the plan's arena.
//
//   compile  lowers the graph's kernels (kernels::lowerGraph), renders each into one LLVM module
//            (Render.h), JIT-compiles the module once (Jit.h; identical programs hit its cache)
//   memory   one arena of the graph's memory plan for every intermediate buffer; parameters,
//            outputs and update values in buffers of their own; inputs read in place from the
//            caller's tensors; constant data filled once; one scratch area for the contractions
//   run      calls the kernels in schedule order on the thread pool; a training step's update
//            values then become the parameters (buffers swap, nothing is copied)
//
// The header is free of LLVM: tools and the DSL use it without LLVM headers.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {
class ThreadPool;
}

namespace kiln::cpu {

class Jit;

struct ProgramOptions {
  /// The pool the kernels split their work across; null: rt::ThreadPool::global().
  rt::ThreadPool* pool = nullptr;
  /// The Jit to compile with; null: Jit::host().
  Jit* jit = nullptr;
  /// When set, writes DIR/program.{ll,opt.ll,s} and, per kernel, DIR/kernels/NAME.{ll,opt.ll,s}
  /// where NAME ("k3_matmul_add_relu") says which ops the kernel holds.
  std::string dumpDir;
};

/// Figures of a compiled program.
struct ProgramStats {
  int kernels = 0;
  double lowerMs = 0;     // kernel descriptions
  double renderMs = 0;    // LLVM IR
  double compileMs = 0;   // the Jit: verify, O3, code generation, link (0 on a cache hit)
  bool cacheHit = false;
  int64_t arenaBytes = 0, scratchBytes = 0, paramBytes = 0;
};

class Program {
 public:
  /// Compiles `graph` (primitives, normally after passes::compileGraph so it is fused and has a
  /// memory plan; without a plan every intermediate gets a buffer of its own). The program keeps
  /// its own copy of the graph. Parameters start from their initializers. Throws kiln::Error when
  /// a kernel cannot be rendered or compiled, naming the kernel and its ops.
  static std::unique_ptr<Program> compile(const ir::Graph& graph, const ProgramOptions& options = {});
  ~Program();

  /// Runs the graph once on `inputs` (every graph input by name, exact dtype and shape) and
  /// returns the outputs by name. Parameters that the graph updates take their new values.
  /// Throws kiln::Error for a missing input or a wrong dtype or shape, naming it.
  interp::TensorMap run(const interp::TensorMap& inputs);

  /// Replaces parameters by name (each must exist and match its type exactly); others keep theirs.
  void setParams(const interp::TensorMap& params);
  /// The current parameters by name.
  interp::TensorMap params() const;

  const ir::Graph& graph() const;
  const ProgramStats& stats() const;
  /// The kernel names in schedule order.
  std::vector<std::string> kernelNames() const;

 private:
  Program();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
