// The cost model: each kernel's predicted time on the CPU and on a GPU, from the kernel
// descriptions of a compiled graph (kernels::lowerGraph) and a machine profile (MachineProfile.h).
// See docs/COST.md for the formulas and their measured error.
//
//   CPU  call + dispatch + max(compute, memory), on the threads the backend splits it across (the
//        same size rules as codegen/cpu: small kernels stay on the calling thread)
//          contraction  GEMM flops / (peak · efficiency of kiln's GEMM at that size and shape),
//                       epilogue flops at the elementwise rate
//          loop nests   weighted scalar ops / elementwise rate (transcendentals count as several)
//          memory       compulsory bytes / triad bandwidth at the kernel's working set
//   GPU  per step (launch, or node of a replayed CUDA graph) + max(compute, memory)
//          contraction  flops / (cuBLASLt peak of the operand precision · efficiency at that size)
//          others       flops / half the f32 peak, bytes / device bandwidth
//        plus, once per program run: the graph replay, the inputs' upload and the outputs'
//        download (pinned, with their latency), the host-side staging copies, and the
//        device-to-device copies of a training step's updated parameters
//
// The bound of a kernel is the largest of its terms: compute, memory, or launch (per-call costs:
// the CPU's call and dispatch, the GPU's launch or graph node); transfer is a program's.
#pragma once

#include "cost/MachineProfile.h"
#include "ir/Graph.h"
#include "kernels/Kernel.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cost {

enum class Bound : uint8_t { Compute, Memory, Launch, Transfer };
/// "compute", "memory", "launch", "transfer".
std::string_view boundName(Bound b);

struct CpuEstimate {
  double micros = 0;
  Bound bound = Bound::Launch;
  int threads = 1;                 // the threads the backend splits the kernel across
  double computeMicros = 0, memoryMicros = 0, overheadMicros = 0;
};

struct GpuEstimate {
  double micros = 0;
  Bound bound = Bound::Launch;
  int launches = 1;                // kernel launches and cuBLASLt calls of the kernel
  double computeMicros = 0, memoryMicros = 0;
  double launchMicros = 0;         // per-call costs: launches or graph nodes, and cuBLASLt's floor
};

struct KernelCost {
  std::string name;                // "k3_matmul_add_relu"
  ir::KernelKind kind = ir::KernelKind::Loop;
  double flops = 0;
  int64_t bytes = 0;               // compulsory reads + writes
  /// The GEMM form of a contraction (kernels/Gemm.h); zeros otherwise.
  int64_t batch = 0, m = 0, n = 0, k = 0;
  CpuEstimate cpu;
  std::optional<GpuEstimate> gpu;  // with a GPU profile
};

struct ProgramCost {
  std::vector<KernelCost> kernels;  // schedule order
  double flops = 0;
  int64_t bytes = 0;
  int64_t inputBytes = 0, outputBytes = 0, updateBytes = 0;
  int inputs = 0, outputs = 0, updates = 0;
  int cpuThreads = 1;

  double cpuKernelMicros = 0;   // Σ kernels
  double cpuRunMicros = 0;      // Program::run around them: fixed cost and the outputs' copies
  double cpuStepMicros = 0;     // the two

  bool hasGpu = false;
  std::string gpuName;
  double gpuBandwidthGbps = 0;
  bool cudaGraphs = true;
  int gpuLaunches = 0;
  double gpuKernelMicros = 0;   // Σ kernels (launch costs included)
  double gpuLaunchMicros = 0;   // of which per-launch costs
  double gpuTransferMicros = 0; // uploads, downloads, staging, update copies, replay
  double gpuStepMicros = 0;
};

struct CostOptions {
  /// The GPU replays a program as a CUDA graph (cuda::Program from its second run on); false:
  /// every kernel is a stream launch.
  bool cudaGraphs = true;
};

/// What the model makes of a CPU profile: the GEMM model's fitted coefficients, the convolution
/// factors and each GEMM probe against the fit (`kiln profile`).
std::string cpuModelText(const CpuProfile& cpu);

/// The CPU estimate of one kernel.
CpuEstimate predictCpu(const kernels::Kernel& k, const CpuProfile& cpu);
/// How the CUDA backend runs a kernel.
struct GpuRoute {
  int launches = 1;     // steps: kernel launches and cuBLASLt products
  bool blas = true;     // a contraction's product is a cuBLASLt call (else the generated GEMM)
  int64_t kSteps = 0;   // the generated GEMM's steps along K per block (its latency chain)
};
/// The GPU estimate of one kernel run as `route` says.
GpuEstimate predictGpu(const kernels::Kernel& k, const GpuProfile& gpu, const GpuRoute& route,
                       const CostOptions& options = {});
/// The same with `launches` steps and a contraction's product through cuBLASLt.
GpuEstimate predictGpu(const kernels::Kernel& k, const GpuProfile& gpu, int launches, const CostOptions& options = {});
/// How the CUDA backend runs kernel `k`: from its renderer (default options: small products take
/// the generated GEMM) where this kiln has the CUDA backend, else 1 step (2 for a contraction with
/// an epilogue) with the product through cuBLASLt.
GpuRoute gpuRouteOf(const kernels::Kernel& k, const GpuProfile& gpu);

/// Predicts a compiled graph (after passes::compileGraph): every kernel on the CPU and, when `gpu`
/// is given, on that GPU, and the whole step on each.
ProgramCost predictProgram(const ir::Graph& compiled, const CpuProfile& cpu, const GpuProfile* gpu,
                           const CostOptions& options = {});

/// Which device wins and why, in one line: "CPU: 3.1× faster — 18 kernel launches and 0.4 MB of
/// transfer outweigh 0.2 MFLOP of work". Without a GPU in `c`, says so and gives the CPU figure.
struct Verdict {
  enum class Winner : uint8_t { Cpu, Gpu, Even, CpuOnly } winner = Winner::CpuOnly;
  double ratio = 1;  // the slower step time over the faster
  std::string line;
};
Verdict verdict(const ProgramCost& c, const CpuProfile& cpu);

/// "0.2 MFLOP", "8.1 GFLOP"; "0.4 MB", "1.2 GB"; "12.3 µs", "4.1 ms".
std::string flopText(double flops);
std::string byteText(double bytes);
std::string timeText(double micros);

}  // namespace kiln::cost
