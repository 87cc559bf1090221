// The cost model (CostModel.h; the formulas and their measured error in docs/COST.md).
#include "cost/CostModel.h"
#include "cost/GemmModel.h"

#include "kernels/Gemm.h"
#include "kernels/Simplify.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"

#if KILN_HAVE_CUDA
#include "codegen/cuda/Render.h"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

namespace kiln::cost {
namespace {

using ir::OpKind;

// ---- the CPU backend's size rules (codegen/cpu) ------------------------------------------------
// Mirrored here: the model must split a kernel across threads exactly when the backend does.
constexpr int64_t kNestParallelWork = 1 << 16;    // Render.cpp: points × exprs per grain
constexpr int64_t kOpParallelWork = 32768;        // OpEmitter.h: elements per grain
constexpr double kGemmEpilogueFlopWeight = 8;           // GemmEmitter.h kEpilogueFlopWeight (workOf)
constexpr int64_t kSmallM = 8;                    // GemmSmall.cpp: rows of the small path
constexpr double kSmallParallelBytes = 1 << 20;   // GemmSmall.cpp: bytes of B from which it splits
                                                  // (from 256 KiB on awake workers only: priced as one thread, as a call alone runs)

/// The rate of a plain elementwise op (add, mul, select, …) in kiln's vectorized loops as a
/// fraction of the FMA peak (which counts two flops per lane and FMA): loads, stores and index
/// arithmetic share the pipes. Costly ops add their measured CpuProfile::opNanos.
constexpr double kElementwiseRate = 0.25;
/// The small-M GEMM path's compute rate as a fraction of the FMA peak: a dot product loads a
/// vector of B for every FMA and the cores load two vectors a cycle beside their two FMAs, so it
/// runs at half the FMA rate at best (GemmSmall.cpp) and is usually bound by reading B.
constexpr double kSmallGemmRate = 0.5;
/// The GPU: elementwise ops at half the f32 FMA peak (one op per lane and cycle, not two).
constexpr double kGpuElementwiseRate = 0.5;
/// One step along K of the generated GEMM's blocks (load the next tile from memory, barrier,
/// compute): the slope of small generated products' device times against their K steps, fitted
/// to six products of tiny_mlp's and mnist_mlp's training steps on an H200 (docs/COST.md).
constexpr double kGpuGemmStepMicros = 0.47;

/// Nanoseconds on one thread of the loop nests of `k` (a contraction's epilogue included) beyond
/// memory: each expression at every point (plain ops at kElementwiseRate, costly ones plus their
/// measured cost), each reduction per row and element; and how many nests split across threads.
struct NestWork {
  double nanos = 0;
  int parallelNests = 0;
};

/// Nanoseconds of one evaluation of the expressions reachable from `roots` (each once: the
/// renderer evaluates a DAG once per point of one loop).
double dagNanos(const kernels::LoopNest& nest, const std::vector<int32_t>& roots, const CpuProfile& cpu, double plain) {
  std::vector<bool> seen(nest.exprs.size(), false);
  std::vector<int32_t> stack(roots.begin(), roots.end());
  double ns = 0;
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    if (i < 0 || static_cast<size_t>(i) >= seen.size() || seen[static_cast<size_t>(i)]) continue;
    seen[static_cast<size_t>(i)] = true;
    const kernels::Expr& e = nest.exprs[static_cast<size_t>(i)];
    if (e.kind == kernels::Expr::Kind::Op) ns += plain + cpu.opCost(ir::opInfo(e.op).name);
    if (e.kind == kernels::Expr::Kind::Random) ns += 20 * plain;  // a Philox round per draw
    for (int32_t a : e.args) stack.push_back(a);
  }
  return ns;
}

NestWork nestWork(const kernels::Kernel& k, const CpuProfile& cpu, bool countParallel) {
  NestWork w;
  const int lanes = std::max(cpu.f32Lanes, 1);
  const double plain = 1.0 / (std::max(cpu.peak(1), 1e-3) * kElementwiseRate);  // ns per op
  for (const kernels::LoopNest& source : k.nests) {
    const double points = static_cast<double>(ir::numElements(source.domain));
    double rows = 1;
    for (size_t d = 0; d < source.domain.size(); ++d)
      if (!source.reduced[d]) rows *= static_cast<double>(source.domain[d]);
    // As the renderer runs a nest: each reduction's body over every point (in its own loop), then
    // the outer stores once per row and the full stores over every point (one loop for all), each
    // loop evaluating what it needs.
    std::vector<int32_t> rowStores, pointStores;
    for (const kernels::Store& st : source.stores) (st.outer ? rowStores : pointStores).push_back(st.expr);
    for (const kernels::Reduction& r : source.reductions)
      w.nanos += points * (dagNanos(source, {r.body}, cpu, plain) + std::max(cpu.reduceElementNanos, plain)) +
                 rows * cpu.reduceRowNanos;
    w.nanos += points * dagNanos(source, pointStores, cpu, plain) + rows * dagNanos(source, rowStores, cpu, plain);
    if (!countParallel) continue;
    // Render.cpp's split: work items are the outer coordinates (and blocks of the lane dimension
    // when it is not reduced and the outer ones are few); a grain holds kNestParallelWork work.
    std::vector<int> group(source.domain.size(), 0);
    kernels::LoopNest nest = kernels::simplifyNest(source, group);
    if (nest.domain.empty()) continue;
    const size_t lane = nest.domain.size() - 1;
    int64_t outer = 1;
    for (size_t d = 0; d + 1 < nest.domain.size(); ++d)
      if (!nest.reduced[d]) outer *= nest.domain[d];
    int64_t blocks = 1;
    const int64_t laneSize = nest.domain[lane];
    if (!nest.reduced[lane] && outer < 8 && laneSize > 4 * lanes) {
      const int64_t laneBlock = (laneSize / 8 + lanes - 1) / lanes * lanes;
      blocks = (laneSize + laneBlock - 1) / laneBlock;
    }
    const int64_t items = nest.reduced[lane] ? outer : outer * blocks;
    const int64_t work = ir::numElements(nest.domain) * static_cast<int64_t>(std::max<size_t>(nest.exprs.size(), 1));
    const int64_t perItem = std::max<int64_t>(work / std::max<int64_t>(items, 1), 1);
    const int64_t grain = std::max<int64_t>(1, kNestParallelWork / perItem);
    if (items >= 2 * grain) ++w.parallelNests;
  }
  return w;
}

/// cuBLASLt's time for a product of `flops` at `peak` GFLOP/s (of the operands' precision):
///
///     T = t0 + flops / (peak · e(∛(m·n·k)))
///
/// t0, a call's floor, is the smallest f32 probe's time; e(s), the efficiency of the work beyond
/// it, comes from each larger probe (flops / (peakF32 · (T − t0))), interpolated in log(s) and
/// held constant outside. Returns the floor and the work apart.
std::pair<double, double> gpuGemmMicros(const GpuProfile& gpu, double peak, double flops, int64_t m, int64_t n, int64_t k) {
  const auto& pts = gpu.gemmF32;
  if (pts.size() < 2 || gpu.peakF32 <= 0) return {0, flops / (std::max(peak, 1.0) * 0.7) * 1e-3};
  const double t0 = pts.front().micros;
  std::vector<std::pair<double, double>> curve;  // (log s, efficiency)
  for (size_t i = 1; i < pts.size(); ++i) {
    const double f = 2.0 * pts[i].batch * pts[i].m * pts[i].n * pts[i].k;
    const double beyond = std::max(pts[i].micros - t0, 1e-3 * pts[i].micros);
    curve.emplace_back(std::log(std::cbrt(static_cast<double>(pts[i].m) * pts[i].n * pts[i].k)),
                       std::clamp(f / (gpu.peakF32 * beyond * 1e3), 1e-6, 1.0));
  }
  const double x = std::log(std::cbrt(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)));
  double eff = curve.front().second;
  if (x >= curve.back().first) {
    eff = curve.back().second;
  } else if (x > curve.front().first) {
    size_t i = 1;
    while (curve[i].first < x) ++i;
    const double f = (x - curve[i - 1].first) / (curve[i].first - curve[i - 1].first);
    eff = curve[i - 1].second + f * (curve[i].second - curve[i - 1].second);
  }
  return {t0, flops / (std::max(peak, 1.0) * eff) * 1e-3};
}

