// kiln's side of the CPU benchmark (scripts/bench.sh runs it beside PyTorch, oneDNN and OpenBLAS
// and prints the ratios; docs/PERFORMANCE.md): the zoo's training steps and inference graphs and
// the GEMM shapes of issue 5 on the LLVM CPU backend, plus every zoo model's cold compile time.
//
// Output: one JSON object per line, {"workload", "impl": "kiln", "ms" (median per run), "runs",
// "compile_ms"}; workloads are named like the anchors': train/MODEL/bB/OPT, infer/MODEL/bB,
// gemm/{NN,NT,TN}/MxNxK/tT[/bf16], train/simplenet/b10000/adam/bf16, compile/MODEL/{train,infer}, and aot/{train,infer}/… (the same
// programs through a library written by kiln aot).
//
//   kiln_bench [--filter SUBSTRING] [--min-seconds S] [--features LLVM-FEATURES] [--idle-us N]
//              (--features: compile for the host with these LLVM features on top, e.g. -avx512bf16 to
//              time bf16 products converted to f32 instead of on the vdpbf16ps path;
//              --idle-us: N µs of idleness before each timed run, not timed: the latency of a request
//              that finds the pool's threads parked, where back-to-back runs keep them polling)
//   kiln_bench --peak-rss     (alone, in a fresh process: the resident set of training simplenet,
//                              mem/train/simplenet/b10000/adam, as bench/torch_anchor.py's)
// Threads: KILN_THREADS (default: all hardware threads).
#include "aot/Export.h"
#include "aot/Library.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/Program.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/DType.h"
#include "support/Philox.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Settings {
  std::string filter;
  double minSeconds = 1.0;
};

int gIdleUs = 0;  // --idle-us

/// The Jit of every program but the cold-compile rows' (--features); null: Jit::host().
cpu::Jit* gJit = nullptr;

/// Median milliseconds per run of `program` after two warm-up runs, over at least 5 runs and
/// `minSeconds`, and at most 10000 runs unless `minSeconds` is above 1 (profiling a
/// microsecond-long kernel; with --idle-us, each run after that long a sleep).
template <typename Run>
std::pair<double, int> timeRuns(Run&& run, double minSeconds) {
  for (int i = 0; i < 2; ++i) run();
  std::vector<double> times;
  const double most = minSeconds > 1.0 ? 1e9 : 10000;
  auto start = Clock::now();
  while (times.size() < 5 || (msSince(start) < minSeconds * 1000 && static_cast<double>(times.size()) < most)) {
    if (gIdleUs > 0) std::this_thread::sleep_for(std::chrono::microseconds(gIdleUs));
    auto t0 = Clock::now();
    run();
    times.push_back(msSince(t0));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], static_cast<int>(times.size())};
}

std::pair<double, int> timeRuns(cpu::Program& program, const interp::TensorMap& in, double minSeconds) {
  interp::TensorMap out;  // kept: the runs write into it, as a loop of a user's would
  return timeRuns([&] { program.run(in, out); }, minSeconds);
}

void report(const std::string& workload, double ms, int runs, double compileMs) {
  std::printf("{\"workload\": \"%s\", \"impl\": \"kiln\", \"ms\": %.6g, \"runs\": %d, \"compile_ms\": %.4g}\n",
              workload.c_str(), ms, runs, compileMs);
  std::fflush(stdout);
}

/// Compiles `g` (default pipeline, then the backend), cold unless the same program was compiled
/// before in this process.
std::unique_ptr<cpu::Program> compile(const ir::Graph& g, double& compileMs, rt::ThreadPool* pool = nullptr) {
  auto t0 = Clock::now();
  ir::Graph compiled = g.clone();
  passes::compileGraph(compiled);
  cpu::ProgramOptions po;
  po.pool = pool;
  po.jit = gJit;
  std::unique_ptr<cpu::Program> p = cpu::Program::compile(compiled, po);
  compileMs = msSince(t0);
  return p;
}

/// A zoo model's training step (with `optimizer`, its contractions in `precision`: the step's own
/// casts and loss scaling, as `kiln train --precision`) or its inference graph.
ir::Graph model(const std::string& name, int64_t batch, const char* optimizer,
                passes::Precision precision = passes::Precision::F32) {
  ZooOptions o;
  o.batch = batch;
  o.withLoss = optimizer != nullptr;
  ir::Graph g = buildZooModel(name, o);
  if (optimizer) {
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::optimizerKindFromName(optimizer);
    to.precision = precision;
    passes::buildTrainingStep(g, to);
  }
  return g;
}

/// train/MODEL/bB/OPT (with "/bf16" for bf16 contractions) or infer/MODEL/bB.
void runModel(const Settings& s, const std::string& name, int64_t batch, const char* optimizer,
              passes::Precision precision = passes::Precision::F32) {
  std::string workload = optimizer ? fmt::format("train/{}/b{}/{}", name, batch, optimizer)
                                   : fmt::format("infer/{}/b{}", name, batch);
  if (precision != passes::Precision::F32) workload += fmt::format("/{}", passes::precisionName(precision));
  if (workload.find(s.filter) == std::string::npos) return;
  ir::Graph g = model(name, batch, optimizer, precision);
  double compileMs = 0;
  std::unique_ptr<cpu::Program> p = compile(g, compileMs);
  auto [ms, runs] = timeRuns(*p, interp::sampleInputs(g), s.minSeconds);
  report(workload, ms, runs, compileMs);
}

