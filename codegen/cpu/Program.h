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
#include "support/FloatMode.h"

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
  /// where NAME ("k3_matmul_add_relu") says which ops the kernel holds. The module then defines
  /// the shared GEMM routines it calls instead of linking the prebuilt ones (same IR), so the
  /// dump shows all the code.
  std::string dumpDir;
  /// Times every kernel call of every run (a clock read before and after each call; see
  /// Program::kernelMicros). Off: nothing is timed.
  bool profile = false;
  /// How the kernels treat subnormal floats (support/FloatMode.h): flushed to zero unless
  /// KILN_DENORMALS=keep. The thread that runs the program gets its own mode back after each run.
  Denormals denormals = denormalsFromEnvironment();
};

/// Figures of a compiled program.
struct ProgramStats {
  int kernels = 0;
  double lowerMs = 0;     // kernel descriptions
  double renderMs = 0;    // LLVM IR
  double compileMs = 0;   // the Jit: verify, optimize, code generation, link (0 on a cache hit; the load on a disk hit)
  int compileParts = 1;   // the parts the module was compiled as in parallel (Jit, ModuleSplit.h)
  bool cacheHit = false;
  bool diskHit = false;   // loaded from the Jit's disk cache (JitOptions::cacheDir), not compiled
  // Shared GEMM routines the module calls: linked from the Jit's prebuilt ones (PrebuiltGemm.h),
  // or compiled with it (no prebuilt routines for this target, a dump, `kiln aot`).
  int gemmRoutinesLinked = 0, gemmRoutinesCompiled = 0;
  // Contractions whose bf16 operands are packed as k pairs for vdpbf16ps (Gemm.h's
  // contractionUsesBf16Pairs); the others convert bf16 to f32.
  int bf16PairContractions = 0;
  // Of those, the contractions that multiply on AMX tiles (Gemm.h's contractionUsesAmx).
  int amxContractions = 0;
  int64_t arenaBytes = 0, scratchBytes = 0, paramBytes = 0;
  // Parameter updates computed straight into the parameter's buffer (kernels::updatesInPlace);
  // the others are written to a buffer of their own that then trades places with the parameter.
  int updatesInPlace = 0;
};

/// Where a buffer of a program lives.
struct Location {
  enum class Kind : uint8_t { Input, Param, Arena, Own } kind = Kind::Arena;
  size_t index = 0;    // Input: graph input; Param: graph parameter; Own: owned buffer
  int64_t offset = 0;  // Arena: byte offset
  bool operator==(const Location&) const = default;
};

/// Where everything of a compiled program lives and what its kernels read and write, free of any
/// address: Program binds it to memory; `kiln aot` writes it out as tables (aot/runtime/kiln_aot.h).
struct ProgramLayout {
  struct KernelCall {
    std::string name;             // the kernel's function, "k3_matmul_add_relu"
    std::vector<Location> args;   // its buffers (kernels::Kernel::buffers order); one scratch area follows
    int64_t scratchBase = 0;      // scratch bytes with T threads: scratchBase + T * scratchPerThread
    int64_t scratchPerThread = 0;
  };
  std::vector<KernelCall> kernels;  // schedule order
  /// Buffers without an arena slot; constants hold their values, the others zeros.
  std::vector<rt::HostTensor> owned;
  std::vector<bool> ownedIsConstant;
  std::vector<Location> outputs;  // graph output order
  struct UpdateCopy {
    size_t param = 0;
    Location value;
  };
  std::vector<UpdateCopy> updates;  // graph update order
  int64_t arenaBytes = 0;

  int64_t scratchBytes(int threads) const;
};

/// A program as an object file, for `kiln aot`.
struct ObjectOptions {
  Jit* jit = nullptr;  // null: Jit::host()
  /// Read-only data to place in the object as 64-byte aligned globals (name, bytes), e.g. the
  /// constants and embedded weights of an AOT library.
  std::vector<std::pair<std::string, std::string>> blobs;
  /// When set, the bytes of the layout's constant owned buffers become one blob of this name
  /// (each 64-byte aligned; ProgramObject::constantOffsets says where).
  std::string constantsSymbol;
  std::string dumpDir;  // as ProgramOptions::dumpDir
};
struct ProgramObject {
  ProgramLayout layout;
  /// An ELF relocatable object (position-independent) holding every kernel function (named as in
  /// layout.kernels) and the blobs, all with hidden visibility; calls kiln_parallel_for.
  std::string object;
  /// The instruction-set features the code was generated for that a CPU may lack (LLVM names:
  /// "avx2", "fma", "avx512f", …).
  std::vector<std::string> cpuFeatures;
  /// Per owned buffer: its offset in the constants blob, or -1 (not a constant, or no blob asked).
  std::vector<int64_t> constantOffsets;
  bool hasConstants = false;
  ProgramStats stats;
};

/// Lowers and renders `graph` exactly as Program::compile does and emits the module as an object.
ProgramObject compileObject(const ir::Graph& graph, const ObjectOptions& options = {});

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
  /// As run(inputs), into `outputs`: an output whose entry there already has its dtype and shape
  /// is written without allocating — in the common case (the output is a buffer of the program's
  /// own) the entry's storage and the program's trade places, nothing is copied, and the old
  /// storage is where the next run writes. Other entries are replaced; entries that name no
  /// output are left alone. Keep `outputs` across runs of a loop to allocate nothing per run.
  void run(const interp::TensorMap& inputs, interp::TensorMap& outputs);
  /// Keeps `inputs` (graph inputs by name, exact dtype and shape; other entries are ignored) for
  /// the runs that follow, which may then leave them out and read the kept tensors (moved in, never
  /// copied per run). A run that gives a kept input uses that value, which is kept (copied) from
  /// then on. Same contract as cuda::Program's, where kept inputs stay on the device.
  void keepInputs(interp::TensorMap inputs);

  /// Replaces parameters by name (each must exist and match its type exactly); others keep theirs.
  void setParams(const interp::TensorMap& params);
  /// The current parameters by name.
  interp::TensorMap params() const;

  const ir::Graph& graph() const;
  const ProgramStats& stats() const;
  const ProgramLayout& layout() const;
  /// The kernel names in schedule order.
  std::vector<std::string> kernelNames() const;
  /// With ProgramOptions::profile: per kernel (schedule order), the microseconds its calls took,
  /// summed over every run since compile or the last resetProfile(); zeros without profiling.
  std::vector<double> kernelMicros() const;
  /// The runs kernelMicros() sums over.
  int64_t profiledRuns() const;
  void resetProfile();

 private:
  Program();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