bool isSmallPath(const kernels::Kernel& k, const kernels::GemmForm& f) {
  if (f.m > kSmallM || f.m < 1 || k.contraction.op != OpKind::MatMul || !f.affine) return false;
  return f.a.map.bounds.empty() && f.b.map.bounds.empty();
}

Bound largest(double compute, double memory, double overhead) {
  if (overhead >= compute && overhead >= memory) return Bound::Launch;
  return compute >= memory ? Bound::Compute : Bound::Memory;
}

/// Microseconds of moving `bytes` at `gbps` GB/s.
double transferMicros(double bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e3) : 0; }

}  // namespace

std::string_view boundName(Bound b) {
  switch (b) {
    case Bound::Compute: return "compute";
    case Bound::Memory: return "memory";
    case Bound::Launch: return "launch";
    case Bound::Transfer: return "transfer";
  }
  return "?";
}

std::string cpuModelText(const CpuProfile& cpu) { return GemmModel(cpu).text(); }

CpuEstimate predictCpu(const kernels::Kernel& k, const CpuProfile& cpu) {
  CpuEstimate e;
  const int all = std::max(cpu.identity.threads, 1);
  double gemmMicros = 0, nanos = 0;  // the GEMM on its threads; the rest on one thread
  int dispatches = 0;
  if (k.hasContraction) {
    const kernels::GemmForm f = kernels::gemmForm(k);
    const double gemmFlops = kernels::productFlops(f);
    nanos = nestWork(k, cpu, false).nanos;  // the epilogue, on tiles in cache
    if (isSmallPath(k, f)) {
      e.threads = 4.0 * f.n * f.k * f.batch >= kSmallParallelBytes ? all : 1;
      gemmMicros = gemmFlops / (cpu.peak(e.threads) * kSmallGemmRate) * 1e-3;
    } else {
      e.threads = gemmFlops + kGemmEpilogueFlopWeight * f.epilogueFlops >= kGemmParallelFlops ? all : 1;
      const GemmModel model(cpu);
      gemmMicros = model.micros(k.contraction.op, k.buffers.at(static_cast<size_t>(k.contraction.a)).type.dtype,
                                f.batch, f.m, f.n, f.k, layoutOf(f));
    }
    dispatches = e.threads > 1;
  } else if (k.op) {
    // Op kernels (gather, scatter_add, pooling, one_hot, random, …): a loop over rows that splits
    // in grains of kOpParallelWork elements, mostly moving memory.
    const double elements = static_cast<double>(k.bytesRead + k.bytesWritten) / 4;
    e.threads = elements >= 2.0 * kOpParallelWork ? all : 1;
    dispatches = e.threads > 1;
    const double plain = 1.0 / (std::max(cpu.peak(1), 1e-3) * kElementwiseRate);
    nanos = static_cast<double>(k.op->result->type.numel()) * plain * (k.op->op == OpKind::Random ? 20 : 1);
    // Pooling: the profile's per-element cost of its probe (measured on the pool's threads, so
    // scaled back to one).
    const bool pool = k.op->op == OpKind::MaxPool2d || k.op->op == OpKind::AvgPool2d;
    const bool poolGrad = k.op->op == OpKind::MaxPool2dGrad || k.op->op == OpKind::AvgPool2dGrad;
    if (pool || poolGrad) {
      const double ns = cpu.opCost(pool ? "max_pool2d" : "max_pool2d_grad");
      const double input = static_cast<double>((pool ? k.op->operands.at(0) : k.op->result)->type.numel());
      if (ns > 0) nanos = input * ns * cpu.peak(all) / std::max(cpu.peak(1), 1e-9);
    }
  } else {
    NestWork w = nestWork(k, cpu, all > 1);
    nanos = w.nanos;
    dispatches = w.parallelNests;
    e.threads = w.parallelNests > 0 ? all : 1;
  }
  const double speedup = cpu.peak(e.threads) / std::max(cpu.peak(1), 1e-9);
  e.computeMicros = gemmMicros + nanos / speedup * 1e-3;
  e.memoryMicros = cpu.memoryMicros(k.bytesRead, k.bytesWritten, e.threads);
  e.overheadMicros = cpu.kernelCallMicros + dispatches * cpu.dispatchMicros;
  e.micros = e.overheadMicros + std::max(e.computeMicros, e.memoryMicros);
  e.bound = largest(e.computeMicros, e.memoryMicros, e.overheadMicros);
  return e;
}

