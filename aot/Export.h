// kiln::aot — ahead-of-time compilation of a whole program (an inference graph or a training step)
// to a self-contained shared library with a C header (docs/AOT.md).
//
//   exportLibrary(graph, {.name = "mnist", .outDir = "out"}) writes
//     out/libmnist.so        the kernels as machine code (LLVM's object emission of the module the
//                            JIT would run) + the program's tables + a small C runtime (thread pool,
//                            safetensors I/O), linked by the system C compiler; it needs libc, libm
//                            and libpthread only and exports the mnist_* functions only
//     out/mnist.h            the documented C API: create/destroy, load/save weights, run/forward,
//                            train_step for training steps, tensor constants, status codes
//     out/mnist.safetensors  the parameters it starts from (given weights or the initializers)
//
// The library computes exactly what cpu::Program computes for the same graph: same kernels, same
// arena layout, same chunking of the work across the same number of threads.
//
// With target "cuda" the library runs on NVIDIA GPUs: the layout of cuda::Program (Layout.h) with
// the generated GEMM (no cuBLAS), compiled by NVRTC to a cubin per architecture (sm_80, sm_90) and
// to PTX for other GPUs, embedded as read-only data, and a C runtime that opens the CUDA driver
// with dlopen; it needs libc, libm, libpthread and libdl (docs/AOT.md).
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "passes/Pass.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::aot {

struct ExportOptions {
  /// The library's name: libNAME.so, NAME.h and the NAME_ prefix of every C symbol. A C
  /// identifier; empty: the graph's name.
  std::string name;
  /// Where to write the files (created if needed).
  std::string outDir;
  /// "cpu" or "cuda" (needs a kiln built with the CUDA toolkit; see the file comment).
  std::string target = "cpu";
  /// cuda: the SM architectures to embed cubins for (80: sm_80, …); the lowest also gets PTX, which
  /// the driver compiles for GPUs no cubin fits (of that compute capability or newer).
  std::vector<int> cudaArchitectures = {80, 90};
  /// The amp pass's policy, as for the JIT (engine::ExecutorOptions::precision).
  passes::Precision precision = passes::Precision::F32;
  /// Starting parameter values by name; parameters not named start from their initializers.
  interp::TensorMap weights;
  /// Also place the weights in the library as read-only data, so NAME_create needs no file.
  bool embedWeights = false;
  /// cpu: the LLVM CPU name the kernels are compiled for ("haswell", "znver3", "skylake-avx512",
  /// "sapphirerapids", "x86-64-v3", …), so that a build machine writes libraries for another
  /// machine; empty or "native": this machine's CPU with its features. The library checks at
  /// create that the CPU running it has every feature its code uses (the header lists them).
  std::string cpu;
  /// The C compiler that links the library; empty: $CC, else `cc`.
  std::string compiler;
  /// When set: the compilation's dump (as the JIT's) plus the generated NAME.c and the object.
  std::string dumpDir;
  /// A one-line description of where the program came from, for the header's comment.
  std::string source;
};

struct ExportResult {
  std::string library, header, weights;  // the paths written
  int64_t libraryBytes = 0;
  int kernels = 0;
  bool training = false;
  int64_t cubinBytes = 0, ptxBytes = 0;     // cuda: the embedded code
  std::vector<std::string> architectures;  // cuda: "sm_80", "sm_90", "compute_80" (the PTX)
  double compileMs = 0;  // passes, lowering, code generation (LLVM or NVRTC)
  double linkMs = 0;     // the C compiler
};

/// Compiles `graph` (primitives or composites, before passes: an inference graph or a training
/// step from passes::buildTrainingStep) with the default pipeline and writes the library. A graph
/// is a training step (NAME_train_step) when it updates parameters, has an output named "loss" and
/// three inputs, one named "lr": the first of the others is the batch, the second the labels or
/// targets. Throws kiln::Error naming what went wrong (an invalid name, no C compiler, a compiler
/// error with its output, a weight of the wrong type, an NVRTC error).
ExportResult exportLibrary(const ir::Graph& graph, const ExportOptions& options);


}  // namespace kiln::aot
