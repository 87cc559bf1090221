// Measuring the CPU for the machine profile. Every figure is the best of a few samples: what the
// machine can do, since other load on a shared machine only subtracts.
//
//   peak        a loop of independent FMAs held in registers, at the vector width kiln's code uses
//               (the Jit's features: AVX-512, AVX2+FMA, or scalar multiply-add), on t threads at once
//   bandwidth   triad and copy over a ladder of working sets (64 KiB … 256 MiB: the caches, then
//               DRAM), split evenly across a pool of t threads, counting compulsory bytes only (as
//               kernels::Kernel counts them: each array read or written once)
//   read        a sum over the same ladder (reads only), so reads and writes get their own rates
//   gemm        kiln's own generated GEMM: cpu::Program on square f32 matmul graphs (16 … 1024), a
//               shallow-K product, bf16 squares (64 … 1024) and each convolution form in f32 and bf16, the
//               kernel's time from the program's per-kernel profile, on the global pool
//   ops         kiln's vectorized code for each costly elementwise op (exp, tanh, erf, div, …) and
//               for row reductions of short and long rows, on one thread, in cache
//   overheads   a one-element kernel's call, a pool job across every thread, Program::run
#include "cost/MachineProfile.h"

#include "codegen/cpu/Program.h"
#include "ir/Parser.h"
#include "passes/Pipeline.h"
#include "runtime/HostTensor.h"
#include "runtime/ThreadPool.h"
#include "support/PeakLoops.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

namespace kiln::cost {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The best time per call of `fn` over `samples` samples of enough calls to last `sampleSeconds`.
template <typename F>
double bestSeconds(F&& fn, double sampleSeconds, int samples) {
  auto t0 = Clock::now();
  int64_t calls = 0;
  do {
    fn();
    ++calls;
  } while (secondsSince(t0) < sampleSeconds / 4);
  const int64_t perSample = std::max<int64_t>(1, calls * 4);
  double best = 1e30;
  for (int s = 0; s < samples; ++s) {
    auto t = Clock::now();
    for (int64_t i = 0; i < perSample; ++i) fn();
    best = std::min(best, secondsSince(t) / static_cast<double>(perSample));
  }
  return best;
}

// ---- the FMA peak --------------------------------------------------------------------------------

constexpr int kChainsScalar = 12;

/// The scalar counterpart of support/PeakLoops.h's FMA loops, for CPUs with neither ISA.
float chainsScalar(int64_t rounds) {
  float x[kChainsScalar];
  for (int c = 0; c < kChainsScalar; ++c) x[c] = 0.5f + c;
  const float a = 0.9995f, b = 0.0005f;
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int c = 0; c < kChainsScalar; ++c) x[c] = x[c] * a + b;
  }
  float s = 0;
  for (float v : x) s += v;
  return s;
}

struct PeakLoop {
  float (*fn)(int64_t);
  double flopsPerRound;  // 2 per lane per chain
  int lanes;
};