GpuRoute gpuRouteOf(const kernels::Kernel& k, const GpuProfile& gpu) {
  GpuRoute route;
#if KILN_HAVE_CUDA
  try {
    cuda::RenderOptions ro;
    if (gpu.arch.rfind("sm_", 0) == 0) ro.sm = std::max(80, std::atoi(gpu.arch.c_str() + 3));
    const cuda::RenderedKernel r = cuda::renderKernel(k, ro);
    route.launches = std::max<int>(1, static_cast<int>(r.steps.size()));
    route.blas = std::any_of(r.steps.begin(), r.steps.end(),
                             [](const cuda::Step& s) { return s.kind == cuda::Step::Kind::Blas; });
    route.kSteps = r.gemmKSteps;
    return route;
  } catch (const Error&) {
    // A kernel the CUDA backend cannot render: count it as the backend-neutral estimate below.
  }
#endif
  if (!k.hasContraction) return route;
  for (const kernels::LoopNest& n : k.nests)
    for (const kernels::Expr& e : n.exprs)
      if (e.kind == kernels::Expr::Kind::Op) route.launches = 2;
  return route;
}

GpuEstimate predictGpu(const kernels::Kernel& k, const GpuProfile& gpu, int launches, const CostOptions& options) {
  return predictGpu(k, gpu, GpuRoute{.launches = launches, .blas = true}, options);
}

