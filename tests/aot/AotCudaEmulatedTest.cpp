// CUDA libraries run without a GPU: the stand-in driver (FakeCudaDriver.cpp, loaded before any
// library opens "libcuda.so.1") keeps "device" memory on the host and runs each launch of the
// library on the host emulator of the CUDA backend's kernels (tests/codegen/CudaEmulation.h). So
// the whole C runtime of CUDA libraries (aot/runtime/kiln_aot_cuda.c) runs here: the choice of the
// cubin or the PTX, uploads of constants and weights, every launch with its bound arguments, the
// update copies with their staging, the downloads, train_step, weights I/O, the driver's errors,
// and the balance of contexts, allocations and modules. Results are compared with the CPU JIT
// within the tolerances of the CUDA backend's tests.
#include "AotCudaSupport.h"
#include "AotCudaEmulation.h"
#include "FakeCudaDriver.h"

#include "codegen/cpu/Program.h"
#include "codegen/cuda/Layout.h"
#include "codegen/cuda/Program.h"
#include "ir/OpInfo.h"
#include "runtime/ThreadPool.h"
#include "support/File.h"
#include "tests/codegen/CudaEmulation.h"
#include "tests/codegen/CudaTestSupport.h"
#include "tests/runtime/TestFiles.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

namespace kiln::aottest {
namespace {

constexpr int kOk = 0, kMemory = 4, kCuda = 7;
constexpr int kLaunchFailed = 719;  // CUDA_ERROR_LAUNCH_FAILED


/// Nothing of a destroyed context is left in the driver.
void expectBalanced(const std::string& what) {
  const KilnFakeCuda& f = fake();
  EXPECT_EQ(f.depth, 0) << what << ": contexts pushed and not popped";
  EXPECT_EQ(f.retained, 0) << what << ": primary context retained";
  EXPECT_EQ(f.allocations, 0) << what << ": device memory";
  EXPECT_EQ(f.hostAllocations, 0) << what << ": pinned host memory";
  EXPECT_EQ(f.modules, 0) << what << ": modules";
  EXPECT_EQ(f.streams, 0) << what << ": streams";
}


class AotCudaEmulatedZoo : public AotCudaEmulated, public ::testing::WithParamInterface<std::string> {};
// Training steps on the emulator without lstm and transformer (minutes each on 2 cores in CI; the
// runtime does the same per step whatever the model, and their kernels are emulated in
// tests/codegen); the GPU test (AotCudaDeviceTest.cpp) trains every zoo model.
class AotCudaEmulatedTraining : public AotCudaEmulatedZoo {};

bool isMlp(const std::string& model) { return model.ends_with("_mlp"); }

TEST_P(AotCudaEmulatedZoo, InferenceMatchesTheCpuJit) {
  const std::string& model = GetParam();
  Scratch s;
  ir::Graph g = zooInference(model, 2);
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "m", s.dir);
  aot::Library lib(r.library, "m");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  EXPECT_EQ(fake().loaded, "sm_90 cubin");
  EXPECT_EQ(fake().depth, 0);
  EXPECT_EQ(lib.numThreads(ctx), 1);
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  // Two runs for the MLPs, one for the larger programs (the emulator runs a CUDA thread as a thread).
  const std::vector<uint64_t> seeds = isMlp(model) ? std::vector<uint64_t>{1, 2} : std::vector<uint64_t>{1};
  for (uint64_t seed : seeds) {
    const long launches = fake().launches;
    interp::TensorMap in = modelInputs(g, seed);
    interp::TensorMap got = runLibrary(lib, ctx, g, in);
    EXPECT_EQ(fake().launches - launches, device.layout().launches);
    EXPECT_EQ(device.error(), "");
    kiln::testing::expectClose(jit->run(in), got, fmt::format("{} seed {}", model, seed), 0.1);
    // The context keeps the last outputs.
    const rt::HostTensor& first = got.at(g.outputs()[0].name);
    ASSERT_NE(lib.output(ctx, 0), nullptr);
    EXPECT_EQ(std::memcmp(lib.output(ctx, 0), first.data(), first.bytes()), 0);
  }
  EXPECT_EQ(fake().depth, 0);
  lib.destroy(ctx);
  expectBalanced(model);
}

TEST_P(AotCudaEmulatedTraining, TrainingStepsMatchTheCpuJit) {
  Scratch s;
  ir::Graph g = zooTrainStep(GetParam(), 2);
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "t", s.dir);
  aot::Library lib(r.library, "t");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  // Three steps for the MLPs (the optimizer's state carried over), one for the larger programs.
  const int steps = isMlp(GetParam()) ? 3 : 1;
  for (int step = 0; step < steps; ++step) {
    const std::string what = fmt::format("{} step {}", GetParam(), step);
    interp::TensorMap in = modelInputs(g, 7);
    kiln::testing::expectClose(jit->run(in), runLibrary(lib, ctx, g, in), what, 1.0, 1.0);
    kiln::testing::expectClose(jit->params(), libraryParams(lib, ctx, g), what + " parameters", 1.0);
    EXPECT_EQ(device.error(), "");
  }
  lib.destroy(ctx);
  expectBalanced(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Models, AotCudaEmulatedZoo, ::testing::ValuesIn(zooModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Models, AotCudaEmulatedTraining,
                         ::testing::Values("tiny_mlp", "mnist_mlp", "digits_mlp", "simplenet", "cnn"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_F(AotCudaEmulated, TrainStepAndWeightsIo) {
  Scratch s;
  ir::Graph g = zooTrainStep("tiny_mlp", 4);
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "t", s.dir);
  ASSERT_TRUE(r.training);
  aot::Library lib(r.library, "t");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  kiln::testing::expectClose(jit->params(), libraryParams(lib, ctx, g), "initial parameters", 1.0);
  for (int step = 0; step < 3; ++step) {
    const std::string what = fmt::format("step {}", step);
    interp::TensorMap in = modelInputs(g, 10 + static_cast<uint64_t>(step));
    interp::TensorMap want = jit->run(in), got;
    if (step < 2) {
      got = runLibrary(lib, ctx, g, in);
    } else {  // the last one through train_step
      float loss = -1;
      ASSERT_EQ(lib.trainStep(ctx, in.at(g.inputs()[0]->name).data(), in.at(g.inputs()[1]->name).data(), 0.01f, &loss),
                kOk)
          << lib.errorMessage();
      EXPECT_NEAR(loss, want.at("loss").at(0), 1e-4 * std::max(1.0, std::abs(want.at("loss").at(0))));
      for (size_t o = 0; o < g.outputs().size(); ++o) {
        const ir::Value* v = g.outputs()[o].value;
        rt::HostTensor t(v->type.dtype, v->type.shape);
        std::memcpy(t.data(), lib.output(ctx, static_cast<int>(o)), t.bytes());
        got.insert_or_assign(g.outputs()[o].name, std::move(t));
      }
    }
    EXPECT_EQ(device.error(), "");
    kiln::testing::expectClose(want, got, what, 1.0, 1.0);
    kiln::testing::expectClose(jit->params(), libraryParams(lib, ctx, g), what + " parameters", 1.0);
  }
  // Weights out and in again: a second context starts where the first is.
  const std::string saved = (s.dir / "after.safetensors").string();
  ASSERT_EQ(lib.saveWeights(ctx, saved.c_str()), kOk) << lib.errorMessage();
  void* again = nullptr;
  ASSERT_EQ(lib.create(&again, saved.c_str(), 0), kOk) << lib.errorMessage();
  kiln::testing::expectIdentical(libraryParams(lib, ctx, g), libraryParams(lib, again, g), "reloaded");
  // set_param, then load_weights puts it back.
  const ir::Value* w = g.params().at(0).value;
  rt::HostTensor ones(w->type.dtype, w->type.shape);
  for (int64_t i = 0; i < ones.numel(); ++i) ones.set(i, 1.0);
  ASSERT_EQ(lib.setParam(again, w->name.c_str(), ones.data(), ones.bytes()), kOk) << lib.errorMessage();
  kiln::testing::expectIdentical({{w->name, ones}}, {{w->name, libraryParams(lib, again, g).at(w->name)}}, "set_param");
  ASSERT_EQ(lib.loadWeights(again, saved.c_str()), kOk) << lib.errorMessage();
  kiln::testing::expectIdentical(libraryParams(lib, ctx, g), libraryParams(lib, again, g), "load_weights");
  EXPECT_EQ(fake().depth, 0);
  lib.destroy(again);
  lib.destroy(ctx);
  expectBalanced("training");
}

/// Updates that need staging: a and b trade values, d takes the input, c counts the runs.
TEST_F(AotCudaEmulated, UpdateCopiesAreStagedAsTheJitStagesThem) {
  ir::Graph g("swap");
  const ir::TensorType t{DType::f32, {4}};
  ir::Value* a = g.addParam("a", t, {ir::Initializer::Kind::Constant, 1.0});
  ir::Value* b = g.addParam("b", t, {ir::Initializer::Kind::Constant, 2.0});
  ir::Value* c = g.addParam("c", t, {ir::Initializer::Kind::Zeros});
  ir::Value* d = g.addParam("d", t, {ir::Initializer::Kind::Zeros});
  ir::Value* x = g.addInput("x", t);
  auto add = [&](ir::Value* l, ir::Value* r) { return g.addNode(*ir::opFromName("add"), {l, r}, {}); };
  g.addOutput("y", add(add(a, x), d));
  g.addUpdate(a, b);
  g.addUpdate(b, a);
  g.addUpdate(c, add(c, g.addNode(*ir::opFromName("exp"), {add(d, g.addNode(*ir::opFromName("neg"), {d}, {}))}, {})));
  g.addUpdate(d, x);
  Scratch s;
  EmulatedDevice device(g);
  int staged = 0;
  for (const auto& u : device.layout().updates) staged += u.staged;
  EXPECT_EQ(staged, 3);  // a, b and d: values that are parameters or inputs
  aot::ExportResult r = exportCuda(g, "swap", s.dir);
  ASSERT_TRUE(fs::exists(r.library));
  aot::Library lib(r.library, "swap");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  for (int run = 0; run < 3; ++run) {
    interp::TensorMap in = modelInputs(g, 30 + static_cast<uint64_t>(run));
    kiln::testing::expectIdentical(jit->run(in), runLibrary(lib, ctx, g, in), fmt::format("run {}", run));
    kiln::testing::expectIdentical(jit->params(), libraryParams(lib, ctx, g), fmt::format("run {} parameters", run));
  }
  lib.destroy(ctx);
  expectBalanced("swap");
}

// An output that is a parameter, or a view of one, is the value the step started from: the outputs
// are copied back before the update copies overwrite the parameters (a random graph on an H200
// read the updated value when the downloads came last).
TEST_F(AotCudaEmulated, OutputsThatAreParametersReadThemBeforeTheUpdates) {
  ir::Graph g("before");
  const ir::TensorType t{DType::f32, {2, 3}};
  ir::Value* a = g.addParam("a", t, {ir::Initializer::Kind::Constant, 1.0});
  ir::Value* b = g.addParam("b", t, {ir::Initializer::Kind::Constant, 2.0});
  ir::Value* x = g.addInput("x", t);
  g.addOutput("a", a);
  g.addOutput("b_flat", kiln::testing::node(g, "reshape", {b}, {{"shape", ir::Ints{6}}}));
  g.addUpdate(a, x);
  g.addUpdate(b, g.addNode(*ir::opFromName("add"), {b, x}, {}));
  Scratch s;
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "before", s.dir);
  ASSERT_TRUE(fs::exists(r.library));
  aot::Library lib(r.library, "before");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  for (int run = 0; run < 3; ++run) {
    interp::TensorMap in = modelInputs(g, 50 + static_cast<uint64_t>(run));
    const interp::TensorMap want = jit->run(in);
    if (run == 0) {
      EXPECT_EQ(want.at("a").at(0), 1.0) << "the CPU JIT's own output";
    }
    kiln::testing::expectIdentical(want, runLibrary(lib, ctx, g, in), fmt::format("run {}", run));
    kiln::testing::expectIdentical(jit->params(), libraryParams(lib, ctx, g), fmt::format("run {} parameters", run));
  }
  lib.destroy(ctx);
  expectBalanced("before");
}

// kiln's own CUDA program (the JIT) on the stand-in driver, without CUDA graphs or cuBLASLt: the
// same launches as a library's, so its runs, the order of its output and update copies and its
// per-kernel profile are checked without a GPU (the gpu label checks them on a device).

// Inputs and outputs of 2 MiB and more are staged on every thread of the pool
// (rt::ThreadPool::copy): a 2.1 MB input, returned as the output (no kernel: host → pinned →
// device → pinned → host), comes back whole, run after run.
/// A 2.1 MB input returned as the output (no kernel): above the threshold of staging on threads.
ir::Graph largePassThrough() {
  ir::Graph g("large");
  g.addOutput("y", g.addInput("x", ir::TensorType{DType::f32, {1024, 513}}));
  return g;
}

TEST_F(AotCudaEmulated, TheJitProgramStagesLargeTensorsWhole) {
  const ir::Graph g = largePassThrough();
  ASSERT_GE(static_cast<size_t>(g.inputs().at(0)->type.bytes()), rt::ThreadPool::kParallelCopyBytes);
  EmulatedDevice device(g);
  std::unique_ptr<cuda::Program> program;
  ASSERT_NO_THROW(program = emulatedProgram(g, false));
  for (int run = 0; run < 2; ++run) {
    interp::TensorMap in = modelInputs(g, 70 + static_cast<uint64_t>(run));
    interp::TensorMap out = program->run(in);
    const rt::HostTensor& y = out.at("y");
    EXPECT_TRUE(y.identical(in.at("x"))) << "run " << run;
    EXPECT_EQ(device.error(), "");
  }
}

// Inputs kept on the device (cuda::Program::keepInputs): runs that leave them out move nothing for
// them and compute what runs given them compute; a run that gives one uploads it, and it stays;
// an input neither given nor kept is an error naming it. (CUDA-graph replay with kept inputs:
// CudaBackendTest.KeptInputsReplayAsCudaGraphs on a device.)
TEST_F(AotCudaEmulated, TheJitProgramKeepsInputsOnTheDevice) {
  ir::Graph g("kept");
  const ir::TensorType t{DType::f32, {4, 5}};
  ir::Value* x = g.addInput("x", t);
  ir::Value* z = g.addInput("z", t);
  g.addOutput("y", kiln::testing::node(g, "mul", {kiln::testing::node(g, "add", {x, z}), x}));
  EmulatedDevice device(g);
  std::unique_ptr<cuda::Program> given, kept;
  ASSERT_NO_THROW(given = emulatedProgram(g, false));
  ASSERT_NO_THROW(kept = emulatedProgram(g, false));
  const interp::TensorMap a = modelInputs(g, 11), b = modelInputs(g, 12);
  kept->keepInputs(a);
  kiln::testing::expectIdentical(given->run(a), kept->run({}), "both kept");
  kiln::testing::expectIdentical(given->run(b), kept->run(b), "both given over the kept ones");
  kiln::testing::expectIdentical(given->run(b), kept->run({}), "the given values kept");
  interp::TensorMap onlyZ;
  onlyZ.emplace("z", a.at("z"));
  interp::TensorMap mixed = b;
  mixed.insert_or_assign("z", a.at("z"));
  kiln::testing::expectIdentical(given->run(mixed), kept->run(onlyZ), "x kept, z given");
  EXPECT_EQ(device.error(), "");
  std::unique_ptr<cuda::Program> fresh = emulatedProgram(g, false);
  try {
    fresh->run(onlyZ);
    ADD_FAILURE() << "a run without x did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing input 'x' (f32[4,5]): neither given nor kept"), std::string::npos)
        << e.what();
  }
}