PeakLoop peakLoop(const std::string& isa) {
  if (isa == "avx512" && __builtin_cpu_supports("avx512f")) return {fmaRoundsAvx512, kFmaAvx512FlopsPerRound, 16};
  if (isa == "avx2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {fmaRoundsAvx2, kFmaAvx2FlopsPerRound, 8};
  return {chainsScalar, 2.0 * kChainsScalar, 1};
}

/// GFLOP/s of `t` threads each running the loop at once: per thread its best rate over the
/// samples, summed. Each thread is timed alone, so a sample in which another process took one
/// core away costs only that thread's figure.
double peakWithThreads(const PeakLoop& loop, int t) {
  volatile float sink = 0;
  // Many samples of about 5 ms (rounds from a short calibration run): on a shared machine, a
  // short sample is more likely to find a core free.
  auto c0 = Clock::now();
  sink = sink + loop.fn(100000);
  const double perRound = std::max(secondsSince(c0) / 100000, 1e-10);
  const int64_t rounds = std::max<int64_t>(20000, static_cast<int64_t>(0.005 / perRound));
  std::vector<double> best(static_cast<size_t>(t), 1e30);
  for (int sample = 0; sample < 15; ++sample) {
    std::vector<std::thread> threads;
    std::vector<float> out(static_cast<size_t>(t));
    std::vector<double> seconds(static_cast<size_t>(t));
    auto body = [&](int i) {
      auto t0 = Clock::now();
      out[static_cast<size_t>(i)] = loop.fn(rounds);
      seconds[static_cast<size_t>(i)] = secondsSince(t0);
    };
    for (int i = 1; i < t; ++i) threads.emplace_back(body, i);
    body(0);
    for (std::thread& th : threads) th.join();
    for (int i = 0; i < t; ++i) best[static_cast<size_t>(i)] = std::min(best[static_cast<size_t>(i)], seconds[static_cast<size_t>(i)]);
    for (float v : out) sink = sink + v;
  }
  double gflops = 0;
  for (double s : best) gflops += loop.flopsPerRound * static_cast<double>(rounds) / s * 1e-9;
  return gflops;
}

// ---- bandwidth -----------------------------------------------------------------------------------

__attribute__((target("avx2,fma"))) void triadAvx2(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(_mm256_loadu_ps(c + i), vs, _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx512f"))) void triadAvx512(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(a + i, _mm512_fmadd_ps(_mm512_loadu_ps(c + i), vs, _mm512_loadu_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

void triadScalar(float* a, const float* b, const float* c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

void copyFloats(float* a, const float* b, int64_t n) { std::memcpy(a, b, static_cast<size_t>(n) * sizeof(float)); }

constexpr int kSums = 8;  // independent accumulators: enough that the loads, not the adds, set the pace

__attribute__((target("avx2,fma"))) float sumAvx2(const float* a, int64_t n) {
  __m256 acc[kSums];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 * kSums <= n; i += 8 * kSums) {
#pragma GCC unroll 8
    for (int j = 0; j < kSums; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(a + i + 8 * j));
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i];
  for (int j = 1; j < kSums; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  return _mm256_cvtss_f32(acc[0]) + tail;
}

__attribute__((target("avx512f"))) float sumAvx512(const float* a, int64_t n) {
  __m512 acc[kSums];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 * kSums <= n; i += 16 * kSums) {
#pragma GCC unroll 8
    for (int j = 0; j < kSums; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(a + i + 16 * j));
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i];
  for (int j = 1; j < kSums; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_cvtss_f32(acc[0]) + tail;
}

float sumScalar(const float* a, int64_t n) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += a[i + j];
  for (; i < n; ++i) s[0] += a[i];
  return s[0] + s[1] + s[2] + s[3];
}

using TriadFn = void (*)(float*, const float*, const float*, float, int64_t);

TriadFn triadFor(int lanes) {
  if (lanes == 16) return triadAvx512;
  if (lanes == 8) return triadAvx2;
  return triadScalar;
}

/// The thread counts measured: all of 1..n up to 8, else powers of two and n (the rest is
/// interpolated).
std::vector<int> threadCounts(int n) {
  std::vector<int> out;
  for (int t = 1; t <= n; t = n <= 8 ? t + 1 : t * 2) out.push_back(t);
  if (out.back() != n) out.push_back(n);
  return out;
}

/// Fills the gaps of v (measured at `measured` thread counts, 0 elsewhere) linearly.
void interpolateGaps(std::vector<double>& v, const std::vector<int>& measured) {
  for (size_t i = 1; i < measured.size(); ++i) {
    const int lo = measured[i - 1], hi = measured[i];
    for (int t = lo + 1; t < hi; ++t) {
      const double f = double(t - lo) / (hi - lo);
      v[static_cast<size_t>(t - 1)] = v[static_cast<size_t>(lo - 1)] + f * (v[static_cast<size_t>(hi - 1)] - v[static_cast<size_t>(lo - 1)]);
    }
  }
}

struct BandwidthLadders {
  std::vector<BandwidthPoint> triad, copy, read;
};

BandwidthLadders measureBandwidth(int lanes, int maxThreads, const std::function<void(const std::string&)>& say) {
  const int64_t kMostBytes = int64_t{256} << 20;
  const std::vector<int64_t> ladder = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, kMostBytes};
  // Arrays for the largest working set of either kernel (copy: half of it each), touched once so
  // their pages exist. Large allocations start at the same offset in a page, so b and c are
  // shifted by a few cache lines against a: otherwise every load would follow a store to an
  // address with the same low 12 bits (4K aliasing) and wait for it, and cache-sized working sets
  // would measure a fraction of what the caches deliver.
  // Every array starts on a cache line, as kiln's buffers do (rt::HostTensor): a vector load that
  // straddles two lines costs two, and `new float[]`'s 16-byte alignment halved every cache-sized
  // rate of the ladders before format 7 (the read sum over 256 KiB on the Xeon VM with AMX: 98 GB/s
  // at a 16-byte offset, 183 aligned).
  const int64_t most = kMostBytes / 8, shift = 272;  // 1088 bytes: 17 cache lines
  rt::HostTensor aStore(DType::f32, {most}), bStore(DType::f32, {most + shift}), cStore(DType::f32, {most + 2 * shift});
  float* const a = aStore.as<float>();
  float* const b = bStore.as<float>() + shift;
  float* const c = cStore.as<float>() + 2 * shift;
  for (int64_t i = 0; i < most; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  const TriadFn triad = triadFor(lanes);
  float (*const sum)(const float*, int64_t) = lanes == 16 ? sumAvx512 : lanes == 8 ? sumAvx2 : sumScalar;
  std::vector<float> sums(static_cast<size_t>(maxThreads));
  const std::vector<int> counts = threadCounts(maxThreads);
  BandwidthLadders out;
  for (int64_t bytes : ladder) {
    out.triad.push_back({bytes, std::vector<double>(static_cast<size_t>(maxThreads), 0)});
    out.copy.push_back({bytes, std::vector<double>(static_cast<size_t>(maxThreads), 0)});
    out.read.push_back({bytes, std::vector<double>(static_cast<size_t>(maxThreads), 0)});
  }
  for (int t : counts) {
    if (say) say(fmt::format("cpu: bandwidth, {} thread{}", t, t > 1 ? "s" : ""));
    rt::ThreadPool pool(t);
    for (size_t li = 0; li < ladder.size(); ++li) {
      const int64_t triadN = ladder[li] / 12, copyN = ladder[li] / 8, readN = ladder[li] / 4;
      auto split = [&](int64_t n, auto&& body) {
        pool.parallelFor(0, t, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t p = lo; p < hi; ++p) body(p, n * p / t, n * (p + 1) / t);
        });
      };
      // Short samples for cache-sized sets: the working set stays resident between calls.
      const double sample = ladder[li] >= (16 << 20) ? 0.01 : 0.002;
      const size_t at = static_cast<size_t>(t - 1);
      double s = bestSeconds(
          [&] {
            split(triadN, [&](int64_t, int64_t i0, int64_t i1) {
              triad(a + i0, b + i0, c + i0, 0.5f, i1 - i0);
            });
          },
          sample, 9);
      out.triad[li].gbps[at] = 12.0 * static_cast<double>(triadN) / s * 1e-9;
      s = bestSeconds(
          [&] { split(copyN, [&](int64_t, int64_t i0, int64_t i1) { copyFloats(a + i0, b + i0, i1 - i0); }); },
          sample, 9);
      out.copy[li].gbps[at] = 8.0 * static_cast<double>(copyN) / s * 1e-9;
      // The read ladder sums a and b as one array of readN floats (they are adjacent in neither
      // case, so two spans).
      s = bestSeconds(
          [&] {
            split(readN, [&](int64_t p, int64_t i0, int64_t i1) {
              const int64_t half = readN / 2;
              float v = 0;
              if (i0 < half) v += sum(a + i0, std::min(i1, half) - i0);
              if (i1 > half) v += sum(b + std::max(i0, half) - half, i1 - std::max(i0, half));
              sums[static_cast<size_t>(p)] += v;
            });
          },
          sample, 9);
      out.read[li].gbps[at] = 4.0 * static_cast<double>(readN) / s * 1e-9;
    }
  }
  for (BandwidthPoint& p : out.triad) interpolateGaps(p.gbps, counts);
  for (BandwidthPoint& p : out.copy) interpolateGaps(p.gbps, counts);
  for (BandwidthPoint& p : out.read) interpolateGaps(p.gbps, counts);
  volatile float sink = 0;
  for (float v : sums) sink = sink + v;
  return out;
}

// ---- kiln's own kernels --------------------------------------------------------------------------

interp::TensorMap randomInputs(const ir::Graph& g, float low, float high) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(low, high);
  interp::TensorMap in;
  for (const ir::Value* v : g.inputs()) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, dist(rng));
    in.emplace(v->name, std::move(t));
  }
  return in;
}