/// The same program through a library written by kiln aot (aot/Export.h), opened with dlopen:
/// aot/train/… and aot/infer/…, beside the JIT's train/… and infer/… (compile_ms: export + link).
void runAot(const Settings& s, const std::string& name, int64_t batch, const char* optimizer) {
  std::string workload = optimizer ? fmt::format("aot/train/{}/b{}/{}", name, batch, optimizer)
                                   : fmt::format("aot/infer/{}/b{}", name, batch);
  if (workload.find(s.filter) == std::string::npos) return;
  ir::Graph g = model(name, batch, optimizer);
  std::string dir = (std::filesystem::temp_directory_path() / "kiln-bench-aot-XXXXXX").string();
  KILN_CHECK(::mkdtemp(dir.data()), "cannot create a temporary directory");
  auto t0 = Clock::now();
  aot::ExportOptions eo;
  eo.name = "bench";
  eo.outDir = dir;
  aot::ExportResult r = aot::exportLibrary(g, eo);
  const double exportMs = msSince(t0);
  {
    aot::Library lib(r.library, "bench");
    void* ctx = nullptr;
    KILN_CHECK(lib.create(&ctx, r.weights.c_str(), rt::ThreadPool::global().threads()) == 0, "{}",
               lib.errorMessage());
    interp::TensorMap in = interp::sampleInputs(g);
    std::vector<const void*> inputs;
    for (const ir::Value* v : g.inputs()) inputs.push_back(in.at(v->name).data());
    std::vector<rt::HostTensor> outs;
    std::vector<void*> outputs;
    for (const ir::Output& o : g.outputs()) outs.emplace_back(o.value->type.dtype, o.value->type.shape);
    for (rt::HostTensor& t : outs) outputs.push_back(t.data());
    auto [ms, runs] = timeRuns([&] { lib.run(ctx, inputs.data(), outputs.data()); }, s.minSeconds);
    lib.destroy(ctx);
    report(workload, ms, runs, exportMs);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

/// C[m, n] = op(A)[m, k] · op(B)[k, n] with the layout's transposes (NT: B stored [n, k]; TN: A
/// stored [k, m]), named like the anchors: gemm/LAYOUT/MxNxK/tTHREADS, with "/bf16" appended for
/// bf16 operands (accumulated in f32, the result rounded to bf16; oneDNN's bf16 matmul is its anchor).
void runGemm(const Settings& s, rt::ThreadPool& pool, const char* layout, int64_t m, int64_t n, int64_t k,
             DType dtype = DType::f32) {
  const std::string t(dtypeName(dtype));
  std::string workload = fmt::format("gemm/{}/{}x{}x{}/t{}{}", layout, m, n, k, pool.threads(),
                                     dtype == DType::f32 ? "" : fmt::format("/{}", t));
  if (workload.find(s.filter) == std::string::npos) return;
  bool ta = layout[0] == 'T', tb = layout[1] == 'T';
  std::string a = ta ? fmt::format("{}[{},{}]", t, k, m) : fmt::format("{}[{},{}]", t, m, k);
  std::string b = tb ? fmt::format("{}[{},{}]", t, n, k) : fmt::format("{}[{},{}]", t, k, n);
  std::string text = fmt::format(
      "graph @gemm {{\n  input %a : {}\n  input %b : {}\n  %c = matmul(%a, %b) {{transpose_a={}, transpose_b={}}} : "
      "{}[{},{}]\n  output %c = %c\n}}\n",
      a, b, ta ? "true" : "false", tb ? "true" : "false", t, m, n);
  ir::Graph g = ir::parseGraph(text, workload);
  double compileMs = 0;
  std::unique_ptr<cpu::Program> p = compile(g, compileMs, &pool);
  auto [ms, runs] = timeRuns(*p, interp::sampleInputs(g), s.minSeconds);
  report(workload, ms, runs, compileMs);
}

/// Cold compile time of every zoo model's training step and inference graph in a fresh Jit.
void compileTimes(const Settings& s) {
  for (const std::string& name : zooModelNames())
    for (const char* optimizer : {"adam", static_cast<const char*>(nullptr)}) {
      std::string workload = fmt::format("compile/{}/{}", name, optimizer ? "train" : "infer");
      if (workload.find(s.filter) == std::string::npos) continue;
      ir::Graph g = model(name, 32, optimizer);
      auto t0 = Clock::now();
      ir::Graph compiled = g.clone();
      passes::compileGraph(compiled);
      double pipelineMs = msSince(t0);
      cpu::Jit jit;
      cpu::ProgramOptions po;
      po.jit = &jit;
      std::unique_ptr<cpu::Program> p = cpu::Program::compile(compiled, po);
      const cpu::ProgramStats& st = p->stats();
      std::printf("{\"workload\": \"%s\", \"impl\": \"kiln\", \"ms\": %.4g, \"pipeline_ms\": %.4g, \"lower_ms\": %.4g, "
                  "\"render_ms\": %.4g, \"llvm_ms\": %.4g, \"kernels\": %d, \"gemm_routines_linked\": %d, "
                  "\"gemm_routines_compiled\": %d}\n",
                  workload.c_str(), msSince(t0), pipelineMs, st.lowerMs, st.renderMs, st.compileMs, st.kernels,
                  st.gemmRoutinesLinked, st.gemmRoutinesCompiled);
      std::fflush(stdout);
    }
}

}  // namespace

/// A field of /proc/self/status in MiB ("VmRSS", "VmHWM": the resident set now and at its peak).
double statusMiB(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  KILN_CHECK(f, "cannot open /proc/self/status");
  char line[256];
  double kb = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (!std::strncmp(line, field, n) && line[n] == ':') kb = std::atof(line + n + 1);
  std::fclose(f);
  KILN_CHECK(kb >= 0, "no {} in /proc/self/status", field);
  return kb / 1024;
}

/// --peak-rss: the resident set of training simplenet (batch 10000, Adam) in this process, as
/// torch_anchor.py measures PyTorch's in a fresh one: the baseline before anything is built, the
/// peak after compiling the step and running it five times on its 40 MB batch.
void peakRss() {
  const double base = statusMiB("VmRSS");
  ir::Graph g = model("simplenet", 10000, "adam");
  double compileMs = 0;
  std::unique_ptr<cpu::Program> p = compile(g, compileMs);
  interp::TensorMap in = interp::sampleInputs(g), out;
  for (int i = 0; i < 5; ++i) p->run(in, out);
  std::printf("{\"workload\": \"mem/train/simplenet/b10000/adam\", \"impl\": \"kiln\", \"peak_rss_mib\": %.1f, "
              "\"baseline_rss_mib\": %.1f}\n",
              statusMiB("VmHWM"), base);
}

int main(int argc, char** argv) {
  Settings s;
  std::string features;
  std::unique_ptr<cpu::Jit> jit;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) s.filter = argv[++i];
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) s.minSeconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--features") && i + 1 < argc) features = argv[++i];
    else if (!std::strcmp(argv[i], "--idle-us") && i + 1 < argc) gIdleUs = std::max(0, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--peak-rss") && argc == 2) {
      try {
        peakRss();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kiln_bench: %s\n", e.what());
        return 1;
      }
      return 0;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench [--filter SUBSTRING] [--min-seconds S] [--features LLVM-FEATURES] "
                   "[--idle-us N] | kiln_bench --peak-rss\n");
      return 2;
    }
  }
  try {
    if (!features.empty()) {
      cpu::JitOptions options;
      options.features = features;
      jit = std::make_unique<cpu::Jit>(options);
      gJit = jit.get();
    }
    runModel(s, "simplenet", 10000, "adam");
    runModel(s, "simplenet", 10000, "adam", passes::Precision::BF16);
    runModel(s, "mnist_mlp", 100, "adam");
    runModel(s, "tiny_mlp", 64, "sgd");
    runModel(s, "tiny_mlp", 1024, "sgd");
    runModel(s, "cnn", 64, "adam");
    for (auto [name, full] : {std::pair<const char*, int64_t>{"mnist_mlp", 100}, {"simplenet", 10000}, {"tiny_mlp", 64}, {"tiny_mlp", 1024},
                              {"cnn", 64}}) {
      runModel(s, name, 1, nullptr);
      runModel(s, name, full, nullptr);
    }
    for (auto [name, batch] : {std::pair<const char*, int64_t>{"mnist_mlp", 1}, {"mnist_mlp", 100}, {"tiny_mlp", 1},
                               {"simplenet", 1}, {"cnn", 1}, {"cnn", 64}})
      runAot(s, name, batch, nullptr);
    runAot(s, "mnist_mlp", 100, "adam");
    runAot(s, "tiny_mlp", 64, "sgd");
    runAot(s, "cnn", 64, "adam");
    rt::ThreadPool one(1);
    // Each forward shape C = A·B (A: M×K, B: K×N) with its backward forms dA = dC·Bᵀ (NT) and
    // dB = Aᵀ·dC (TN).
    for (auto [m, k, n] : {std::array<int64_t, 3>{512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048},
                           {10000, 1000, 512}, {10000, 512, 256}, {100, 784, 128}, {64, 64, 32}}) {
      for (DType dtype : {DType::f32, DType::bf16})
        for (rt::ThreadPool* pool : {&one, &rt::ThreadPool::global()}) {
          runGemm(s, *pool, "NN", m, n, k, dtype);
          runGemm(s, *pool, "NT", m, k, n, dtype);
          runGemm(s, *pool, "TN", k, n, m, dtype);
        }
    }
    compileTimes(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