// A library copies inputs and outputs of 2 MiB and more to and from its pinned buffers on a pool of
// num_threads threads (kaot_copy, aot/runtime/kiln_aot_common.c), and starts none without such a
// tensor: a 2.1 MB input returned as the output comes back whole, run after run, on 1, 2 and 3
// threads (3: a run of steps that is not a multiple of the threads' share).
TEST_F(AotCudaEmulated, LibrariesStageLargeTensorsOnTheirThreads) {
  const ir::Graph g = largePassThrough();
  ASSERT_GE(static_cast<size_t>(g.inputs().at(0)->type.bytes()), rt::ThreadPool::kParallelCopyBytes);
  Scratch s;
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "large", s.dir);
  ASSERT_TRUE(fs::exists(r.library));
  aot::Library lib(r.library, "large");
  for (int threads : {1, 2, 3}) {
    void* ctx = nullptr;
    ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), threads), kOk) << lib.errorMessage();
    EXPECT_EQ(lib.numThreads(ctx), threads);
    for (int run = 0; run < 2; ++run) {
      interp::TensorMap in = modelInputs(g, 90 + static_cast<uint64_t>(run));
      kiln::testing::expectIdentical({{"y", in.at("x")}}, runLibrary(lib, ctx, g, in),
                                     fmt::format("{} threads, run {}", threads, run));
    }
    lib.destroy(ctx);
  }
  expectBalanced("large");
  // A small tensor: no pool, whatever num_threads asks for.
  ir::Graph small("small");
  small.addOutput("y", small.addInput("x", ir::TensorType{DType::f32, {3, 5}}));
  EmulatedDevice smallDevice(small);
  aot::ExportResult rs = exportCuda(small, "small", s.dir);
  aot::Library smallLib(rs.library, "small");
  void* ctx = nullptr;
  ASSERT_EQ(smallLib.create(&ctx, rs.weights.c_str(), 4), kOk) << smallLib.errorMessage();
  EXPECT_EQ(smallLib.numThreads(ctx), 1);
  smallLib.destroy(ctx);
  expectBalanced("small");
}