std::unique_ptr<cpu::Program> compileText(const std::string& text, bool profile) {
  ir::Graph g = ir::parseGraph(text, "<profile>");
  passes::compileGraph(g);
  cpu::ProgramOptions po;
  po.profile = profile;
  return cpu::Program::compile(g, po);
}

/// Microseconds of one run of the kernels of the graph `text` (one `input` per operand, inputs
/// drawn from [low, high)): the fastest of the runs made in `seconds` (at least ten). Each run is
/// timed alone, so a neighbour's burst costs only the runs it hits.
double kernelMicros(const std::string& text, double seconds, float low = -1, float high = 1) {
  std::unique_ptr<cpu::Program> p = compileText(text, true);
  interp::TensorMap in = randomInputs(p->graph(), low, high);
  p->run(in);  // warm: caches, pages, the pool's threads
  double best = 1e30;
  auto t0 = Clock::now();
  for (int runs = 0; runs < 10 || (secondsSince(t0) < seconds && runs < 20000); ++runs) {
    p->resetProfile();
    p->run(in);
    double total = 0;
    for (double us : p->kernelMicros()) total += us;
    best = std::min(best, total);
  }
  return best;
}

/// kiln's GEMM on C[m×n] = A[m×k]·B[k×n], `batch` of them (batched operands when above 1), of
/// `dtype` operands and result (f32 accumulation); `layout` "nt" stores B as [n,k], "tn" A as [k,m].
GemmPoint measureMatmul(int64_t m, int64_t n, int64_t k, int64_t batch = 1, const std::string& dtype = "f32",
                        const std::string& layout = "nn") {
  const std::string b = batch > 1 ? fmt::format("{},", batch) : "";
  const bool ta = layout[0] == 't', tb = layout[1] == 't';
  const std::string text = fmt::format(
      "graph @gemm {{\n  input %a : {4}[{3}{5}]\n  input %b : {4}[{3}{6}]\n"
      "  %0 = matmul(%a, %b) {{transpose_a={7}, transpose_b={8}}} : {4}[{3}{0},{1}]\n  output %c = %0\n}}\n",
      m, n, k, b, dtype, ta ? fmt::format("{},{}", k, m) : fmt::format("{},{}", m, k),
      tb ? fmt::format("{},{}", n, k) : fmt::format("{},{}", k, n), ta, tb);
  return {m, n, k, kernelMicros(text, 0.03), "matmul", batch, dtype, layout};
}

