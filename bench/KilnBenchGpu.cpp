// kiln's side of the GPU benchmark (issue 6; scripts/gpu-check runs it beside
// bench/torch_gpu_anchor.py and bench/report.py --gpu prints the comparison): the zoo's training
// steps and inference graphs on the CUDA backend and, for the same workloads, on the LLVM CPU
// backend; NVRTC compile times, cold and cached; and simplenet's cuBLASLt GEMMs alone, the floor of
// its training step.
//
// Output: one JSON object per line, on stdout and (with --json) in FILE:
//   {"workload": "train/mnist_mlp/b100/adam", "impl": "kiln-cuda", "ms": …, "device_ms": …, "runs": …,
//    "compile_ms": …, "nvrtc_ms": …, "cache_hit": false, "cached_compile_ms": …, "cached_cache_hit": true, …}
//   ms         median wall time of one Program::run: inputs copied in (host → pinned → device), the
//              step (a CUDA-graph replay: warm-up runs come first), outputs copied back, synchronized
//   device_ms  median device time of one run (Program::lastRunDeviceMs: CUDA events around it)
//   compile_ms pipeline + Program::compile of the first compile of the workload in this process
//              (cold: NVRTC runs; nvrtc_ms is its part); cached_compile_ms: the same graph compiled
//              again (NVRTC's output from the in-process cache)
//   h2d_ms     one pinned host → device copy of the run's input_bytes, timed alone: a run uploads its
//              inputs every time (the anchors' data stays on the device), so device_ms - h2d_ms is
//              about the step itself
//   kept_ms, kept_device_ms  the same after Program::keepInputs: the inputs stay on the device
//              and runs move nothing in, as the anchors' data stays there (measured, not estimated)
// Workloads are named like the CPU benchmark's: train/MODEL/bB/OPT, infer/MODEL/bB, with "/bf16"
// appended under the bf16 amp policy. "impl": "kiln-cpu" lines are the same workloads on the CPU
// backend (all hardware threads). gemm/LAYOUT/MxNxK/DTYPE lines ("impl": "cublaslt") time one
// cuBLASLt product, gemms/WORKLOAD lines every product of that workload back to back. A workload
// that fails prints its line with "error" and the run goes on. "env/…" lines describe the machine.
//
//   kiln_bench_gpu [--json FILE] [--filter SUBSTRING] [--min-seconds S] [--no-cpu]
#include "codegen/cpu/Program.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Program.h"
#include "frontend/Zoo.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/Devices.h"
#include "runtime/Json.h"
#include "runtime/ThreadPool.h"
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "support/Philox.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;
using passes::Precision;

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Settings {
  std::string filter;
  double minSeconds = 1.0;
  bool cpu = true;
  FILE* json = nullptr;
};

/// One JSON object, built field by field, printed as one line.
class Record {
 public:
  Record(const std::string& workload, const std::string& impl) {
    add("workload", workload);
    add("impl", impl);
  }
  Record& add(const std::string& key, const std::string& v) { return raw(key, rt::json::quote(v)); }
  Record& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  Record& add(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  Record& add(const std::string& key, int64_t v) { return raw(key, std::to_string(v)); }
  Record& add(const std::string& key, int v) { return add(key, static_cast<int64_t>(v)); }
  Record& add(const std::string& key, double v) {
    return raw(key, std::isfinite(v) ? fmt::format("{:.6g}", v) : "null");
  }
  std::string str() const { return "{" + text_ + "}"; }

 private:
  Record& raw(const std::string& key, const std::string& value) {
    text_ += (text_.empty() ? "" : ", ") + rt::json::quote(key) + ": " + value;
    return *this;
  }
  std::string text_;
};

void emit(const Settings& s, const Record& r) {
  std::string line = r.str() + "\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
  if (s.json) {
    std::fputs(line.c_str(), s.json);
    std::fflush(s.json);
  }
}

/// A zoo workload: a training step (with `optimizer`) or an inference graph, under `precision`.
struct Workload {
  std::string model;
  int64_t batch;
  const char* optimizer;  // null: inference
  Precision precision = Precision::F32;