TEST_F(AotCudaEmulated, TheJitProgramRunsInOrderAndProfilesEveryKernel) {
  for (const std::string& model : {std::string("before"), std::string("mnist_mlp")}) {
    SCOPED_TRACE(model);
    ir::Graph g("before");
    if (model == "before") {
      const ir::TensorType t{DType::f32, {2, 3}};
      ir::Value* a = g.addParam("a", t, {ir::Initializer::Kind::Constant, 1.0});
      ir::Value* x = g.addInput("x", t);
      g.addOutput("a", a);
      g.addUpdate(a, kiln::testing::node(g, "add", {a, x}));
    } else {
      g = zooTrainStep(model, 2);
    }
    EmulatedDevice device(g, passes::Precision::F32, /*chain=*/false);  // a profiled program has no chains
    std::unique_ptr<cuda::Program> program;
    ASSERT_NO_THROW(program = emulatedProgram(g, true));
    std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
    for (int run = 0; run < 2; ++run) {
      interp::TensorMap in = modelInputs(g, 60 + static_cast<uint64_t>(run));
      kiln::testing::expectClose(jit->run(in), program->run(in), fmt::format("run {}", run), 1.0, 1.0);
      // Adam's second step divides by the root of squared gradients summed in another order: an
      // absolute floor, as the outputs have.
      kiln::testing::expectClose(jit->params(), program->params(), fmt::format("run {} parameters", run), 1.0, 1.0);
      EXPECT_EQ(device.error(), "");
    }
    EXPECT_EQ(program->profiledRuns(), 2);
    const std::vector<double> micros = program->kernelMicros();
    ASSERT_EQ(micros.size(), program->kernelNames().size());
    std::vector<bool> hasSteps(micros.size(), false);
    for (const cuda::StepLayout& st : program->layout().steps) hasSteps[st.kernel] = true;
    for (size_t k = 0; k < micros.size(); ++k)
      if (hasSteps[k]) {
        EXPECT_GT(micros[k], 0) << program->kernelNames()[k];
      }
    program->resetProfile();
    EXPECT_EQ(program->profiledRuns(), 0);
    program.reset();
    EXPECT_EQ(fake().events, 0) << "events outlive the program";
    EXPECT_EQ(fake().allocations, 0) << "device memory outlives the program";
  }
}