/// Each convolution form on x[8,32,14,14] and w[64,32,3,3] with padding 1 (a middle layer of a
/// small CNN at a small batch), as GEMM points of their forms (kernels/Gemm.h), with operands of
/// `dtype` (f32, or bf16 as the amp pass leaves a convolution's operands).
std::vector<GemmPoint> measureConvolutions(const std::string& dtype) {
  auto input = [&](const char* name, const char* shape) { return fmt::format("  input %{} : {}[{}]\n", name, dtype, shape); };
  const std::string x = input("x", "8,32,14,14"), w = input("w", "64,32,3,3"), dy = input("dy", "8,64,14,14");
  // The kernel's time of `op`(inputs) {attrs} with a result of `shape`.
  auto micros = [&](const std::string& inputs, const char* op, const char* operands, const char* attrs, const char* shape) {
    return kernelMicros(fmt::format("graph @conv {{\n{}  %0 = {}({}) {{{}}} : {}[{}]\n  output %r = %0\n}}\n", inputs, op,
                                    operands, attrs, dtype, shape),
                        0.03);
  };
  return {{64, 196, 288, micros(x + w, "conv2d", "%x, %w", "padding=[1,1]", "8,64,14,14"), "conv2d", 8, dtype},
          {32, 196, 576,
           micros(dy + w, "conv2d_grad_input", "%dy, %w", "input_shape=[8,32,14,14], padding=[1,1]", "8,32,14,14"),
           "conv2d_grad_input", 8, dtype},
          {64, 288, 8 * 196,
           micros(x + dy, "conv2d_grad_weight", "%x, %dy", "weight_shape=[64,32,3,3], padding=[1,1]", "64,32,3,3"),
           "conv2d_grad_weight", 1, dtype}};
}

/// The elementwise ops whose vectorized code costs more than a plain one, measured below.
constexpr const char* kCostlyOps[] = {"exp", "log", "tanh", "sigmoid", "erf", "sin", "cos", "sqrt", "rsqrt",
                                      "reciprocal", "div", "pow"};

