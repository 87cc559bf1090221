// Measuring CUDA devices for the machine profile (built with the CUDA toolkit; a machine without a
// driver or a device measures nothing and says why). Device work is timed with CUDA events after a
// warm-up; latencies that include the host (launches, replays, copies) with the host clock around
// the work and a synchronisation. Every figure is the best of a few samples.
//
//   peaks       cuBLASLt products of 8192³ in f32, TF32, bf16 and f16 (f32 accumulation)
//   gemm_f32    cuBLASLt f32 products of a few sizes (what kiln's f32 contractions run), each
//               captured many times in one CUDA graph and replayed, as a program's steps are: no
//               host work per product (timed back to back on the stream, the host's work per call
//               bounded the small ones: 13.9 µs for 32³ on an H200); the stream's figures when a
//               capture fails
//   bandwidth   a 1 GiB device-to-device copy, counting the bytes read and written
//   launch      an empty kernel launched 2000 times back to back: the per-launch rate
//   graph       a captured graph of 1000 empty kernels against one of 1 kernel: the per-node cost,
//               and the replay of the one-kernel graph to completion
//   transfers   256 MiB pinned copies each way; a 4-byte pinned copy and synchronisation
#include "cost/MachineProfile.h"

#if KILN_HAVE_CUDA
#include "codegen/cuda/Nvrtc.h"
#include "runtime/Devices.h"
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"
#include "runtime/cuda/Module.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#endif

