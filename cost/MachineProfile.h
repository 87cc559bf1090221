// The machine profile: what this machine's CPU (and each CUDA GPU) can do, measured once and cached
// as JSON, so the cost model (CostModel.h) can predict kernel times without running them.
//
//   CPU   FMA peak per thread count (a register-resident loop of independent fused multiply-adds
//         at the vector width kiln's code generator uses: AVX-512, AVX2 or scalar), the bf16
//         dot-product peak where the CPU has one (AMX tiles or vdpbf16ps), triad and copy
//         bandwidth per working-set size (caches, then DRAM) and thread count, kiln's own GEMM
//         (cpu::Program on matmul graphs) by size, the cost of one kernel call, of one thread-pool
//         dispatch and of Program::run around the kernels
//   GPU   (where a device is present, built with the CUDA toolkit) cuBLASLt GEMM peak per
//         precision, device bandwidth, kernel launch latency, per-kernel cost of a replayed CUDA
//         graph, pinned host↔device bandwidth and latency
//
// The cache is $KILN_CACHE_DIR/machine.json, else ~/.cache/kiln/machine.json. It is keyed by the
// CPU's identity (the /proc/cpuinfo model name, the thread count kiln runs with, the vector ISA
// and kiln's version): on a different machine, or with KILN_THREADS changed, it is measured again.
// A GPU profile can also be read from a file measured elsewhere (`kiln profile --json` there), so
// a machine without a GPU can still ask what one would do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cost {

/// The format of machine.json; a cache of another format is measured again. Format 4 adds bf16
/// GEMM probes (GemmPoint::dtype); format 5 has a bf16 peak only where kiln's bf16 products run on
/// AMX or vdpbf16ps (not where vdpbf16ps is slower than the FMAs and they convert to f32); format 6
/// adds bf16 convolution probes (older files price bf16 convolutions as f32); format 7 measures
/// the bandwidth ladders on cache-line-aligned arrays (older ones: cache rates about half); format
/// 8 adds matmul probes with a transposed operand (GemmPoint::layout). Files of format 3 (a GPU
/// profile measured elsewhere, such as cost/profiles/h200.json) are still read, their GEMM points
/// f32 and untransposed.
inline constexpr int kProfileFormat = 8;
inline constexpr int kProfileFormatOldest = 3;

/// What makes a cached CPU profile valid for this process.
struct CpuIdentity {
  std::string model;        // /proc/cpuinfo "model name"
  int threads = 1;          // participants of the thread pool kiln's programs use
  std::string isa;          // "avx512", "avx2" or "scalar": the vectors kiln's code uses
  std::string kilnVersion;  // "0.1"
  bool operator==(const CpuIdentity&) const = default;
};

/// One working-set size of the bandwidth ladder: GB/s (1e9 bytes) per thread count.
struct BandwidthPoint {
  int64_t bytes = 0;         // the arrays' total size
  std::vector<double> gbps;  // [t - 1]: with t threads
};

/// One measured contraction of kiln's CPU GEMM in its GEMM form (kernels/Gemm.h): the op, the
/// batch and the product's M, N and K, and the kernel's own time; f32 operands unless `dtype` says
/// bf16 (the amp pass's bf16 matmuls and convolutions: vdpbf16ps k pairs or AMX tiles where the
/// CPU has them).
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0;
  double micros = 0;
  std::string op = "matmul";  // matmul, conv2d, conv2d_grad_input, conv2d_grad_weight
  int64_t batch = 1;          // independent products of m×n×k
  std::string dtype = "f32";  // of the operands: f32 or bf16 (profiles before bf16 probes: f32)
  /// A matmul's operands: "nn" (A[m,k]·B[k,n]), "nt" (B stored [n,k]: a layer's forward product
  /// with PyTorch's weight layout), "tn" (A stored [k,m]: a weight gradient); profiles before
  /// format 8 have "nn" only.
  std::string layout = "nn";
  double gflops() const { return micros > 0 ? 2.0 * batch * m * n * k / micros * 1e-3 : 0; }
  /// One square matmul (m = n = k) with neither operand transposed, of either dtype.
  bool square() const { return op == "matmul" && batch == 1 && m == n && n == k && layout == "nn"; }
};