// NVRTC compiles a program's kernels in parts side by side, a module each (the stand-in driver finds
// a function only in the module whose image names it): mnist_mlp's training step with generated
// products (more than 16 KB of kernel code; the cnn's took 40 s of NVRTC here for the same check)
// in two parts or more where this machine has two threads (at most one per thread, up to 8), runs
// as the CPU JIT does; a small program stays one part.
TEST_F(AotCudaEmulated, TheJitProgramCompilesItsKernelsInPartsSideBySide) {
  const ir::Graph g = zooTrainStep("mnist_mlp", 2);
  EmulatedDevice device(g);
  std::unique_ptr<cuda::Program> program;
  ASSERT_NO_THROW(program = emulatedProgram(g, false));
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  const size_t parts = static_cast<size_t>(program->stats().parts);
  EXPECT_GE(parts, std::min<size_t>(threads, 2));
  EXPECT_LE(parts, threads);
  EXPECT_EQ(static_cast<size_t>(fake().modules), parts);
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  interp::TensorMap in = modelInputs(g, 80);
  kiln::testing::expectClose(jit->run(in), program->run(in), "outputs", 1.0, 1.0);
  kiln::testing::expectClose(jit->params(), program->params(), "parameters", 1.0, 1.0);
  EXPECT_EQ(device.error(), "");
  program.reset();
  EXPECT_EQ(fake().modules, 0) << "modules outlive the program";

  ir::Graph small("small");
  ir::Value* x = small.addInput("x", ir::TensorType{DType::f32, {4, 3}});
  small.addOutput("y", kiln::testing::node(small, "relu", {x}));
  EmulatedDevice smallDevice(small);
  ASSERT_NO_THROW(program = emulatedProgram(small, false));
  EXPECT_EQ(program->stats().parts, 1);
  EXPECT_EQ(fake().modules, 1);
}

