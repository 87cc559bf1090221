// The GEMM anchors and the measured FP32 peak of kiln's CPU benchmark (issue 5, scripts/bench.sh).
//
//   kiln_anchors [--filter REGEX] [--threads 1,2] [--budget SECONDS]
//
// Prints one JSON line per measurement on stdout, the format of bench/report.py:
//   {"workload": "gemm/NT/10000x1000x512/t2", "impl": "openblas", "ms": 61.2, "runs": 5, "gflops": 167.3, ...}
// GEMM workloads are named gemm/LAYOUT/MxNxK/tTHREADS for C[M,N] = op(A)·op(B) with K the inner
// dimension, every matrix row-major; LAYOUT's first letter says whether A is stored transposed
// (K×M), the second whether B is (N×K). A layer's forward product is NN, its input gradient
// dA = dC·Bᵀ is NT and its weight gradient dB = Aᵀ·dC is TN. "ms" is the median time of one call.
// peak/fma/tT is a register-only FMA loop (AVX-512 where the CPU has it, else AVX2) on T threads,
// run before and after the GEMMs; its "gflops" is the best sample, since noise on a shared machine
// only ever slows a loop down. The bf16 peaks likewise: peak/bf16dot/tT, vdpbf16ps on registers
// (AVX512-BF16), and peak/amx/tT, tdpbf16ps on tiles (AMX, where Linux grants the tile data): the
// bf16 workloads' "% peak" is against the higher of the two.
//
// Implementations: oneDNN's dnnl_sgemm and its matmul primitive (f32; and bf16 inputs with f32
// output where this oneDNN has a bf16 kernel for the CPU, as the workload gemm/…/tT/bf16 beside
// kiln's bf16 GEMM) and OpenBLAS's cblas_sgemm. Threads are OpenMP's, shared by both libraries
// (Debian's libopenblas0-openmp).
#include "support/PeakLoops.h"

#include <cblas.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::regex filter{""};
  std::vector<int> threads{1, 2};
  double budget = 0.3;  // seconds of timed samples per measurement
};

struct Timing {
  double medianMs, bestMs;
  int runs;
};

/// Times fn() (one call = one unit of work): a warm-up call (it may generate code), calls for a
/// millisecond to estimate one call's time, then samples of as many calls as make a sample last
/// ~20 ms, until the budget is spent (at least 3 samples, at most 50).
Timing timeCalls(const std::function<void()>& fn, double budget) {
  fn();
  int calls = 0;
  auto t0 = Clock::now();
  do {
    fn();
    ++calls;
  } while (secondsSince(t0) < 1e-3);
  double once = secondsSince(t0) / calls;
  int perSample = std::max(1, static_cast<int>(0.02 / once));
  std::vector<double> perCall;
  auto start = Clock::now();
  while (perCall.size() < 50 && (perCall.size() < 3 || secondsSince(start) < budget)) {
    auto s = Clock::now();
    for (int i = 0; i < perSample; ++i) fn();
    perCall.push_back(secondsSince(s) / perSample);
  }
  std::sort(perCall.begin(), perCall.end());
  return {perCall[perCall.size() / 2] * 1e3, perCall.front() * 1e3, static_cast<int>(perCall.size()) * perSample};
}

void emit(const std::string& workload, const std::string& impl, const Timing& t, double flops, int threads,
          const std::string& variant) {
  std::printf(
      "{\"workload\": \"%s\", \"impl\": \"%s\", \"ms\": %.6g, \"runs\": %d, \"gflops\": %.4g, \"threads\": %d, "
      "\"variant\": \"%s\"}\n",
      workload.c_str(), impl.c_str(), t.medianMs, t.runs, flops / (t.medianMs * 1e6), threads, variant.c_str());
  std::fflush(stdout);
}

void emitSkip(const std::string& workload, const std::string& impl, const std::string& why) {
  std::printf("{\"workload\": \"%s\", \"impl\": \"%s\", \"skipped\": \"%s\"}\n", workload.c_str(), impl.c_str(),
              why.c_str());
  std::fflush(stdout);
}

// --- the FP32 FMA peak ---------------------------------------------------------------------------

// The loops are support/PeakLoops.h's, which the machine profile times too.

/// The best sample of `loop` (returning a value that depends on all its work) on each thread
/// count as workload peak/NAME/tT, `flopsPerThread` a call.
void benchLoop(const Options& opt, const std::string& name, const char* impl, const std::function<float()>& loop,
               double flopsPerThread, const std::string& note) {
  volatile float sink = 0;  // keeps the loops' results alive
  for (int t : opt.threads) {
    std::string workload = "peak/" + name + "/t" + std::to_string(t);
    if (!std::regex_search(workload, opt.filter)) continue;
    auto run = [&] {
      std::vector<float> results(t);
      std::vector<std::thread> pool;
      for (int i = 0; i < t; ++i) pool.emplace_back([&, i] { results[i] = loop(); });
      for (auto& th : pool) th.join();
      for (float r : results) sink = sink + r;
    };
    Timing tm = timeCalls(run, std::max(opt.budget, 1.0));
    // Report the best sample: the peak is what the core can do, and other load only subtracts.
    Timing best{tm.bestMs, tm.bestMs, tm.runs};
    emit(workload, impl, best, flopsPerThread * t, t, note);
  }
}