/// A probe's layout as kiln_gemm_tune prints it after the shape: "" (nn), " ABᵀ" (nt), " AᵀB" (tn),
/// " AᵀBᵀ" (tt).
std::string layoutText(std::string_view layout);

struct CpuProfile {
  CpuIdentity identity;
  int f32Lanes = 1;                 // f32 elements per vector
  std::vector<double> peakGflops;   // [t - 1]: f32 FMA peak with t threads (GFLOP/s)
  /// [t - 1]: bf16 dot-product peak with t threads (AMX tiles where kiln's bf16 products use them,
  /// else vdpbf16ps); empty on CPUs without either, and in profiles before format 4.
  std::vector<double> peakBf16Gflops;
  std::vector<BandwidthPoint> triad;  // a[i] = b[i] + s·c[i], ascending bytes; 12 bytes per element
  std::vector<BandwidthPoint> copy;   // a[i] = b[i]; 8 bytes per element
  std::vector<BandwidthPoint> read;   // s += a[i]; 4 bytes per element
  /// kiln's GEMM on the pool of identity.threads: square matmuls by size first, then the
  /// shape and op probes (a shallow K, each convolution form).
  std::vector<GemmPoint> gemm;
  /// Nanoseconds per element of kiln's vectorized code for an elementwise op beyond a plain one
  /// (add), on one thread: "exp", "tanh", "erf", "div", …; and for the pooling op kernels
  /// ("max_pool2d", "max_pool2d_grad") per element of the pooled input, on the pool's threads.
  std::vector<std::pair<std::string, double>> opNanos;
  /// A row reduction (reduce_sum over the last axis) on one thread: per row and per element.
  double reduceRowNanos = 0, reduceElementNanos = 0;
  double kernelCallMicros = 0;      // a kernel call that does almost nothing (one element)
  double dispatchMicros = 0;        // a thread-pool job across every thread, beyond an inline call
  double runMicros = 0;             // Program::run of a one-input one-output program, beyond its kernel

  /// Peak and bandwidth with t threads (clamped to the measured range); bandwidth for a working set
  /// of `bytes`, interpolated in log(bytes) between the ladder's points.
  double peak(int t) const;
  /// The bf16 peak with t threads (clamped like peak); 0 when not measured.
  double peakBf16(int t) const;
  double bandwidth(int64_t bytes, int t) const;
  /// The copy bandwidth of the ladder's largest working set (memory, past every cache) with t threads.
  double memoryBandwidth(int t) const;
  /// Microseconds to read `readBytes` and write `writtenBytes` with a working set of their sum:
  /// reads at the read ladder's rate, writes at what the triad leaves for its one write in three.
  double memoryMicros(int64_t readBytes, int64_t writtenBytes, int t) const;
  /// opNanos of `op`, 0 when it was not measured.
  double opCost(std::string_view op) const;
};

/// A CUDA device's figures. GFLOP/s of cuBLASLt products; bandwidths in GB/s (1e9 bytes).
struct GpuProfile {
  std::string name;                 // "NVIDIA H100 80GB HBM3"
  std::string arch;                 // "sm_90"
  int multiprocessors = 0;
  uint64_t memoryBytes = 0;
  double peakF32 = 0, peakTf32 = 0, peakBf16 = 0, peakF16 = 0;
  std::vector<GemmPoint> gemmF32;   // cuBLASLt f32 products by size (device time per product)
  /// How gemmF32 was timed: replayed from a CUDA graph (as a program's steps run; format 2) or
  /// enqueued back to back on a stream, where the host's work per call bounds small products.
  bool gemmInGraph = false;
  double bandwidthGbps = 0;         // device-to-device copy: read + write bytes per second
  double launchMicros = 0;          // per kernel launched back to back on a stream
  double graphNodeMicros = 0;       // per kernel of a replayed CUDA graph
  /// Per kernel of a replayed CUDA graph whose kernels each read what the one before wrote (4
  /// blocks, 16 KB): the floor of a program's small kernels, beyond the empty node (format 3;
  /// 0 in older profiles, where graphNodeMicros stands in).
  double graphKernelMicros = 0;
  double graphLaunchMicros = 0;     // one replay of a one-kernel graph, to completion on the host
  double h2dGbps = 0, d2hGbps = 0;  // pinned
  double transferMicros = 0;        // latency of a small pinned copy (each direction)
  std::string source;               // where the figures come from ("measured 2025-…", a file)
};