namespace kiln::cost {

#if KILN_HAVE_CUDA
namespace {

using Clock = std::chrono::steady_clock;
double microsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

/// Best device milliseconds of `reps` calls of `enqueue`, over three samples after a warm-up.
template <typename F>
double bestDeviceMs(gpu::Context& ctx, int reps, F&& enqueue) {
  enqueue();
  ctx.synchronize();
  double best = 1e30;
  for (int sample = 0; sample < 3; ++sample) {
    gpu::Event start, end;
    start.record(ctx.stream());
    for (int i = 0; i < reps; ++i) enqueue();
    end.record(ctx.stream());
    end.synchronize();
    best = std::min(best, static_cast<double>(gpu::Event::elapsedMs(start, end)) / reps);
  }
  return best;
}

/// Best host microseconds of `fn` followed by a synchronisation, over five samples after a warm-up.
template <typename F>
double bestHostMicros(gpu::Context& ctx, F&& fn) {
  fn();
  ctx.synchronize();
  double best = 1e30;
  for (int sample = 0; sample < 5; ++sample) {
    auto t0 = Clock::now();
    fn();
    ctx.synchronize();
    best = std::min(best, microsSince(t0));
  }
  return best;
}

/// Best device milliseconds per enqueue() of `reps` enqueues captured in one CUDA graph, replayed
/// after a warm-up replay (the work was run once on the stream before, so nothing is set up during
/// the capture).
template <typename F>
double bestGraphMs(gpu::Context& ctx, int reps, F&& enqueue) {
  gpu::Stream& s = ctx.stream();
  gpu::Graph graph = gpu::Graph::capture(s, [&] {
    for (int i = 0; i < reps; ++i) enqueue();
  });
  graph.launch(s);
  ctx.synchronize();
  double best = 1e30;
  for (int sample = 0; sample < 3; ++sample) {
    gpu::Event start, end;
    start.record(s);
    graph.launch(s);
    end.record(s);
    end.synchronize();
    best = std::min(best, static_cast<double>(gpu::Event::elapsedMs(start, end)) / reps);
  }
  return best;
}

/// A product's device milliseconds back to back on the stream; with `graphMs`, also replayed from a
/// graph there (-1 when the capture fails).
double gemmMs(gpu::Context& ctx, gpu::BlasLt& blas, int64_t size, DType input, bool tf32, double* graphMs = nullptr) {
  const size_t elems = static_cast<size_t>(size * size);
  gpu::DeviceBuffer a = ctx.allocate(elems * dtypeSize(input)), b = ctx.allocate(elems * dtypeSize(input));
  const DType output = input == DType::f32 ? DType::f32 : input;
  gpu::DeviceBuffer d = ctx.allocate(elems * dtypeSize(output));
  // Small random-looking bit patterns (never zeros: a zero operand can make a product faster).
  ctx.stream().memset32(a.ptr(), 0x3c003c00u, elems * dtypeSize(input) / 4);
  ctx.stream().memset32(b.ptr(), 0x3a1f3a1fu, elems * dtypeSize(input) / 4);
  gpu::MatmulDesc desc;
  desc.m = desc.n = desc.k = size;
  desc.inputType = input;
  desc.outputType = output;
  desc.allowTf32 = tf32;
  gpu::MatmulOperands ops{a.data(), b.data(), nullptr, d.data(), nullptr};
  const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  const int reps = std::clamp(static_cast<int>(2e11 / flops), 1, 200);
  const double stream = bestDeviceMs(ctx, reps, [&] { blas.matmul(desc, ops, ctx.stream()); });
  if (graphMs) {
    try {
      *graphMs = bestGraphMs(ctx, reps, [&] { blas.matmul(desc, ops, ctx.stream()); });
    } catch (const Error&) {
      *graphMs = -1;
    }
  }
  return stream;
}

GpuProfile measureDevice(int ordinal, const std::function<void(const std::string&)>& say) {
  gpu::Context ctx(ordinal);
  const gpu::DeviceProperties& props = ctx.properties();
  GpuProfile g;
  g.name = props.name;
  g.arch = props.arch();
  g.multiprocessors = props.multiprocessors;
  g.memoryBytes = props.totalMemory;
  {
    gpu::BlasLt blas(ctx);
    const int64_t big = 8192;
    const double bigFlops = 2.0 * big * big * big;
    say(fmt::format("gpu {}: cuBLASLt peaks (f32, tf32, bf16, f16)", ordinal));
    g.peakF32 = bigFlops / (gemmMs(ctx, blas, big, DType::f32, false) * 1e6);
    g.peakTf32 = bigFlops / (gemmMs(ctx, blas, big, DType::f32, true) * 1e6);
    g.peakBf16 = bigFlops / (gemmMs(ctx, blas, big, DType::bf16, false) * 1e6);
    g.peakF16 = bigFlops / (gemmMs(ctx, blas, big, DType::f16, false) * 1e6);
    // Graph figures when every capture worked, else every probe's stream figure: one kind per curve.
    std::vector<GemmPoint> stream, graph;
    for (int64_t size : {32, 128, 512, 2048}) {
      double graphMs = -1;
      stream.push_back({size, size, size, gemmMs(ctx, blas, size, DType::f32, false, &graphMs) * 1e3});
      graph.push_back({size, size, size, graphMs * 1e3});
    }
    g.gemmInGraph = std::all_of(graph.begin(), graph.end(), [](const GemmPoint& p) { return p.micros > 0; });
    g.gemmF32 = g.gemmInGraph ? std::move(graph) : std::move(stream);
  }
  {
    say(fmt::format("gpu {}: device bandwidth", ordinal));
    const size_t bytes = size_t(1) << 30;
    gpu::DeviceBuffer src = ctx.allocate(bytes), dst = ctx.allocate(bytes);
    ctx.stream().memset8(src.ptr(), 1, bytes);
    const double ms = bestDeviceMs(ctx, 5, [&] { ctx.stream().copy(dst.ptr(), src.ptr(), bytes); });
    g.bandwidthGbps = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
  }
  {
    say(fmt::format("gpu {}: launch latency and graph replay", ordinal));
    cuda::CompiledCuda code = cuda::compileCuda("extern \"C\" __global__ void kiln_profile_empty() {}\n",
                                                "profile_empty.cu", g.arch);
    gpu::Module module(ctx, code.cubin, "profile_empty.cu");
    gpu::Kernel empty = module.kernel("kiln_profile_empty");
    gpu::Stream& s = ctx.stream();
    const int launches = 2000;
    g.launchMicros = bestHostMicros(ctx, [&] {
      for (int i = 0; i < launches; ++i) empty.launchWith(s, gpu::Dim3{1}, gpu::Dim3{32}, 0);
    }) / launches;
    const int nodes = 1000;
    gpu::Graph one = gpu::Graph::capture(s, [&] { empty.launchWith(s, gpu::Dim3{1}, gpu::Dim3{32}, 0); });
    gpu::Graph many = gpu::Graph::capture(s, [&] {
      for (int i = 0; i < nodes; ++i) empty.launchWith(s, gpu::Dim3{1}, gpu::Dim3{32}, 0);
    });
    g.graphLaunchMicros = bestHostMicros(ctx, [&] { one.launch(s); });
    g.graphNodeMicros = std::max(0.0, (bestHostMicros(ctx, [&] { many.launch(s); }) - g.graphLaunchMicros) / (nodes - 1));

    // A program's small kernels are not empty: each reads what the one before it wrote. A chain of
    // such kernels (4 blocks of 256 threads, 4 floats each: 16 KB read and written) replayed as one
    // graph gives the floor of a real graph node.
    cuda::CompiledCuda chainCode = cuda::compileCuda(
        "extern \"C\" __global__ void kiln_profile_chain(float* x) {\n"
        "  const unsigned i = blockIdx.x * 1024u + threadIdx.x;\n"
        "  for (int j = 0; j < 4; ++j) x[i + 256u * j] = x[i + 256u * j] * 0.5f + 1.0f;\n"
        "}\n",
        "profile_chain.cu", g.arch);
    gpu::Module chainModule(ctx, chainCode.cubin, "profile_chain.cu");
    gpu::Kernel chain = chainModule.kernel("kiln_profile_chain");
    gpu::DeviceBuffer x = ctx.allocate(16384);
    s.memset8(x.ptr(), 0, 16384);
    const int links = 500;
    gpu::Graph chained = gpu::Graph::capture(s, [&] {
      for (int i = 0; i < links; ++i) chain.launchWith(s, gpu::Dim3{4}, gpu::Dim3{256}, 0, x.ptr());
    });
    g.graphKernelMicros = std::max(0.0, (bestHostMicros(ctx, [&] { chained.launch(s); }) - g.graphLaunchMicros) / links);
  }
  {
    say(fmt::format("gpu {}: host<->device transfers (pinned)", ordinal));
    const size_t bytes = size_t(256) << 20;
    gpu::PinnedHostBuffer host(bytes);
    std::fill_n(host.as<char>(), bytes, char(1));
    gpu::DeviceBuffer dev = ctx.allocate(bytes);
    gpu::Stream& s = ctx.stream();
    g.h2dGbps = static_cast<double>(bytes) / (bestHostMicros(ctx, [&] { s.upload(dev.ptr(), host.data(), bytes); }) * 1e3);
    g.d2hGbps = static_cast<double>(bytes) / (bestHostMicros(ctx, [&] { s.download(host.data(), dev.ptr(), bytes); }) * 1e3);
    g.transferMicros = bestHostMicros(ctx, [&] { s.upload(dev.ptr(), host.data(), 4); });
  }
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
  g.source = fmt::format("measured {} on {}", date, rt::cpuInfo().model);
  return g;
}

}  // namespace

std::vector<GpuProfile> measureGpus(const std::function<void(const std::string&)>& progress, std::string* why) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  std::string reason;
  if (!gpu::available(&reason)) {
    if (why) *why = reason;
    return {};
  }
  const int count = gpu::deviceCount();
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return {};
  }
  std::vector<GpuProfile> out;
  for (int d = 0; d < count; ++d) {
    try {
      out.push_back(measureDevice(d, say));
    } catch (const Error& e) {
      say(fmt::format("gpu {}: not measured: {}", d, e.what()));
      if (why) *why = e.what();
    }
  }
  return out;
}

#else

std::vector<GpuProfile> measureGpus(const std::function<void(const std::string&)>&, std::string* why) {
  if (why) *why = "this kiln was built without the CUDA toolkit: no CUDA device can be measured";
  return {};
}

#endif

}  // namespace kiln::cost