GpuEstimate predictGpu(const kernels::Kernel& k, const GpuProfile& gpu, const GpuRoute& route,
                       const CostOptions& options) {
  GpuEstimate e;
  e.launches = std::max(route.launches, 1);
  const double bytes = static_cast<double>(k.bytesRead + k.bytesWritten);
  double ops = 0, gemmMicros = 0, floorMicros = 0;
  if (k.hasContraction) {
    const kernels::GemmForm f = kernels::gemmForm(k);
    const double gemmFlops = kernels::productFlops(f);
    const DType operand = k.buffers.at(static_cast<size_t>(k.contraction.a)).type.dtype;
    const double peak = operand == DType::bf16 ? gpu.peakBf16 : operand == DType::f16 ? gpu.peakF16 : gpu.peakF32;
    std::tie(floorMicros, gemmMicros) = gpuGemmMicros(gpu, peak, gemmFlops, f.batch * f.m, f.n, f.k);
    // The generated GEMM has no cuBLASLt call to pay for; its blocks walk K one step at a time, each
    // step a round trip to memory and a barrier, with two steps' worth of prologue and epilogue.
    if (!route.blas) floorMicros = static_cast<double>(route.kSteps + 2) * kGpuGemmStepMicros;
    ops = std::max(0.0, k.flops - gemmFlops);
  } else {
    ops = k.flops;
  }
  e.computeMicros = gemmMicros + ops / (std::max(gpu.peakF32, 1.0) * kGpuElementwiseRate) * 1e-3;
  e.memoryMicros = transferMicros(bytes, gpu.bandwidthGbps);
  // cuBLASLt's floor is a per-call cost, like a launch. A graph node costs what a small kernel
  // reading its predecessor's output costs (measured since profile format 3), at least an empty node.
  const double node = options.cudaGraphs ? std::max(gpu.graphNodeMicros, gpu.graphKernelMicros) : gpu.launchMicros;
  e.launchMicros = e.launches * node + floorMicros;
  e.micros = e.launchMicros + std::max(e.computeMicros, e.memoryMicros);
  e.bound = largest(e.computeMicros, e.memoryMicros, e.launchMicros);
  return e;
}

