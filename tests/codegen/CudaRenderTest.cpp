// The CUDA renderer without a GPU (the prelude's own tests: CudaPreludeTest.cpp):
//   (b) every zoo model's inference graph (batch 1) and Adam training step, in f32, bf16 and f16:
//       every kernel rendered, the program compiled by NVRTC for sm_80 and sm_90;
//   (c) the reduction strategies chosen by size, multi kernels as one launch, and NVRTC
//       compiling a program that exercises every strategy;
//   (d) what the nest kernels compute, on the host emulator, against the interpreter.

#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Layout.h"
#include "codegen/cuda/Render.h"
#include "tests/codegen/CudaEmulation.h"
#include "tests/codegen/TensorClose.h"
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/OpInfo.h"
#include "ir/Parser.h"
#include "ir/ScalarOps.h"
#include "kernels/Kernel.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "support/DType.h"
#include "support/Error.h"
#include "support/Philox.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

using namespace kiln;

namespace {

// ---- (b) zoo models through NVRTC ---------------------------------------------------------------

/// `source` with line numbers, for failure messages.
std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::string line, out;
  for (int n = 1; std::getline(in, line); ++n) out += fmt::format("{:5} | {}\n", n, line);
  return out;
}

struct RenderResult {
  std::vector<cuda::RenderedKernel> kernels;
  std::vector<std::string> failures;  // "kernel: reason"
};

/// Renders every kernel of a compiled graph, prefixing names with `prefix` so several graphs can
/// share one program.
RenderResult renderAll(const ir::Graph& g, const std::string& prefix, int sm) {
  RenderResult r;
  cuda::RenderOptions o;
  o.sm = sm;
  for (kernels::Kernel k : kernels::lowerGraph(g)) {
    k.name = prefix + k.name;
    try {
      r.kernels.push_back(cuda::renderKernel(k, o));
    } catch (const kiln::Error& e) {
      r.failures.push_back(fmt::format("{}: {}", k.name, e.what()));
    }
  }
  return r;
}

/// Compiles `source` for `arch`; on failure, a message with the numbered source and NVRTC's log.
::testing::AssertionResult compiles(const std::string& source, const std::string& name, const std::string& arch) {
  try {
    cuda::compileCuda(source, name + ".cu", arch);
    return ::testing::AssertionSuccess();
  } catch (const kiln::Error& e) {
    return ::testing::AssertionFailure() << e.what() << "\n--- source of " << name << " ---\n" << numbered(source);
  }
}

/// A zoo model's inference graph (batch 1) or Adam training step (batch 3) after the default
/// pipeline at `precision`.
ir::Graph zooGraph(const std::string& model, bool train, passes::Precision precision) {
  ZooOptions o;
  o.batch = train ? 3 : 1;
  o.withLoss = train;
  ir::Graph g = buildZooModel(model, o);
  if (train) {
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
    to.precision = precision;
    passes::buildTrainingStep(g, to);
  }
  passes::PassContext ctx;
  ctx.precision = precision;
  ctx.warn = [](const std::string&) {};
  passes::compileGraph(g, ctx);
  return g;
}