/// Nanoseconds per element of each costly op beyond an add, on one thread with the data in cache.
std::vector<std::pair<std::string, double>> measureOps() {
  constexpr int64_t n = 16384;  // 64 KiB per operand: in L2, and small enough to stay on one thread
  auto perElement = [&](const std::string& op, bool binary) {
    const std::string text = fmt::format(
        "graph @op {{\n  input %x : f32[{0}]\n  input %y : f32[{0}]\n  %0 = {1}(%x{2}) : f32[{0}]\n"
        "  output %z = %0\n}}\n",
        n, op, binary ? ", %y" : "");
    return kernelMicros(text, 0.01, 0.5f, 1.5f) * 1e3 / n;
  };
  const double add = perElement("add", true);
  std::vector<std::pair<std::string, double>> out;
  for (const char* op : kCostlyOps) {
    const bool binary = std::string_view(op) == "div" || std::string_view(op) == "pow";
    out.emplace_back(op, std::max(0.0, perElement(op, binary) - add));
  }
  // Pooling op kernels, per element of the pooled input: 2×2 windows, stride 2, over
  // [8,32,28,28] (a small CNN's first pooling at a small batch; on the pool's threads).
  const std::string x = "  input %x : f32[8,32,28,28]\n", dy = "  input %dy : f32[8,32,14,14]\n";
  const double elements = 8.0 * 32 * 28 * 28;
  out.emplace_back("max_pool2d", kernelMicros("graph @pool {\n" + x +
                                                  "  %0 = max_pool2d(%x) {kernel=[2,2], stride=[2,2]} : f32[8,32,14,14]\n"
                                                  "  output %y = %0\n}\n",
                                              0.01) * 1e3 / elements);
  out.emplace_back("max_pool2d_grad",
                   kernelMicros("graph @pool {\n" + x + dy +
                                    "  %0 = max_pool2d_grad(%x, %dy) {kernel=[2,2], stride=[2,2]} : f32[8,32,28,28]\n"
                                    "  output %dx = %0\n}\n",
                                0.01) * 1e3 / elements);
  return out;
}

/// A row reduction's cost per row and per element: reduce_sum over rows of 32 and of 1024 of the
/// same 16384 elements, solved for the two.
std::pair<double, double> measureReductions() {
  auto rows = [](int64_t r, int64_t c) {
    const std::string text = fmt::format(
        "graph @reduce {{\n  input %x : f32[{0},{1}]\n  %0 = reduce_sum(%x) {{axes=[1]}} : f32[{0}]\n"
        "  output %s = %0\n}}\n",
        r, c);
    return kernelMicros(text, 0.01) * 1e3;
  };
  const double shortRows = rows(512, 32), longRows = rows(16, 1024);
  const double perRow = std::max(0.0, (shortRows - longRows) / (512 - 16));
  const double perElement = std::max(0.0, (longRows - 16 * perRow) / 16384);
  return {perRow, perElement};
}

struct Overheads {
  double kernelCall = 0, run = 0, dispatch = 0;
};

Overheads measureOverheads() {
  Overheads o;
  std::unique_ptr<cpu::Program> p = compileText(
      "graph @tiny {\n  input %x : f32[1]\n  %0 = add(%x, %x) : f32[1]\n  output %y = %0\n}\n", true);
  interp::TensorMap in = randomInputs(p->graph(), -1, 1);
  for (int i = 0; i < 100; ++i) p->run(in);
  double bestKernel = 1e30, bestRun = 1e30;
  for (int sample = 0; sample < 7; ++sample) {
    p->resetProfile();
    const int runs = 1000;
    auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) p->run(in);
    const double runUs = secondsSince(t0) * 1e6 / runs;
    double kernelUs = 0;
    for (double us : p->kernelMicros()) kernelUs += us;
    kernelUs /= runs;
    bestKernel = std::min(bestKernel, kernelUs);
    bestRun = std::min(bestRun, runUs - kernelUs);
  }
  o.kernelCall = bestKernel;
  o.run = std::max(bestRun, 0.0);
  rt::ThreadPool& pool = rt::ThreadPool::global();
  if (pool.threads() > 1) {
    volatile int64_t sink = 0;
    auto job = [&](int64_t b, int64_t e) { sink = sink + (e - b); };
    const double spread = bestSeconds([&] { pool.parallelFor(0, pool.threads(), 1, job); }, 0.002, 9);
    const double inline1 = bestSeconds([&] { pool.parallelFor(0, 1, 1, job); }, 0.001, 5);
    o.dispatch = std::max(0.0, (spread - inline1) * 1e6);
  }
  return o;
}

}  // namespace