ProgramCost predictProgram(const ir::Graph& compiled, const CpuProfile& cpu, const GpuProfile* gpu,
                           const CostOptions& options) {
  ProgramCost c;
  c.cpuThreads = cpu.identity.threads;
  for (const kernels::Kernel& k : kernels::lowerGraph(compiled)) {
    KernelCost kc;
    kc.name = k.name;
    kc.kind = k.kind;
    kc.flops = k.flops;
    kc.bytes = k.bytesRead + k.bytesWritten;
    if (k.hasContraction) {
      const kernels::GemmForm f = kernels::gemmForm(k);
      kc.batch = f.batch, kc.m = f.m, kc.n = f.n, kc.k = f.k;
    }
    kc.cpu = predictCpu(k, cpu);
    if (gpu) kc.gpu = predictGpu(k, *gpu, gpuRouteOf(k, *gpu), options);
    c.flops += kc.flops;
    c.bytes += kc.bytes;
    c.kernels.push_back(std::move(kc));
  }
  // The GPU run's host-side staging copies (rt::ThreadPool::copy): a tensor from
  // kParallelCopyBytes on is copied by every thread of the pool, a smaller one by the caller.
  double stagingMicros = 0;
  auto stage = [&](int64_t bytes) {
    const bool parallel = static_cast<size_t>(bytes) >= rt::ThreadPool::kParallelCopyBytes;
    stagingMicros += transferMicros(static_cast<double>(bytes), cpu.memoryBandwidth(parallel ? c.cpuThreads : 1));
    return bytes;
  };
  for (const ir::Value* v : compiled.inputs()) c.inputBytes += stage(v->type.bytes());
  for (const ir::Output& o : compiled.outputs()) c.outputBytes += stage(o.value->type.bytes());
  for (const ir::Update& u : compiled.updates()) c.updateBytes += u.param->type.bytes();
  c.inputs = static_cast<int>(compiled.inputs().size());
  c.outputs = static_cast<int>(compiled.outputs().size());
  c.updates = static_cast<int>(compiled.updates().size());

  for (const KernelCost& k : c.kernels) c.cpuKernelMicros += k.cpu.micros;
  // Program::run: a fixed part, then each output allocated (zero-filled) and copied out.
  c.cpuRunMicros = cpu.runMicros * std::max(1.0, 0.5 * (c.inputs + c.outputs)) +
                   transferMicros(3.0 * static_cast<double>(c.outputBytes), cpu.bandwidth(c.outputBytes, 1));
  c.cpuStepMicros = c.cpuKernelMicros + c.cpuRunMicros;

  if (gpu) {
    c.hasGpu = true;
    c.gpuName = gpu->name;
    c.gpuBandwidthGbps = gpu->bandwidthGbps;
    c.cudaGraphs = options.cudaGraphs;
    const double node = options.cudaGraphs ? gpu->graphNodeMicros : gpu->launchMicros;
    for (const KernelCost& k : c.kernels) {
      c.gpuKernelMicros += k.gpu->micros;
      c.gpuLaunchMicros += k.gpu->launchMicros;
      c.gpuLaunches += k.gpu->launches;
    }
    // One run: the host stages inputs into pinned buffers and outputs out of them; the device
    // uploads, computes, copies updated parameters over the old ones and downloads; the host
    // waits for it all. The staging copies run at memory speed, not at the cache speed of their
    // working set: the device's DMA reads and writes the pinned buffers between two runs (on an
    // H200 machine, simplenet's 16 MB batch staged by one thread at 11 GB/s, the copy ladder's
    // memory rung, where its 16 MiB rung says 22; docs/COST.md).
    const double staging = stagingMicros;
    const double copies = (c.inputs + c.outputs + c.updates) * node;
    const double wires = transferMicros(static_cast<double>(c.inputBytes), gpu->h2dGbps) +
                         transferMicros(static_cast<double>(c.outputBytes), gpu->d2hGbps) +
                         transferMicros(2.0 * static_cast<double>(c.updateBytes), gpu->bandwidthGbps);
    const double latency = (c.inputs > 0 ? gpu->transferMicros : 0) + (c.outputs > 0 ? gpu->transferMicros : 0);
    const double replay = options.cudaGraphs ? gpu->graphLaunchMicros : 0;
    c.gpuTransferMicros = staging + copies + wires + latency + replay;
    c.gpuStepMicros = c.gpuKernelMicros + c.gpuTransferMicros;
  }
  return c;
}

std::string flopText(double flops) {
  if (flops >= 1e9) return fmt::format("{:.1f} GFLOP", flops * 1e-9);
  if (flops >= 1e6) return fmt::format("{:.1f} MFLOP", flops * 1e-6);
  if (flops >= 1e3) return fmt::format("{:.1f} kFLOP", flops * 1e-3);
  return fmt::format("{:.0f} FLOP", flops);
}