void benchBf16Peaks(const Options& opt) {
  const int64_t iters = 20'000'000;
  if (__builtin_cpu_supports("avx512bf16"))
    benchLoop(opt, "bf16dot", "vdpbf16ps", [&] { return kiln::bf16DotRounds(iters); },
              kiln::kBf16DotFlopsPerRound * iters, "24 accumulators, best sample");
  if (kiln::amxTileDataPermitted()) {
    const int64_t tileIters = iters / 8;  // a tdpbf16ps is 256 times a vdpbf16ps's work
    benchLoop(opt, "amx", "tdpbf16ps", [&] { return kiln::amxRounds(tileIters); }, kiln::kAmxFlopsPerRound * tileIters,
              "4 accumulator tiles, best sample");
  }
}

void benchPeak(const Options& opt) {
  bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    emitSkip("peak/fma/t1", "fma", "the CPU has neither AVX-512 nor AVX2+FMA");
    return;
  }
  const char* impl = avx512 ? "fma-avx512" : "fma-avx2";
  const int64_t iters = 20'000'000;  // ~0.1-0.2 s per thread at 2-3 GHz
  const double flopsPerThread = iters * (avx512 ? kiln::kFmaAvx512FlopsPerRound : kiln::kFmaAvx2FlopsPerRound);
  benchLoop(opt, "fma", impl, [&] { return avx512 ? kiln::fmaRoundsAvx512(iters) : kiln::fmaRoundsAvx2(iters); },
            flopsPerThread,
            std::to_string(avx512 ? kiln::kFmaChainsAvx512 : kiln::kFmaChainsAvx2) + " accumulators, best sample");
  benchBf16Peaks(opt);
}

// --- GEMM ----------------------------------------------------------------------------------------

/// One GEMM problem: C[M,N] = op(A)·op(B), op(A) M×K, op(B) K×N.
struct Gemm {
  int64_t m, n, k;
  bool transA, transB;
  std::string name(int threads) const {
    return std::string("gemm/") + (transA ? 'T' : 'N') + (transB ? 'T' : 'N') + '/' + std::to_string(m) + 'x' +
           std::to_string(n) + 'x' + std::to_string(k) + "/t" + std::to_string(threads);
  }
  int64_t lda() const { return transA ? m : k; }
  int64_t ldb() const { return transB ? k : n; }
  double flops() const { return 2.0 * m * n * k; }
};

/// A forward product X[M,K]·W[K,N] and its two backward forms.
std::vector<Gemm> withBackward(int64_t m, int64_t k, int64_t n) {
  return {{m, n, k, false, false},   // forward: C = A·B
          {m, k, n, false, true},    // dA[M,K] = dC[M,N]·Bᵀ, B stored K×N
          {k, n, m, true, false}};   // dB[K,N] = Aᵀ·dC, A stored M×K
}

std::vector<float> randomMatrix(int64_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(size);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> toBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    out[i] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
  }
  return out;
}