// ProgramOptions::cacheDir keeps cubins across processes (the in-memory cache forgotten here
// stands for a new process): the second compile loads them instead of running NVRTC, a damaged
// entry is compiled again and replaced, a folder that cannot be written leaves the cache unused.
TEST_F(AotCudaEmulated, CubinsComeBackFromTheDiskCache) {
  ir::Graph g("disk_cache");
  ir::Value* x = g.addInput("x", ir::TensorType{DType::f32, {5, 7}});
  g.addOutput("y", kiln::testing::node(g, "tanh", {kiln::testing::node(g, "relu", {x})}));
  EmulatedDevice device(g);
  kiln::rt::test::ScratchDir dir;
  cuda::ProgramOptions options;
  options.blasLt = false;
  options.graphs = false;
  options.cacheDir = (dir.path() / "cuda").string();
  const ir::Graph compiled = passes::compiledCopy(g, passes::Precision::F32, "");
  const interp::TensorMap in = modelInputs(g, 90);
  const interp::TensorMap want = interp::run(g, in);
  auto compile = [&] {
    cuda::clearCodeCache();
    std::unique_ptr<cuda::Program> p = cuda::Program::compile(compiled, options);
    kiln::testing::expectClose(want, p->run(in), "outputs");
    return p->stats().cacheHit;
  };
  EXPECT_FALSE(compile());
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(options.cacheDir)) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  const std::string good = readTextFile(entries[0].string());
  EXPECT_TRUE(looksLikeElf64(good));
  EXPECT_TRUE(compile()) << "from the disk";
  for (const std::string& damaged : {std::string("not a cubin"), good.substr(0, good.size() - 100)}) {
    writeFileAtomically(entries[0].string(), damaged);
    EXPECT_FALSE(compile()) << damaged.size() << " bytes";
    EXPECT_TRUE(readTextFile(entries[0].string()) == good) << "the entry is replaced";
  }
  options.cacheDir = (entries[0] / "not-a-folder").string();  // under a file
  EXPECT_FALSE(compile());
  EXPECT_EQ(device.error(), "");
}