std::string byteText(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes * 1e-9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes * 1e-6);
  if (bytes >= 1e3) return fmt::format("{:.1f} kB", bytes * 1e-3);
  return fmt::format("{:.0f} B", bytes);
}

std::string timeText(double micros) {
  if (micros >= 1e6) return fmt::format("{:.2f} s", micros * 1e-6);
  if (micros >= 1e3) return fmt::format("{:.2f} ms", micros * 1e-3);
  return fmt::format("{:.1f} µs", micros);
}

Verdict verdict(const ProgramCost& c, const CpuProfile& cpu) {
  Verdict v;
  const double cpuGflops = c.cpuStepMicros > 0 ? c.flops / c.cpuStepMicros * 1e-3 : 0;
  if (!c.hasGpu) {
    v.winner = Verdict::Winner::CpuOnly;
    v.line = fmt::format("CPU only (no GPU profile): {} per step, {} at {:.1f} GFLOP/s ({:.0f} % of the {}-thread peak)",
                         timeText(c.cpuStepMicros), flopText(c.flops), cpuGflops,
                         100 * cpuGflops / std::max(cpu.peak(c.cpuThreads), 1e-9), c.cpuThreads);
    return v;
  }
  const bool cpuWins = c.cpuStepMicros <= c.gpuStepMicros;
  v.ratio = cpuWins ? c.gpuStepMicros / std::max(c.cpuStepMicros, 1e-9) : c.cpuStepMicros / std::max(c.gpuStepMicros, 1e-9);
  const double gpuOverhead = c.gpuLaunchMicros + c.gpuTransferMicros;
  const double transferBytes = static_cast<double>(c.inputBytes + c.outputBytes);
  if (v.ratio < 1.1) {
    v.winner = Verdict::Winner::Even;
    v.line = fmt::format("about even ({:.2f}×, {} on the CPU, {} on {}): {} of work against {} kernel launches and {} of "
                         "transfer",
                         v.ratio, timeText(c.cpuStepMicros), timeText(c.gpuStepMicros), c.gpuName, flopText(c.flops),
                         c.gpuLaunches, byteText(transferBytes));
    return v;
  }
  if (cpuWins) {
    v.winner = Verdict::Winner::Cpu;
    if (gpuOverhead >= 0.5 * c.gpuStepMicros)
      v.line = fmt::format("CPU: {:.1f}× faster — {} kernel launches and {} of transfer outweigh {} of work", v.ratio,
                           c.gpuLaunches, byteText(transferBytes), flopText(c.flops));
    else
      v.line = fmt::format("CPU: {:.1f}× faster — {} of work runs at {} on the CPU against {} on {}", v.ratio,
                           flopText(c.flops), timeText(c.cpuKernelMicros), timeText(c.gpuKernelMicros - c.gpuLaunchMicros),
                           c.gpuName);
    return v;
  }
  v.winner = Verdict::Winner::Gpu;
  double compute = 0, memory = 0;
  for (const KernelCost& k : c.kernels) (k.cpu.bound == Bound::Memory ? memory : compute) += k.cpu.micros;
  const double gpuGflops = c.flops / std::max(c.gpuStepMicros, 1e-9) * 1e-3;
  if (compute >= memory)
    v.line = fmt::format("GPU: {:.1f}× faster — {} of mostly compute-bound work: {:.0f} GFLOP/s on {} against {:.1f} on "
                         "the CPU; {} launches and {} of transfer cost {}",
                         v.ratio, flopText(c.flops), gpuGflops, c.gpuName, cpuGflops, c.gpuLaunches,
                         byteText(transferBytes), timeText(gpuOverhead));
  else
    v.line = fmt::format("GPU: {:.1f}× faster — {} of mostly memory-bound traffic moves faster on {} ({:.0f} GB/s) than "
                         "on the CPU; {} launches and {} of transfer cost {}",
                         v.ratio, byteText(static_cast<double>(c.bytes)), c.gpuName, c.gpuBandwidthGbps, c.gpuLaunches,
                         byteText(transferBytes), timeText(gpuOverhead));
  return v;
}

}  // namespace kiln::cost
