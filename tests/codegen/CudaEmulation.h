// Runs the CUDA backend's rendered kernels on the host, so tests without a GPU can check what they
// compute against the interpreter. The program's CUDA C++ (Render.h programSource: the prelude,
// which compiles as host C++ by design, and every kernel) is compiled by the host C++ compiler
// into a shared library together with a small harness:
//
//   - a block runs as blockDim real threads (std::thread, started once per launch) sharing the
//     kernel's __shared__ arrays (function statics: blocks run one after another); __syncthreads
//     is a std::barrier, so a missing barrier or a race between stages shows up as wrong numbers;
//   - __shfl_down_sync, ldmatrix (kiln_ldmatrix_x4) and mma.sync (kiln_mma_bf16/_f16) exchange
//     values between the 32 threads of a warp through per-warp slots and barriers, following the
//     fragment layouts of the PTX ISA (mma.m16n8k16 with .bf16/.f16 operands, ldmatrix .x4) —
//     independent of how the renderer computes its addresses;
//   - cuBLASLt steps (Step::Kind::Blas) run as a plain host GEMM with the epilogue applied.
//
// The host compiler is the one that built the tests (KILN_HOST_CXX); without it, available() says so.
#pragma once

#include "codegen/cuda/Render.h"
#include "interp/Interpreter.h"
#include "kernels/Kernel.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cudatest {

/// Whether the host compiler can be run (else `why` says what is missing).
bool emulationAvailable(std::string* why);

/// A compiled program of rendered kernels.
class Emulator {
 public:
  /// Compiles `kernels` (their code and a trampoline per launch entry) into a shared library.
  /// kiln::Error with the compiler's output on failure.
  explicit Emulator(const std::vector<cuda::RenderedKernel>& kernels);
  ~Emulator();

  /// Runs the steps of `kernel` (one of those compiled) on `buffers` (one per buffer of its
  /// description) and `scratch` (one per scratch area).
  void run(const cuda::RenderedKernel& kernel, const std::vector<void*>& buffers, const std::vector<void*>& scratch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Graphs run through their rendered kernels on the host emulator, all compiled at once (one host
/// compile takes seconds, so a test adds every graph first).
class EmulatedGraphs {
 public:
  using Renderer = std::function<cuda::RenderedKernel(const kernels::Kernel&)>;
  EmulatedGraphs();
  ~EmulatedGraphs();

  /// Adds `graph` (compiled by the pass pipeline; inputs and constants, no parameters), its kernels
  /// rendered by `render` after renaming them G<index>_<name>, so that graphs share one program.
  /// Returns its index.
  size_t add(ir::Graph graph, Renderer render);
  /// Compiles the kernels of every graph added so far.
  void compile();
  /// Runs graph i on `inputs` (every result starts as garbage bytes); its outputs by name.
  interp::TensorMap run(size_t i, const interp::TensorMap& inputs);
  const ir::Graph& graph(size_t i) const;
  /// The rendered kernels of graph i.
  std::vector<cuda::RenderedKernel> rendered(size_t i) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Two CUDA constructs the emulator's harness lacks and the nest kernels use: __noinline__
/// (multi-kernel parts) and __shfl_sync (a warp's broadcast of its reduced value), defined with
/// the harness's warp exchange. Prepend it to the first kernel's code.
inline constexpr const char* kEmulatorShim = R"(
#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif
template <class T> static T __shfl_sync(unsigned, T v, int src) {
  const unsigned lane = threadIdx.x % 32;
  KilnWarp& w = kiln_emu_this_warp();
  std::memcpy(w.in[lane], &v, sizeof(T));
  w.offset = src;
  w.sync([](KilnWarp& w) {
    for (int l = 0; l < 32; ++l) std::memcpy(w.out[l], w.in[w.offset], 8);
  });
  T r;
  std::memcpy(&r, w.out[lane], sizeof(T));
  return r;
}
)";

}  // namespace kiln::cudatest