TEST_F(AotCudaEmulated, KilnCudaGemmChoosesWhichProductsTakeCublasLt) {
  // A 300×256 · 256×128 product (9.8 M multiply-adds, over RenderOptions::kBlasMinMacs) and a
  // 300×128 · 128×2 one (77 k, under it).
  ir::Graph g("route");
  ir::Value* x = g.addInput("x", {DType::f32, {300, 256}});
  ir::Value* w = g.addInput("w", {DType::f32, {256, 128}});
  ir::Value* v = g.addInput("v", {DType::f32, {128, 2}});
  g.addOutput("y", kiln::testing::node(g, "matmul", {kiln::testing::node(g, "matmul", {x, w}), v}));
  const ir::Graph compiled = passes::compiledCopy(g, passes::Precision::F32, "");
  EmulatedDevice device(g);
  struct Env {  // sets KILN_CUDA_GEMM for one compile
    explicit Env(const char* value) { ::setenv("KILN_CUDA_GEMM", value, 1); }
    ~Env() { ::unsetenv("KILN_CUDA_GEMM"); }
  };
  // The options alone: the large product through cuBLASLt, the small one generated.
  EXPECT_EQ(cuda::layoutProgram(compiled, 90).blasCalls, 1);
  EXPECT_EQ(cuda::layoutProgram(compiled, 90, true, 0).blasCalls, 2);
  {
    Env env("generated");  // no cuBLASLt at all: the program runs on the stand-in driver
    cuda::ProgramOptions options;
    options.graphs = false;
    std::unique_ptr<cuda::Program> program = cuda::Program::compile(compiled, options);
    EXPECT_EQ(program->stats().blasCalls, 0);
    EXPECT_EQ(program->stats().launches, 2);
    interp::TensorMap in = modelInputs(g, 5);
    kiln::testing::expectClose(interp::run(g, in), program->run(in), "generated products", 1.0, 1.0);
    EXPECT_EQ(device.error(), "");
  }
  {
    Env env("fastest");
    try {
      cuda::Program::compile(compiled, {});
      FAIL() << "KILN_CUDA_GEMM=fastest was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_CUDA_GEMM='fastest': expected auto, cublaslt or generated"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(AotCudaEmulated, EmbeddedWeightsNeedNoFile) {
  Scratch s;
  ir::Graph g = zooInference("digits_mlp", 3);
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "emb", s.dir, passes::Precision::F32, /*embedWeights=*/true);
  aot::Library lib(r.library, "emb");
  ASSERT_NE(lib.forward, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, nullptr, 0), kOk) << lib.errorMessage();
  interp::TensorMap in = modelInputs(g, 4);
  rt::HostTensor out(g.outputs()[0].value->type.dtype, g.outputs()[0].value->type.shape);
  ASSERT_EQ(lib.forward(ctx, in.at(g.inputs()[0]->name).data(), out.data()), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = cpu::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""));
  kiln::testing::expectClose(jit->run(in), {{g.outputs()[0].name, out}}, "embedded", 0.1);
  lib.destroy(ctx);
  expectBalanced("embedded");
}