struct MachineProfile {
  int format = kProfileFormat;
  std::string measuredAt;           // UTC, ISO 8601
  double measureSeconds = 0;
  CpuProfile cpu;
  std::vector<GpuProfile> gpus;     // by ordinal; empty without a device
};

/// This process's CPU identity (creates the global thread pool to learn its size).
CpuIdentity hostIdentity();

/// machine.json's text, and back. profileFromJson throws kiln::Error naming `what` and the member
/// when the text is not a profile of this format.
std::string profileToJson(const MachineProfile& p);
MachineProfile profileFromJson(std::string_view text, std::string_view what);
/// A GPU profile from a file: a machine.json (its first GPU; an error when it has none) or one
/// GpuProfile object as profileToJson writes them.
GpuProfile gpuProfileFromFile(const std::string& path);
std::string gpuProfileToJson(const GpuProfile& g);

/// $KILN_CACHE_DIR/machine.json, else $HOME/.cache/kiln/machine.json.
std::string defaultProfilePath();

struct ProfileOptions {
  std::string path;              // empty: defaultProfilePath()
  bool remeasure = false;        // measure even when the cache is valid
  bool measureGpus = true;       // where a device is present
  bool save = true;              // write the cache after measuring
  /// Measure the CPU this many times and keep each figure's best (bestOf): on a shared machine,
  /// other load only slows a measurement down, so the best of several is closest to the machine.
  int rounds = 1;
  /// Progress lines while measuring ("cpu: fma peak, 1 thread …"); null: quiet.
  std::function<void(const std::string&)> progress;
};

/// The cached profile when its identity matches hostIdentity() and its format is current, else a
/// fresh measurement (saved to the cache when options.save). A cache that cannot be read is
/// measured again; one that cannot be written is a warning through options.progress.
MachineProfile machineProfile(const ProfileOptions& options = {});
/// Whether `p` describes this process's machine (format and identity).
bool profileMatches(const MachineProfile& p, const CpuIdentity& id);

/// Measures the CPU (a few seconds). Uses the global thread pool and the host Jit.
CpuProfile measureCpu(const std::function<void(const std::string&)>& progress = {});
/// Each figure of two measurements of the same CPU at its best: the higher peak and bandwidth,
/// the lower times.
CpuProfile bestOf(const CpuProfile& a, const CpuProfile& b);
/// Measures every CUDA device; empty (with the reason in *why) without a device or without CUDA
/// support in this build.
std::vector<GpuProfile> measureGpus(const std::function<void(const std::string&)>& progress = {},
                                    std::string* why = nullptr);

/// Signs that another process shared the cores while `c` was measured, one sentence each (empty
/// when there are none): a t-thread FMA peak under 0.75 · t times the 1-thread one, or, on AVX2
/// and AVX-512, a square f32 GEMM probe of 256³ or more under kGemmDoubtFraction of the FMA peak
/// (kiln's GEMM reaches 75–97 % of it there on a quiet machine). machineProfile warns of each after
/// measuring, and profileText prints them.
std::vector<std::string> profileDoubts(const CpuProfile& c);
inline constexpr double kGemmDoubtFraction = 0.6;

/// The profile as a readable text (`kiln profile`).
std::string profileText(const MachineProfile& p);

}  // namespace kiln::cost