  std::string name() const {
    std::string n =
        optimizer ? fmt::format("train/{}/b{}/{}", model, batch, optimizer) : fmt::format("infer/{}/b{}", model, batch);
    return precision == Precision::F32 ? n : n + "/" + std::string(passes::precisionName(precision));
  }
  /// The amp policy of the pipeline: a training step carries its own casts (and loss scaling), so
  /// it is compiled with the f32 pipeline, as `kiln train` does.
  Precision pipelinePrecision() const { return optimizer ? Precision::F32 : precision; }
  ir::Graph graph() const {
    ZooOptions o;
    o.batch = batch;
    o.withLoss = optimizer != nullptr;
    ir::Graph g = buildZooModel(model, o);
    if (optimizer) {
      passes::TrainingStepOptions to;
      to.optimizer.kind = passes::optimizerKindFromName(optimizer);
      to.precision = precision;
      passes::buildTrainingStep(g, to);
    }
    return g;
  }
};

/// The CPU benchmark's training workloads (same optimizers), simplenet and the cnn in bf16 too, and
/// inference at batch 1 and at the training batch.
std::vector<Workload> workloads() {
  return {{"tiny_mlp", 64, "sgd"},
          {"mnist_mlp", 100, "adam"},
          {"simplenet", 10000, "adam"},
          {"simplenet", 10000, "adam", Precision::BF16},
          {"cnn", 64, "adam"},
          {"cnn", 64, "adam", Precision::BF16},
          {"tiny_mlp", 1, nullptr},
          {"tiny_mlp", 64, nullptr},
          {"mnist_mlp", 1, nullptr},
          {"mnist_mlp", 100, nullptr},
          {"simplenet", 1, nullptr},
          {"simplenet", 10000, nullptr},
          {"simplenet", 10000, nullptr, Precision::BF16},
          {"cnn", 1, nullptr},
          {"cnn", 64, nullptr}};
}

ir::Graph compiledGraph(const ir::Graph& g, Precision precision) {
  ir::Graph compiled = g.clone();
  passes::PassContext ctx;
  ctx.precision = precision;
  passes::compileGraph(compiled, ctx);
  return compiled;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

/// Median wall and device milliseconds per run after three warm-up runs (the first runs the steps
/// directly, the second captures the CUDA graph), over at least 10 runs and `minSeconds`, recorded
/// as `prefix`ms, `prefix`device_ms, …. `deviceMs` is null for the CPU backend.
template <typename ProgramT, typename DeviceMs>
void timeRuns(ProgramT& program, const interp::TensorMap& in, const Settings& s, DeviceMs deviceMs, Record& r,
              const std::string& prefix = "") {
  for (int i = 0; i < 3; ++i) program.run(in);
  std::vector<double> wall, device;
  auto start = Clock::now();
  while (wall.size() < 10 || (msSince(start) < s.minSeconds * 1000 && wall.size() < 5000)) {
    auto t0 = Clock::now();
    program.run(in);
    wall.push_back(msSince(t0));
    if constexpr (!std::is_same_v<DeviceMs, std::nullptr_t>) device.push_back(deviceMs(program));
  }
  r.add(prefix + "ms", median(wall)).add(prefix + "runs", static_cast<int64_t>(wall.size()));
  if (!device.empty())
    r.add(prefix + "device_ms", median(device))
        .add(prefix + "min_device_ms", *std::min_element(device.begin(), device.end()));
}

int64_t inputBytes(const ir::Graph& g) {
  int64_t bytes = 0;
  for (const ir::Value* v : g.inputs()) bytes += v->type.bytes();
  return bytes;
}

/// Milliseconds to copy `bytes` from pinned host memory to the device in one copy (median of 11):
/// about what moving a run's inputs adds to its device time.
double uploadMs(int64_t bytes) {
  gpu::Context ctx(0);
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  gpu::PinnedHostBuffer host(n);
  std::memset(host.data(), 1, n);
  gpu::DeviceBuffer device = ctx.allocate(n);
  gpu::Event start, stop;
  std::vector<double> samples;
  for (int i = 0; i < 11; ++i) {
    start.record(ctx.stream());
    ctx.stream().upload(device.ptr(), host.data(), n);
    stop.record(ctx.stream());
    ctx.synchronize();
    samples.push_back(gpu::Event::elapsedMs(start, stop));
  }
  return median(samples);
}

void runCuda(const Settings& s, const Workload& w) {
  Record r(w.name(), "kiln-cuda");
  try {
    ir::Graph g = w.graph();
    auto t0 = Clock::now();
    std::unique_ptr<cuda::Program> p = cuda::Program::compile(compiledGraph(g, w.pipelinePrecision()));
    const double coldMs = msSince(t0);
    const cuda::ProgramStats cold = p->stats();
    r.add("compile_ms", coldMs).add("nvrtc_ms", cold.nvrtcMs).add("cache_hit", cold.cacheHit);
    r.add("lower_ms", cold.lowerMs).add("render_ms", cold.renderMs).add("load_ms", cold.loadMs);
    {
      t0 = Clock::now();
      std::unique_ptr<cuda::Program> again = cuda::Program::compile(compiledGraph(g, w.pipelinePrecision()));
      r.add("cached_compile_ms", msSince(t0)).add("cached_cache_hit", again->stats().cacheHit);
    }
    const interp::TensorMap in = interp::sampleInputs(g);
    auto deviceMs = [](const cuda::Program& q) { return q.lastRunDeviceMs(); };
    timeRuns(*p, in, s, deviceMs, r);
    // The same runs with the inputs kept on the device (Program::keepInputs), as the anchors keep
    // their data: nothing moves in, the outputs come back.
    p->keepInputs(in);
    timeRuns(*p, {}, s, deviceMs, r, "kept_");
    const cuda::ProgramStats& st = p->stats();
    r.add("kernels", st.kernels).add("launches", st.launches).add("blas_calls", st.blasCalls).add("chains", st.chains);
    r.add("graph_nodes", static_cast<int64_t>(st.graphNodes)).add("device_bytes", st.deviceBytes);
    r.add("input_bytes", inputBytes(g)).add("h2d_ms", uploadMs(inputBytes(g))).add("arch", st.arch);
  } catch (const std::exception& e) {
    r.add("error", e.what());
  }
  emit(s, r);
}

void runCpu(const Settings& s, const Workload& w) {
  Record r(w.name(), "kiln-cpu");
  try {
    ir::Graph g = w.graph();
    auto t0 = Clock::now();
    std::unique_ptr<cpu::Program> p = cpu::Program::compile(compiledGraph(g, w.pipelinePrecision()));
    r.add("compile_ms", msSince(t0)).add("llvm_ms", p->stats().compileMs).add("cache_hit", p->stats().cacheHit);
    timeRuns(*p, interp::sampleInputs(g), s, nullptr, r);
    r.add("threads", rt::ThreadPool::global().threads());
  } catch (const std::exception& e) {
    r.add("error", e.what());
  }
  emit(s, r);
}

/// One cuBLASLt product D[m×n] = op(A)·op(B) in kiln's row-major terms (runtime/cuda/BlasLt.h).
struct Gemm {
  int64_t m, n, k;
  bool transA, transB;
  std::string name(DType t) const {
    return fmt::format("gemm/{}{}/{}x{}x{}/{}", transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, dtypeName(t));
  }
};

/// simplenet's products at `batch`: linear layers y = x·Wᵀ with W [out, in]; a training step adds
/// each layer's dW = dYᵀ·X and, but for the first layer (its input is data), dX = dY·W.
std::vector<Gemm> simplenetGemms(int64_t batch, bool training) {
  const std::pair<int64_t, int64_t> layers[] = {{1000, 512}, {512, 256}, {256, 2}};
  std::vector<Gemm> gemms;
  for (auto [in, out] : layers) gemms.push_back({batch, out, in, false, true});
  if (training)
    for (size_t i = 0; i < std::size(layers); ++i) {
      auto [in, out] = layers[i];
      gemms.push_back({out, in, batch, true, false});
      if (i > 0) gemms.push_back({batch, in, out, false, false});
    }
  return gemms;
}

/// Times `gemms` with cuBLASLt directly — one line per product and one for all of them back to
/// back, named `total` — in `t` (f32 without TF32, or bf16 with f32 accumulation), outputs of the
/// input type as the amp policy makes them. Median of 11 samples of 10 repetitions each.
void runGemms(const Settings& s, const std::string& total, const std::vector<Gemm>& gemms, DType t) {
  if (total.find(s.filter) == std::string::npos) return;
  Record sum(total, "cublaslt");
  try {
    gpu::Context ctx(0);
    gpu::BlasLt blas(ctx);
    struct Bound {
      gpu::MatmulDesc desc;
      gpu::DeviceBuffer a, b, d;
    };
    std::vector<Bound> bound;
    auto filled = [&](int64_t elements, uint64_t seed) {
      std::vector<uint16_t> half(static_cast<size_t>(elements));
      std::vector<float> full(static_cast<size_t>(elements));
      for (int64_t i = 0; i < elements; ++i) {
        full[static_cast<size_t>(i)] = 2 * philoxUniform(seed, 0, static_cast<uint64_t>(i)) - 1;
        half[static_cast<size_t>(i)] = floatToBFloat16(full[static_cast<size_t>(i)]);
      }
      const size_t bytes = static_cast<size_t>(elements) * static_cast<size_t>(dtypeSize(t));
      gpu::DeviceBuffer buf = ctx.allocate(bytes);
      ctx.stream().upload(buf.ptr(), t == DType::f32 ? static_cast<const void*>(full.data()) : half.data(), bytes);
      ctx.synchronize();
      return buf;
    };
    for (const Gemm& g : gemms) {
      Bound b;
      b.desc.m = g.m;
      b.desc.n = g.n;
      b.desc.k = g.k;
      b.desc.transA = g.transA;
      b.desc.transB = g.transB;
      b.desc.inputType = t;
      b.desc.outputType = t;
      b.a = filled(g.m * g.k, 1);
      b.b = filled(g.k * g.n, 2);
      b.d = ctx.allocate(static_cast<size_t>(g.m * g.n * dtypeSize(t)));
      bound.push_back(std::move(b));
    }
    auto enqueue = [&](const Bound& b) {
      blas.matmul(b.desc, {.a = b.a.data(), .b = b.b.data(), .d = b.d.data()}, ctx.stream());
    };
    gpu::Event start, stop;
    auto timeOf = [&](const std::vector<const Bound*>& which) {
      for (const Bound* b : which) enqueue(*b);  // builds the plans
      ctx.synchronize();
      std::vector<double> samples;
      for (int sample = 0; sample < 11; ++sample) {
        start.record(ctx.stream());
        for (int rep = 0; rep < 10; ++rep)
          for (const Bound* b : which) enqueue(*b);
        stop.record(ctx.stream());
        ctx.synchronize();
        samples.push_back(gpu::Event::elapsedMs(start, stop) / 10);
      }
      return median(samples);
    };
    std::vector<const Bound*> all;
    for (size_t i = 0; i < bound.size(); ++i) {
      all.push_back(&bound[i]);
      Record one(gemms[i].name(t), "cublaslt");
      one.add("ms", timeOf({&bound[i]})).add("desc", bound[i].desc.str());
      emit(s, one);
    }
    sum.add("ms", timeOf(all))
        .add("gemms", static_cast<int64_t>(all.size()))
        .add("cublaslt_version", static_cast<int64_t>(blas.version()));
  } catch (const std::exception& e) {
    sum.add("error", e.what());
  }
  emit(s, sum);
}

/// The device and the compilers: where the figures come from. Returns whether a device is there.
bool describeMachine(const Settings& s) {
  rt::CpuInfo cpu = rt::cpuInfo();
  Record c("env/cpu", "kiln-cpu");
  c.add("model", cpu.model).add("cores", cpu.logicalCores).add("isa", fmt::format("{}", fmt::join(cpu.isa, " ")));
  emit(s, c);
  rt::CudaStatus status = rt::cudaStatus();
  Record g("env/cuda", "kiln-cuda");
  g.add("driver", status.driverVersion);
  if (status.devices.empty()) {
    g.add("error", "no CUDA device: " + status.problem);
  } else {
    const rt::CudaDeviceInfo& d = status.devices[0];
    g.add("device", d.name).add("cc", fmt::format("{}.{}", d.ccMajor, d.ccMinor)).add("sms", d.multiprocessors);
    g.add("memory_gib", static_cast<double>(d.memoryBytes) / (1 << 30)).add("nvrtc", cuda::nvrtcVersion());
  }
  emit(s, g);
  return !status.devices.empty();
}

/// The first CUDA program of a process pays for the driver's context and NVRTC's start; a tiny one
/// compiled first keeps that out of every workload's compile time and reports it.
void startCuda(const Settings& s) {
  Record r("startup/cuda", "kiln-cuda");
  try {
    ir::Graph g("startup");
    const ir::NamedAttr none[] = {{"axes", ir::Ints{}}};
    g.addOutput("y", g.addNode(ir::OpKind::ReduceSum, {g.addInput("x", {DType::f32, {7}})}, none));
    auto t0 = Clock::now();
    cuda::Program::compile(compiledGraph(g, Precision::F32));
    r.add("ms", msSince(t0));
  } catch (const std::exception& e) {
    r.add("error", e.what());
  }
  emit(s, r);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  std::string jsonPath;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
      s.filter = argv[++i];
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      jsonPath = argv[++i];
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc)
      s.minSeconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-cpu"))
      s.cpu = false;
    else {
      std::fprintf(stderr, "usage: kiln_bench_gpu [--json FILE] [--filter SUBSTRING] [--min-seconds S] [--no-cpu]\n");
      return 2;
    }
  }
  if (!jsonPath.empty() && !(s.json = std::fopen(jsonPath.c_str(), "w"))) {
    std::fprintf(stderr, "kiln_bench_gpu: cannot write %s: %s\n", jsonPath.c_str(), std::strerror(errno));
    return 1;
  }
  auto selected = [&](const Workload& w) { return w.name().find(s.filter) != std::string::npos; };
  // The GPU first: were the CPU backend to crash on this machine, the GPU figures are written.
  if (describeMachine(s)) {
    startCuda(s);
    for (const Workload& w : workloads())
      if (selected(w)) runCuda(s, w);
    runGemms(s, "gemms/train/simplenet/b10000/adam", simplenetGemms(10000, true), DType::f32);
    runGemms(s, "gemms/train/simplenet/b10000/adam/bf16", simplenetGemms(10000, true), DType::bf16);
    runGemms(s, "gemms/infer/simplenet/b10000", simplenetGemms(10000, false), DType::f32);
  }
  if (s.cpu)
    for (const Workload& w : workloads())
      if (selected(w)) runCpu(s, w);
  if (s.json) std::fclose(s.json);
  return 0;
}