CpuProfile measureCpu(const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  CpuProfile p;
  p.identity = hostIdentity();
  const PeakLoop loop = peakLoop(p.identity.isa);
  p.f32Lanes = loop.lanes;
  const int n = p.identity.threads;
  const std::vector<int> counts = threadCounts(n);
  p.peakGflops.assign(static_cast<size_t>(n), 0);
  for (int t : counts) {
    say(fmt::format("cpu: fma peak, {} thread{}", t, t > 1 ? "s" : ""));
    p.peakGflops[static_cast<size_t>(t - 1)] = peakWithThreads(loop, t);
  }
  interpolateGaps(p.peakGflops, counts);
  // bf16: on the tiles where kiln's bf16 products use them, else vdpbf16ps where they use it; where
  // they convert to f32 (no AVX512-BF16, or vdpbf16ps slower than the FMAs) the FMA peak is theirs.
  const bool tiles = amxTileDataPermitted() && __builtin_cpu_supports("avx512f");
  if (tiles || (loop.lanes == 16 && bf16DotOutrunsFma())) {
    const PeakLoop bf16 = tiles ? PeakLoop{amxRounds, kAmxFlopsPerRound, 16} : PeakLoop{bf16DotRounds, kBf16DotFlopsPerRound, 16};
    p.peakBf16Gflops.assign(static_cast<size_t>(n), 0);
    for (int t : counts) {
      say(fmt::format("cpu: bf16 peak ({}), {} thread{}", tiles ? "AMX" : "vdpbf16ps", t, t > 1 ? "s" : ""));
      p.peakBf16Gflops[static_cast<size_t>(t - 1)] = peakWithThreads(bf16, t);
    }
    interpolateGaps(p.peakBf16Gflops, counts);
  }
  BandwidthLadders bw = measureBandwidth(loop.lanes, n, say);
  p.triad = std::move(bw.triad);
  p.copy = std::move(bw.copy);
  p.read = std::move(bw.read);
  say("cpu: kernel call, dispatch and run overheads");
  Overheads o = measureOverheads();
  p.kernelCallMicros = o.kernelCall;
  p.dispatchMicros = o.dispatch;
  p.runMicros = o.run;
  say("cpu: kiln gemm, 16³ to 1024³, a shallow K, a short M, a narrow N, a batch, transposed operands, bf16 and the convolution forms");
  for (int64_t size : {16, 32, 64, 128, 256, 512, 1024}) p.gemm.push_back(measureMatmul(size, size, size));
  for (auto [m, n, k] : {std::array<int64_t, 3>{512, 512, 16}, {32, 512, 512}, {512, 32, 512}})
    p.gemm.push_back(measureMatmul(m, n, k));
  p.gemm.push_back(measureMatmul(32, 32, 32, 64));  // many small products (attention heads)
  // A transposed operand: its packing transposes, which the rows (Bᵀ: a layer's forward product)
  // or the columns (Aᵀ: a weight gradient) of a block share, so a short M or a narrow N pays it most.
  for (auto [m, n, k] : {std::array<int64_t, 3>{32, 256, 512}, {128, 256, 512}, {512, 512, 512}})
    p.gemm.push_back(measureMatmul(m, n, k, 1, "f32", "nt"));
  for (auto [m, n, k] : {std::array<int64_t, 3>{512, 32, 512}, {512, 128, 512}, {512, 512, 512}})
    p.gemm.push_back(measureMatmul(m, n, k, 1, "f32", "tn"));
  // bf16 products (the amp pass's): how much faster than f32 this CPU's bf16 path is.
  for (int64_t size : {64, 128, 256, 512, 1024}) p.gemm.push_back(measureMatmul(size, size, size, 1, "bf16"));
  // Convolutions in both: bf16 ones take the k pairs and the tiles too, but pack their operands
  // through index maps, so their gain over f32 is not the squares'.
  for (const char* dtype : {"f32", "bf16"})
    for (GemmPoint& g : measureConvolutions(dtype)) p.gemm.push_back(std::move(g));
  say("cpu: elementwise ops and row reductions");
  p.opNanos = measureOps();
  std::tie(p.reduceRowNanos, p.reduceElementNanos) = measureReductions();
  return p;
}

}  // namespace kiln::cost