TEST(CudaRender, EveryZooKernelCompilesWithNvrtc) {
  // One program per model, graph, precision and architecture (what Program compiles), rendered
  // here and compiled by two threads (NVRTC compiles separate programs concurrently).
  struct Job {
    std::string what, arch, source;
    size_t kernels = 0;
    std::string error;
    double ms = 0;
  };
  std::vector<Job> jobs;
  std::vector<std::string> unrendered;
  // A kernel whose code, its name aside, an earlier program holds for the same architecture is
  // the same work for NVRTC (the Adam updates, the elementwise kernels the models share): each
  // program keeps only the kernels not seen before (1562 of 4162 here, NVRTC 62 → 44 s). The
  // kernels are the layout's, as Program compiles them: launch chains hold their members' code.
  std::set<std::string> seen;
  size_t rendered = 0;
  for (const std::string& model : zooModelNames())
    for (bool train : {false, true})
      for (passes::Precision p : {passes::Precision::F32, passes::Precision::BF16, passes::Precision::F16}) {
        std::string what = fmt::format("{}_{}_{}", model, train ? "adam" : "infer", passes::precisionName(p));
        ir::Graph g = zooGraph(model, train, p);
        for (int sm : {80, 90}) {
          RenderResult r = renderAll(g, "", sm);
          if (sm == 80) unrendered.insert(unrendered.end(), r.failures.begin(), r.failures.end());
          // What Program compiles: the layout's kernels, with its launch chains and update launch
          // (Chain.h) — a chain's members' code moves to the kernel holding it.
          std::vector<cuda::RenderedKernel> kernels = r.kernels;
          if (r.failures.empty()) kernels = cuda::layoutProgram(g, sm).rendered;
          rendered += r.kernels.size();
          std::vector<size_t> fresh;
          for (size_t i = 0; i < kernels.size(); ++i) {
            if (kernels[i].code.empty()) continue;
            std::string key = std::to_string(sm) + ":" + kernels[i].code;
            for (size_t at = 0; (at = key.find(kernels[i].name, at)) != std::string::npos;)
              key.replace(at, kernels[i].name.size(), "K");
            if (seen.insert(std::move(key)).second) fresh.push_back(i);
          }
          if (!fresh.empty())
            jobs.push_back({what, fmt::format("sm_{}", sm), cuda::programSource(kernels, fresh), fresh.size(), "", 0});
        }
      }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      auto t0 = std::chrono::steady_clock::now();
      auto ok = compiles(jobs[i].source, jobs[i].what, jobs[i].arch);
      jobs[i].ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!ok) jobs[i].error = ok.message();
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  std::thread helper(work);
  work();
  helper.join();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  size_t kernelsCompiled = 0;
  const Job* slowest = &jobs.front();
  for (const Job& j : jobs) {
    EXPECT_TRUE(j.error.empty()) << j.what << " for " << j.arch << ": " << j.error;
    total += j.ms;
    kernelsCompiled += j.kernels;
    if (j.ms > slowest->ms) slowest = &j;
  }
  std::printf("%zu programs (%zu distinct kernels of %zu rendered) compiled by NVRTC in %.1f s (%.1f s of compile "
              "time; slowest: %s for %s, %zu kernels, %.1f s)\n",
              jobs.size(), kernelsCompiled, rendered, wall, total / 1000, slowest->what.c_str(), slowest->arch.c_str(),
              slowest->kernels, slowest->ms / 1000);
  EXPECT_TRUE(unrendered.empty()) << "kernels not rendered:\n" << fmt::format("{}", fmt::join(unrendered, "\n"));
}

// ---- (c) structure --------------------------------------------------------------------------------

/// The kernels of a one-graph .kir text after the default pipeline.
std::vector<kernels::Kernel> kernelsOf(const std::string& text) {
  ir::Graph g = ir::parseGraph(text, "test.kir");
  passes::compileGraph(g);
  return kernels::lowerGraph(g);
}