void setThreads(int t) {
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

/// oneDNN's matmul primitive on plain row-major layouts (a framework's tensors; no blocked
/// weights chosen by the library, whose reorder would not be counted). Skips where oneDNN has no
/// kernel for this CPU but its reference loop, which is no anchor.
void benchMatmul(const Gemm& g, int threads, dnnl::memory::data_type dt, const char* impl, void* a, void* b, float* c,
                 const Options& opt) {
  using tag = dnnl::memory::format_tag;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::memory::desc aMd({g.m, g.k}, dt, g.transA ? tag::ba : tag::ab);
  dnnl::memory::desc bMd({g.k, g.n}, dt, g.transB ? tag::ba : tag::ab);
  dnnl::memory::desc cMd({g.m, g.n}, dnnl::memory::data_type::f32, tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(aMd, bMd, cMd), engine, /*allow_empty=*/true);
  // bf16 operands are a workload of their own (gemm/…/tT/bf16), compared with kiln's bf16 GEMM.
  std::string workload = g.name(threads) + (dt == dnnl::memory::data_type::bf16 ? "/bf16" : "");
  if (!pd) return emitSkip(workload, impl, "oneDNN has no implementation for this CPU");
  std::string info = pd.impl_info_str();
  if (info.find("ref") != std::string::npos) return emitSkip(workload, impl, "only oneDNN's reference loop (" + info + ")");
  dnnl::matmul prim(pd);
  dnnl::memory am(aMd, engine, a), bm(bMd, engine, b), cm(cMd, engine, c);
  Timing t = timeCalls(
      [&] {
        prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        stream.wait();
      },
      opt.budget);
  emit(workload, impl, t, g.flops(), threads, info);
}

void benchGemm(const Gemm& g, const Options& opt) {
  // The f32 workload is gemm/…/tT, the bf16 one gemm/…/tT/bf16: the filter picks either.
  auto f32Wanted = [&](int t) { return std::regex_search(g.name(t), opt.filter); };
  auto bf16Wanted = [&](int t) { return std::regex_search(g.name(t) + "/bf16", opt.filter); };
  if (std::none_of(opt.threads.begin(), opt.threads.end(), [&](int t) { return f32Wanted(t) || bf16Wanted(t); }))
    return;
  std::vector<float> a = randomMatrix(g.m * g.k, 1), b = randomMatrix(g.k * g.n, 2), c(g.m * g.n);
  std::vector<uint16_t> a16 = toBf16(a), b16 = toBf16(b);
  for (int threads : opt.threads) {
    std::string workload = g.name(threads);
    setThreads(threads);
    if (bf16Wanted(threads))
      benchMatmul(g, threads, dnnl::memory::data_type::bf16, "onednn-matmul", a16.data(), b16.data(), c.data(), opt);
    if (!f32Wanted(threads)) continue;
    Timing t = timeCalls(
        [&] {
          dnnl_sgemm(g.transA ? 'T' : 'N', g.transB ? 'T' : 'N', g.m, g.n, g.k, 1.f, a.data(), g.lda(), b.data(),
                     g.ldb(), 0.f, c.data(), g.n);
        },
        opt.budget);
    emit(workload, "onednn-sgemm", t, g.flops(), threads, "dnnl_sgemm");
    benchMatmul(g, threads, dnnl::memory::data_type::f32, "onednn-matmul", a.data(), b.data(), c.data(), opt);
    t = timeCalls(
        [&] {
          cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans, g.transB ? CblasTrans : CblasNoTrans, g.m,
                      g.n, g.k, 1.f, a.data(), g.lda(), b.data(), g.ldb(), 0.f, c.data(), g.n);
        },
        opt.budget);
    emit(workload, "openblas", t, g.flops(), threads, openblas_get_corename());
  }
}

Options parseArgs(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln_anchors: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--filter") {
      opt.filter = std::regex(value());
    } else if (arg == "--budget") {
      opt.budget = std::atof(value().c_str());
    } else if (arg == "--threads") {
      opt.threads.clear();
      std::string list = value();
      for (size_t pos = 0; pos < list.size();) {
        size_t end = list.find(',', pos);
        opt.threads.push_back(std::atoi(list.substr(pos, end - pos).c_str()));
        pos = end == std::string::npos ? list.size() : end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: kiln_anchors [--filter REGEX] [--threads 1,2] [--budget SECONDS]\n");
      std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
    }
  }
  return opt;
}

}  // namespace

/// What the figures depend on: the libraries' versions and the kernels they chose for this CPU.
void emitEnvironment() {
  const dnnl_version_t* v = dnnl_version();
  std::printf(
      "{\"workload\": \"env/anchors\", \"impl\": \"anchors\", \"onednn\": \"%d.%d.%d\", \"openblas\": \"%s\", "
      "\"avx512f\": %s, \"avx2_fma\": %s, \"omp_max_threads\": %d}\n",
      v->major, v->minor, v->patch, openblas_get_config(), __builtin_cpu_supports("avx512f") ? "true" : "false",
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "true" : "false", omp_get_max_threads());
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  Options opt = parseArgs(argc, argv);
  // OpenBLAS 0.3.21 takes CPUs newer than it knows (this Emerald Rapids Xeon) for a Prescott and
  // runs SSE3 kernels; scripts/bench.sh picks OPENBLAS_CORETYPE for the CPU's vector ISA, which
  // must be set before the library loads. Run alone, say so rather than report SSE3 figures silently.
  const std::string core = openblas_get_corename();
  if ((core == "Prescott" || core == "Nehalem" || core == "Sandybridge") && __builtin_cpu_supports("avx2"))
    std::fprintf(stderr,
                 "kiln_anchors: OpenBLAS runs its %s kernels on a CPU with %s; set OPENBLAS_CORETYPE (%s) as "
                 "scripts/bench.sh does, or its rows are not this CPU's\n",
                 core.c_str(), __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2",
                 __builtin_cpu_supports("avx512bf16") ? "Cooperlake"
                 : __builtin_cpu_supports("avx512f")  ? "SkylakeX"
                                                      : "Haswell");
  emitEnvironment();
  benchPeak(opt);
  // Issue 5's shapes as (M, K, N) of a forward product: square ones, simplenet's two big layers at
  // batch 10000, mnist_mlp's first layer at batch 100, and a small one where overheads dominate.
  const int64_t shapes[][3] = {{512, 512, 512},   {1024, 1024, 1024}, {2048, 2048, 2048}, {10000, 1000, 512},
                               {10000, 512, 256}, {100, 784, 128},    {64, 64, 32}};
  for (const auto& s : shapes)
    for (const Gemm& g : withBackward(s[0], s[1], s[2])) benchGemm(g, opt);
  benchPeak(opt);  // again: a neighbour's burst during the first try must not set the peak
  return 0;
}
