// kiln::cuda::ProgramLayout — what the CUDA backend decides about a compiled graph before any
// device is involved: the kernels (lowered and rendered into one CUDA C++ translation unit), where
// every buffer lives, every step of a run with its launch configuration and argument locations,
// the owned buffers (constants with their values), the arena and scratch sizes and the parameter
// updates. Program (Program.h) binds a layout to device memory and runs it; `kiln aot --target
// cuda` writes it out as the tables of a library (aot/runtime/kiln_aot_cuda.c). One function makes
// both, so the JIT and the library cannot diverge. As codegen/cpu/Program.h's ProgramLayout.
//
// A run, as both execute it (on one stream, in this order):
//   1. the graph inputs are copied to their device buffers (Location::Kind::Input);
//   2. every step: a kernel launch with `args` resolved to device addresses, or a cuBLASLt product;
//   3. the outputs are copied back from their locations (before the updates: an output that is a
//      view of a parameter reads the value the step started from);
//   4. the update copies: first, for each staged update, value → its staging buffer; then, for
//      every update, the value (or its staging buffer) → the parameter. A value that is itself a
//      parameter or an input is staged, so no copy reads a parameter another copy overwrote.
//      With launch chains (Chain.h foldUpdates), where no copy is staged and no output is a
//      parameter, the copies are instead one launch among the steps and `updates` is empty.
//
// Free of CUDA headers and of any device.
#pragma once

#include "codegen/cuda/Render.h"
#include "ir/Graph.h"
#include "kernels/Kernel.h"
#include "runtime/HostTensor.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

/// Device buffers and scratch areas start at multiples of this many bytes.
constexpr int64_t kDeviceAlign = 256;
inline int64_t alignDevice(int64_t bytes) { return (bytes + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }

/// Where a buffer of a program lives on the device.
struct Location {
  enum class Kind : uint8_t {
    Input,    // graph input `index` (a device buffer of its own, filled before each run)
    Param,    // graph parameter `index`
    Arena,    // the memory plan's arena at byte `offset`
    Own,      // owned buffer `index` (ProgramLayout::owned)
    Scratch,  // the scratch buffer at byte `offset` (a scratch area of a rendered kernel)
  } kind = Kind::Arena;
  size_t index = 0;
  int64_t offset = 0;
  bool operator==(const Location&) const = default;
};

/// One step of a run, with every buffer reference resolved to a Location.
struct StepLayout {
  Step::Kind kind = Step::Kind::Launch;
  size_t kernel = 0;  // the kernel (ProgramLayout::kernels / rendered) it belongs to
  // Kind::Launch
  std::string entry;  // the entry point's name in the program's code
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t sharedBytes = 0;     // dynamic shared memory
  std::vector<Location> args;   // one pointer parameter each, in order
  // Kind::Blas: the product (its BufferRefs as rendered) and where its operands live
  BlasMatmul blas;
  Location a, b, d, bias;       // bias: only when blas.bias >= 0
};

struct ProgramLayout {
  int sm = 90;          // the architecture the kernels were rendered for (80 or 90)
  bool blasLt = true;   // matmul-form contractions as cuBLASLt steps (else the generated GEMM)
  /// The lowered kernels (schedule order). They point into the graph the layout was made from.
  std::vector<kernels::Kernel> kernels;
  std::vector<RenderedKernel> rendered;  // one per kernel
  std::string source;                    // programSource(rendered): what NVRTC compiles
  std::vector<StepLayout> steps;         // every step of every kernel, in run order

  /// Buffers without an arena slot: values the plan left out, and constants (with their values).
  struct Owned {
    ir::TensorType type;
    bool constant = false;
    rt::HostTensor value;  // constants only: the data to upload once
  };
  std::vector<Owned> owned;
  std::vector<Location> outputs;  // graph output order
  struct UpdateCopy {
    size_t param = 0;
    Location value;
    bool staged = false;  // copied to a staging buffer of its own first (see the file comment)
    int64_t bytes = 0;
  };
  /// Graph update order; updates whose value is the parameter itself are left out.
  std::vector<UpdateCopy> updates;
  int64_t arenaBytes = 0;
  int64_t scratchBytes = 0;  // the largest kernel's scratch areas, each aligned to kDeviceAlign
  int launches = 0, blasCalls = 0;
  /// Launch chains (Chain.h) among the steps, and whether the update copies are a launch.
  int chains = 0;
  bool updatesFolded = false;
  double lowerMs = 0, renderMs = 0;

  /// Whether any step is a cuBLASLt product.
  bool usesBlas() const { return blasCalls > 0; }
};

/// Lowers `graph` (after passes::compileGraph; without a memory plan every intermediate is owned),
/// renders its kernels for SM `sm` (80 or 90) and places every buffer. Throws kiln::Error naming the
/// kernel that cannot be rendered.
/// With blasLt, matmuls of fewer multiply-adds than blasMinMacs still take the generated GEMM
/// (RenderOptions::blasMinMacs). With `chain`, the update copies become one launch where they can
/// and runs of small launches become launch chains (Chain.h).
ProgramLayout layoutProgram(const ir::Graph& graph, int sm, bool blasLt = true,
                            int64_t blasMinMacs = RenderOptions::kBlasMinMacs, bool chain = true);

}  // namespace kiln::cuda