TEST_F(AotCudaEmulated, PicksTheCubinOrThePtxForTheDevice) {
  Scratch s;
  ir::Graph g = zooInference("tiny_mlp", 2);
  aot::ExportResult r = exportCuda(g, "arch", s.dir);
  aot::Library lib(r.library, "arch");
  const struct {
    int major, minor;
    const char* loaded;
  } cases[] = {{8, 0, "sm_80 cubin"}, {8, 6, "sm_80 cubin"}, {8, 9, "sm_80 cubin"}, {9, 0, "sm_90 cubin"},
               {10, 0, "ptx sm_80"},  {12, 0, "ptx sm_80"}};
  for (const auto& c : cases) {
    fake().ccMajor = c.major;
    fake().ccMinor = c.minor;
    fake().loaded.clear();
    void* ctx = nullptr;
    ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
    EXPECT_EQ(fake().loaded, c.loaded) << c.major << "." << c.minor;
    lib.destroy(ctx);
    expectBalanced(fmt::format("{}.{}", c.major, c.minor));
  }
  fake().ccMajor = 7;
  fake().ccMinor = 5;
  void* ctx = reinterpret_cast<void*>(1);
  EXPECT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kCuda);
  EXPECT_EQ(ctx, nullptr);
  const std::string message = lib.errorMessage();
  EXPECT_NE(message.find("compute capability 7.5"), std::string::npos) << message;
  EXPECT_NE(message.find("sm_80, sm_90"), std::string::npos) << message;
  expectBalanced("7.5");
}