cuda::RenderedKernel renderOnly(const std::string& text) {
  std::vector<kernels::Kernel> ks = kernelsOf(text);
  EXPECT_EQ(ks.size(), 1u);
  return cuda::renderKernel(ks.at(0));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CudaRender, ReductionStrategyFollowsTheSizes) {
  // Short rows: a thread each.
  auto serial = renderOnly("graph @g {\n  input %x : f32[1000,10]\n  %y = reduce_sum(%x) {axes=[1]} : f32[1000]\n"
                           "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(serial.code, "// serial reduction: 1000 outer points x 10 reduced points")) << serial.code;
  // Softmax rows of 1000: a warp per row, the full stores after both reductions.
  auto warp = renderOnly("graph @g {\n  input %x : f32[32,1000]\n  %y = softmax(%x) {axis=-1} : f32[32,1000]\n"
                         "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(warp.code, "// warp reduction: 32 outer points x 1000 reduced points")) << warp.code;
  EXPECT_EQ(warp.steps.size(), 1u);
  // Rows of 10000: a block per row.
  auto block = renderOnly("graph @g {\n  input %x : f32[300,10000]\n  %y = reduce_max(%x) {axes=[1]} : f32[300]\n"
                          "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(block.code, "// block reduction: 300 outer points x 10000 reduced points")) << block.code;
  EXPECT_TRUE(contains(block.code, "__syncthreads()"));
  // A column sum over a batch of 1000: column tiles (coalesced, no split needed).
  auto column = renderOnly("graph @g {\n  input %x : f32[1000,64]\n  %y = reduce_sum(%x) {axes=[0]} : f32[64]\n"
                           "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(column.code, "// column reduction: 64 outer points x 1000 reduced points")) << column.code;
  // A bias gradient over a batch of 10000: two stages, deterministic, through scratch.
  auto split = renderOnly("graph @g {\n  input %x : f32[10000,10]\n  %y = reduce_sum(%x) {axes=[0]} : f32[10]\n"
                          "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(split.code, "// split reduction 0: 10 outer points x 10000 reduced points")) << split.code;
  ASSERT_EQ(split.steps.size(), 2u);
  EXPECT_GE(split.steps[0].launch.grid[0], 2);  // chunks of one column tile
  EXPECT_EQ(split.scratchBytes.size(), 2u);
  // A full sum of a long vector: split rows.
  auto full = renderOnly("graph @g {\n  input %x : f32[1000000]\n  %y = reduce_sum(%x) {axes=[0]} : f32[]\n"
                         "  output %y = %y\n}\n");
  EXPECT_TRUE(contains(full.code, "// split reduction 0: 1 outer points x 1000000 reduced points")) << full.code;
  // Every entry takes every buffer and scratch area.
  for (const auto* k : {&serial, &warp, &block, &column, &split, &full})
    for (const cuda::Step& s : k->steps) EXPECT_EQ(s.launch.args.size(), 2 + k->scratchBytes.size()) << k->code;
}

TEST(CudaRender, MultiKernelIsOneLaunch) {
  // The optimizer updates left after fusion (those not in a contraction epilogue or a bias
  // reduction) form one multi kernel per training step.
  int multis = 0;
  for (const std::string& model : zooModelNames()) {
    ir::Graph g = zooGraph(model, true, passes::Precision::F32);
    for (const kernels::Kernel& k : kernels::lowerGraph(g)) {
      if (k.kind != ir::KernelKind::Multi) continue;
      ++multis;
      cuda::RenderedKernel r = cuda::renderKernel(k);
      ASSERT_EQ(r.steps.size(), 1u) << r.code;
      EXPECT_TRUE(contains(r.code, fmt::format("// multi: {} part(s)", k.nests.size()))) << r.code;
      EXPECT_GE(r.steps[0].launch.grid[0], static_cast<int64_t>(k.nests.size())) << model;
    }
  }
  EXPECT_GT(multis, 0);
}

TEST(CudaRender, EveryStrategyCompilesWithNvrtc) {
  // Graphs that reach every reduction strategy, views with padding, iota, random, casts and
  // integer and f16 reductions; one program for sm_90.
  const char* graphs[] = {
      "graph @g {\n  input %x : f32[1000,10]\n  %y = softmax(%x) {axis=-1} : f32[1000,10]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : f32[32,1000]\n  %y = log_softmax(%x) {axis=-1} : f32[32,1000]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : f16[300,3000]\n  input %w : f16[3000]\n  input %b : f16[3000]\n"
      "  %y = layer_norm(%x, %w, %b) {normalized_ndim=1} : f16[300,3000]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : bf16[1000,64]\n  %y = reduce_sum(%x) {axes=[0]} : bf16[64]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : f32[10000,10]\n  %y = softmax(%x) {axis=0} : f32[10000,10]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : f64[1000000]\n  %y = reduce_max(%x) {axes=[0]} : f64[]\n  output %y = %y\n}\n",
      "graph @g {\n  input %x : i32[5,6,7,9]\n  %y = reduce_sum(%x) {axes=[0,2,3]} : i32[6]\n"
      "  %m = reduce_min(%x) {axes=[1,3], keepdim=true} : i32[5,1,7,1]\n  output %y = %y\n  output %m = %m\n}\n",
      "graph @g {\n  input %x : f32[7,33]\n  %t = permute(%x) {perm=[1,0]} : f32[33,7]\n"
      "  %s = slice(%t) {starts=[1,0], ends=[33,7], steps=[2,1]} : f32[16,7]\n"
      "  %p = pad(%s) {low=[1,2], high=[0,1], value=-1.5} : f32[17,10]\n  %e = exp(%p) : f32[17,10]\n"
      "  %c = cast(%e) {dtype=f16} : f16[17,10]\n  output %c = %c\n}\n",
      "graph @g {\n  input %x : f32[1000]\n  %i = iota() {shape=[1000], axis=0, dtype=f32} : f32[1000]\n"
      "  %r = random() {shape=[1000], dtype=f32, dist=\"uniform\", seed=5, offset=3} : f32[1000]\n"
      "  %n = random() {shape=[1000], dtype=bf16, dist=\"normal\", seed=9, offset=0} : bf16[1000]\n"
      "  %a = add(%x, %i) : f32[1000]\n  %b = mul(%a, %r) : f32[1000]\n  %q = cast(%b) {dtype=i64} : i64[1000]\n"
      "  %z = div(%q, %q) : i64[1000]\n  %l = lt(%b, %x) : bool[1000]\n  %s = select(%l, %x, %b) : f32[1000]\n"
      "  output %z = %z\n  output %s = %s\n  output %n = %n\n}\n",
  };
  std::vector<cuda::RenderedKernel> all;
  int n = 0;
  for (const char* text : graphs) {
    ir::Graph g = ir::parseGraph(text, "strategy.kir");
    passes::compileGraph(g);
    RenderResult r = renderAll(g, fmt::format("g{}_", n++), 90);
    EXPECT_TRUE(r.failures.empty()) << fmt::format("{}", fmt::join(r.failures, "\n"));
    all.insert(all.end(), r.kernels.begin(), r.kernels.end());
  }
  EXPECT_TRUE(compiles(cuda::programSource(all), "strategies", "sm_90"));
}

// ---- (d) what the nest kernels compute, on the host emulator ---------------------------------------

/// Random inputs: floats uniform in [-2, 2], integers in [-50, 50], bools.
interp::TensorMap randomInputsOf(const ir::Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-2, 2);
  std::uniform_int_distribution<int> integer(-50, 50);
  interp::TensorMap in;
  for (const ir::Value* v : g.inputs()) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, isFloat(v->type.dtype) ? real(rng) : v->type.dtype == DType::boolean ? integer(rng) % 2 : integer(rng));
    in.emplace(v->name, std::move(t));
  }
  return in;
}

using test::expectClose;  // TensorClose.h

TEST(CudaRender, NestKernelsComputeWhatTheInterpreterDoes) {
  std::string why;
  if (!cudatest::emulationAvailable(&why)) GTEST_SKIP() << why;
  // Every kernel of these graphs is a loop, reduction or multi kernel; the sizes reach every
  // reduction strategy (the comment says which) while keeping the emulated grids small.
  struct Case {
    const char* what;
    std::string text;
    bool fuse = true;  // false: the text carries its kernel groups
  };
  const Case cases[] = {
      {"elementwise, views, iota, random",
       "graph @g {\n  input %x : f32[7,33]\n  input %h : f16[33,7]\n  input %n : i32[33,7]\n"
       "  %t = permute(%x) {perm=[1,0]} : f32[33,7]\n"
       "  %s = slice(%t) {starts=[1,0], ends=[33,7], steps=[2,1]} : f32[16,7]\n"
       "  %p = pad(%s) {low=[1,2], high=[0,1], value=-1.5} : f32[17,10]\n"
       "  %e = exp(%p) : f32[17,10]\n  %g = sigmoid(%p) : f32[17,10]\n  %q = mul(%e, %g) : f32[17,10]\n"
       "  %c = cast(%t) {dtype=f16} : f16[33,7]\n  %d = div(%c, %h) : f16[33,7]\n  %r = relu(%d) : f16[33,7]\n"
       "  %i = iota() {shape=[33,7], axis=1, dtype=i32} : i32[33,7]\n  %m = mul(%n, %i) : i32[33,7]\n"
       "  %z = div(%m, %n) : i32[33,7]\n  %l = lt(%h, %c) : bool[33,7]\n  %o = select(%l, %c, %h) : f16[33,7]\n"
       "  %u = random() {shape=[17,10], dtype=f32, dist=\"uniform\", seed=5, offset=3} : f32[17,10]\n"
       "  %v = random() {shape=[17,10], dtype=bf16, dist=\"normal\", seed=9, offset=7} : bf16[17,10]\n"
       "  %w = add(%q, %u) : f32[17,10]\n"
       "  output %w = %w\n  output %r = %r\n  output %z = %z\n  output %o = %o\n  output %v = %v\n}\n"},
      {"serial: softmax rows of 10",
       "graph @g {\n  input %x : f32[1000,10]\n  %y = softmax(%x) {axis=-1} : f32[1000,10]\n  output %y = %y\n}\n"},
      {"warp: log_softmax rows of 1000",
       "graph @g {\n  input %x : f32[32,1000]\n  %y = log_softmax(%x) {axis=-1} : f32[32,1000]\n  output %y = %y\n}\n"},
      {"block: layer norm rows of 3000, max rows of 3000",
       "graph @g {\n  input %x : f16[3,3000]\n  input %w : f16[3000]\n  input %b : f16[3000]\n"
       "  input %z : f32[5,3000]\n  %y = layer_norm(%x, %w, %b) {normalized_ndim=1} : f16[3,3000]\n"
       "  %m = reduce_max(%z) {axes=[1]} : f32[5]\n  output %y = %y\n  output %m = %m\n}\n"},
      {"column: bias, relu and their column sum",
       "graph @g {\n  input %x : f32[1000,64]\n  input %b : f32[64]\n  %y = add(%x, %b) : f32[1000,64]\n"
       "  %r = relu(%y) : f32[1000,64]\n  %s = reduce_sum(%r) {axes=[0]} : f32[64]\n  output %r = %r\n"
       "  output %s = %s\n}\n"},
      {"serial columns: softmax over a leading axis, integer reductions",
       "graph @g {\n  input %x : f32[33,7]\n  input %n : i32[5,6,7,9]\n  %y = softmax(%x) {axis=0} : f32[33,7]\n"
       "  %s = reduce_sum(%n) {axes=[0,2,3]} : i32[6]\n  %m = reduce_min(%n) {axes=[1,3], keepdim=true} : i32[5,1,7,1]\n"
       "  output %y = %y\n  output %s = %s\n  output %m = %m\n}\n"},
      {"split columns: softmax over 5000 rows",
       "graph @g {\n  input %x : f32[5000,10]\n  %y = softmax(%x) {axis=0} : f32[5000,10]\n  output %y = %y\n}\n"},
      {"split rows: softmax rows of 20000, a full f64 sum",
       "graph @g {\n  input %x : f32[2,20000]\n  input %d : f64[40000]\n"
       "  %y = softmax(%x) {axis=-1} : f32[2,20000]\n  %s = reduce_sum(%d) {axes=[0]} : f64[]\n"
       "  output %y = %y\n  output %s = %s\n}\n"},
      {"multi: three independent loops",
       "graph @g {\n  input %x : f32[1000]\n  input %s : f32[]\n  input %h : f16[7,33]\n  input %w : f32[300]\n"
       "  kernel @k0 multi {\n    %a = mul(%x, %s) : f32[1000]\n    %b = add(%h, %h) : f16[7,33]\n"
       "    %c = relu(%w) : f32[300]\n  }\n  output %a = %a\n  output %b = %b\n  output %c = %c\n}\n",
       false},
  };
  cudatest::EmulatedGraphs graphs;
  bool first = true;
  auto render = [&](const kernels::Kernel& k) {
    EXPECT_FALSE(k.op || k.hasContraction) << k.name << " is not a nest kernel";
    cuda::RenderedKernel r = cuda::renderKernel(k);
    if (first) r.code = cudatest::kEmulatorShim + r.code;
    first = false;
    return r;
  };
  for (const Case& c : cases) {
    ir::Graph g = ir::parseGraph(c.text, c.what);
    if (c.fuse) passes::compileGraph(g);
    graphs.add(std::move(g), render);
  }
  graphs.compile();
  for (size_t i = 0; i < std::size(cases); ++i) {
    const ir::Graph& g = graphs.graph(i);
    interp::TensorMap in = randomInputsOf(g, 17 + i);
    interp::TensorMap want = interp::run(g, in);
    interp::TensorMap got = graphs.run(i, in);
    for (const auto& [name, t] : want) expectClose(t, got.at(name), fmt::format("{}: {}", cases[i].what, name));
  }
  // The strategies the cases were chosen for.
  std::string code;
  for (size_t i = 0; i < std::size(cases); ++i)
    for (const cuda::RenderedKernel& r : graphs.rendered(i)) code += r.code;
  for (const char* strategy : {"// serial reduction", "// warp reduction", "// block reduction", "// column reduction",
                               "// split reduction", "// multi: 3 part(s)", "// loop"})
    EXPECT_TRUE(contains(code, strategy)) << strategy;
}

}  // namespace
