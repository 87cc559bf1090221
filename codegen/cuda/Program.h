// kiln::cuda::Program — a whole graph (an inference graph or a training step) compiled by the CUDA
// backend and run on one device.
//
//   compile  lays the program out (Layout.h layoutProgram: lowers the graph's kernels, renders
//            each into one CUDA C++ translation unit, places every buffer and resolves every
//            step's arguments — the same layout `kiln aot --target cuda` writes out), compiles the
//            kernels with NVRTC for the device's architecture in parts side by side (the prelude
//            and a share of the kernels each, balanced by code size, one per thread up to 8 and
//            at least 8 KB of kernel code each; one part when dumping), each part cached by hash in
//            memory and, optionally, on disk, loads each part's cubin as a module of its own and
//            binds the layout to device memory
//   memory   everything lives on the device for the program's life: the plan's arena for the
//            intermediates, parameters and optimizer state, outputs and update values, constant
//            data (uploaded once), the graph inputs (uploaded by each run that gives them), one
//            scratch area for the kernels that need one, cuBLASLt's workspace. Before allocating, the bytes needed
//            are checked against the device's free memory.
//   run      copies the inputs it is given to the device (through pinned buffers; inputs that
//            keepInputs keeps on the device may be left out), runs every step — kernel
//            launches (runs of small ones as launch chains, Chain.h) and cuBLASLt products — on
//            one stream, copies the new parameter values over the parameters (device to device,
//            or one launch after the steps) and the outputs back. The first run executes the
//            steps directly (cuBLASLt plans are built, shared-memory limits raised); from the
//            second on, the whole run — uploads, steps, updates, downloads — replays as one CUDA
//            graph (captured again when a run gives another set of inputs than the capture's):
//            the host does one copy per input and output (on every thread of the pool
//            from 2 MiB: rt::ThreadPool::copy) and one graph launch.
//
// The header includes no CUDA header.
#pragma once

#include "codegen/cuda/Layout.h"
#include "interp/Interpreter.h"
#include "ir/Graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cuda {

struct ProgramOptions {
  int device = 0;
  /// Matmul-form contractions through cuBLASLt (else the generated GEMM), those of at least
  /// blasMinMacs multiply-adds (RenderOptions::blasMinMacs). The environment variable
  /// KILN_CUDA_GEMM overrides both: `cublaslt` (every matmul cuBLASLt can compute), `generated`
  /// (none), `auto` (these options).
  bool blasLt = true;
  int64_t blasMinMacs = RenderOptions::kBlasMinMacs;
  /// Replay runs as a CUDA graph from the second run on.
  bool graphs = true;
  /// Update copies as one launch and runs of small launches as launch chains (Chain.h); off when
  /// profiling (each kernel keeps its own launches). The environment variable KILN_CUDA_CHAIN=0|1
  /// overrides it.
  bool chain = true;
  /// Time every kernel (kernelMicros): runs then enqueue their steps on the stream with a CUDA event
  /// after each kernel's last step, never as a graph, so each kernel's time is the device time from
  /// the previous kernel's end to its own, the launch gap included.
  bool profile = false;
  /// When set, writes DIR/program.cu and DIR/program.ptx and, per kernel, DIR/kernels/NAME.cu and
  /// DIR/kernels/NAME.ptx, where NAME ("k3_matmul_add_relu") says which ops the kernel holds.
  std::string dumpDir;
  /// When set, compiled cubins are cached there by the hash of their source and architecture
  /// (e.g. ~/.cache/kiln/cuda); the in-memory cache works without it.
  std::string cacheDir;
};

/// Figures of a compiled program.
struct ProgramStats {
  int kernels = 0;              // kernel descriptions
  int launches = 0, blasCalls = 0;  // steps of one run
  int chains = 0;                   // launch chains among them (Chain.h)
  double lowerMs = 0, renderMs = 0;
  double nvrtcMs = 0;           // 0 on a cache hit; the parts' compiles side by side, wall time
  int parts = 1;                // NVRTC translation units, one module each
  double loadMs = 0;            // cuModuleLoadData
  bool cacheHit = false;
  std::string arch;             // "sm_90"
  int64_t arenaBytes = 0, scratchBytes = 0, paramBytes = 0, deviceBytes = 0;  // deviceBytes: all of it
  size_t graphNodes = 0;        // of the captured CUDA graph (after the second run)
};

/// Forgets every cubin of the process's in-memory cache (programs keep the modules they loaded):
/// the next compile of a program reads ProgramOptions::cacheDir or runs NVRTC again.
void clearCodeCache();

class Program {
 public:
  /// Compiles `graph` (after passes::compileGraph) for CUDA device options.device. Throws
  /// kiln::Error: "no CUDA device" without one, naming the kernel on a render or NVRTC failure
  /// (with NVRTC's log), and with the bytes needed and free when the program does not fit.
  static std::unique_ptr<Program> compile(const ir::Graph& graph, const ProgramOptions& options = {});
  ~Program();

  /// Runs the graph once (see the file comment); same contract as cpu::Program::run, inputs kept
  /// by keepInputs included: the run uploads only the inputs it is given.
  interp::TensorMap run(const interp::TensorMap& inputs);
  /// Uploads `inputs` (graph inputs by name, exact dtype and shape; other entries are ignored) and
  /// keeps them on the device: later runs may leave them out and move nothing for them (a full
  /// batch that stays the same, as a framework's data on the device). A run that gives a kept
  /// input uploads that value, which is kept from then on. Same contract as cpu::Program's.
  void keepInputs(const interp::TensorMap& inputs);
  /// Replaces parameters by name (each must exist and match exactly); uploads them.
  void setParams(const interp::TensorMap& params);
  /// The current parameters, downloaded.
  interp::TensorMap params() const;

  const ir::Graph& graph() const;
  const ProgramStats& stats() const;
  /// What was bound: kernels, source, steps, buffer locations (its kernels point into graph()).
  const ProgramLayout& layout() const;
  std::vector<std::string> kernelNames() const;
  /// Milliseconds of device time of the last run (CUDA events around the steps).
  double lastRunDeviceMs() const;
  /// With ProgramOptions::profile: per kernel (schedule order), the microseconds of device time its
  /// steps took, summed over every run since compile or the last resetProfile(); zeros without
  /// profiling. As cpu::Program's, so engine::Executor reports both alike.
  std::vector<double> kernelMicros() const;
  /// The runs kernelMicros() sums over.
  int64_t profiledRuns() const;
  void resetProfile();

 private:
  Program();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The CUDA C++ source of `graph`'s kernels for SM architecture `sm` (80, 90): what Program
/// compiles (layoutProgram(graph, sm, blasLt).source), without a device. For tests and `kiln` dumps on machines without a GPU.
std::string programSourceFor(const ir::Graph& graph, int sm, bool blasLt = true);

}  // namespace kiln::cuda