TEST_F(AotCudaEmulated, DriverErrorsNameTheCallAndTheResult) {
  Scratch s;
  ir::Graph g = zooInference("tiny_mlp", 2);
  EmulatedDevice device(g);
  aot::ExportResult r = exportCuda(g, "err", s.dir);
  aot::Library lib(r.library, "err");
  auto message = [&] { return std::string(lib.errorMessage()); };
  void* ctx = nullptr;

  fake().freeBytes = 1000;
  EXPECT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kMemory);
  EXPECT_NE(message().find("of device memory"), std::string::npos) << message();
  fake().freeBytes = size_t(16) << 30;
  fake().failAllocs = true;
  EXPECT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kMemory);
  EXPECT_NE(message().find("cuMemAlloc"), std::string::npos) << message();
  EXPECT_NE(message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << message();
  fake().failAllocs = false;
  expectBalanced("failed creates");

  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << message();
  interp::TensorMap in = modelInputs(g, 3);
  int status = -1;
  fake().failLaunch = kLaunchFailed;
  runLibrary(lib, ctx, g, in, &status);
  EXPECT_EQ(status, kCuda);
  EXPECT_NE(message().find("cuLaunchKernel('"), std::string::npos) << message();
  EXPECT_NE(message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << message();
  EXPECT_NE(message().find("err"), std::string::npos) << message();
  fake().failLaunch = 0;
  fake().pendingError = kLaunchFailed;  // a kernel fault: reported by the synchronisation
  runLibrary(lib, ctx, g, in, &status);
  EXPECT_EQ(status, kCuda);
  EXPECT_NE(message().find("cuStreamSynchronize"), std::string::npos) << message();
  const std::string saved = (s.dir / "w.safetensors").string();
  EXPECT_EQ(lib.saveWeights(ctx, saved.c_str()), kCuda);
  EXPECT_FALSE(fs::exists(saved));
  fake().pendingError = 0;
  EXPECT_EQ(fake().depth, 0);
  // Argument errors are the CPU library's.
  EXPECT_EQ(lib.run(ctx, nullptr, nullptr), 1);
  EXPECT_EQ(lib.loadWeights(ctx, (s.dir / "none.safetensors").c_str()), 2);
  runLibrary(lib, ctx, g, in);
  lib.destroy(ctx);
  expectBalanced("errors");
}

}  // namespace
}  // namespace kiln::aottest
