// Whole programs on the CUDA backend (label gpu; every test skips without a device): every zoo
// model's inference graph (batch 1 and 3) and two Adam training steps against the LLVM CPU backend
// in f32, and the MLPs and the cnn in bf16 and f16 (amp on both backends); f16 dynamic loss scaling:
// skipped steps, halving and growth of the scale against the interpreter (exact by construction, as
// in tests/passes/AmpTest.cpp) and a whole Adam step skipped; a training step replayed as a CUDA
// graph against the same step run without graphs, bit for bit; and the error of a program that does
// not fit in device memory.
//
// Batches are small: the oracle of the f32 runs is the CPU backend, but when the backends disagree
// the test also asks the interpreter which of them is off, and it is slow on big graphs.
#include "CudaTestSupport.h"
#include "RandomGraphs.h"

#include "codegen/cpu/Program.h"
#include "frontend/Zoo.h"
#include "passes/TrainingStep.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <string>
#include <tuple>
#include <utility>

namespace kiln::testing {
namespace {

using passes::Precision;

/// The models whose amp programs are checked: the MLPs and the cnn.
const char* const kAmpModels[] = {"tiny_mlp", "mnist_mlp", "digits_mlp", "simplenet", "cnn"};

/// Random inputs of a zoo graph: floats in [-2, 2], integer inputs (labels, tokens) below the
/// number of classes of `logits`, lr = 0.01.
interp::TensorMap modelInputs(const ir::Graph& g, uint64_t seed = 7) {
  interp::TensorMap in = randomInputs(g, seed);
  const ir::Output* logits = g.findOutput("logits");
  for (auto& [name, t] : in) {
    if (name == "lr")
      t.set(0, 0.01);
    else if (!isFloat(t.dtype()) && logits)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i, std::fmod(t.at(i), static_cast<double>(logits->value->type.shape.back())));
  }
  return in;
}

ir::Graph inferenceGraph(const std::string& name, int64_t batch) {
  ZooOptions o;
  o.batch = batch;
  o.withLoss = false;
  return buildZooModel(name, o);
}

/// The Adam training step of `name` at batch 3 under `precision`. The step carries its amp casts
/// (and f16 loss scaling), so it is compiled with the f32 pipeline, as `kiln train` does.
ir::Graph trainingStep(const std::string& name, Precision precision, int64_t batch = 3) {
  ZooOptions o;
  o.batch = batch;
  ir::Graph g = buildZooModel(name, o);
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
  // As in BackendTest: with eps = 1e-8 the first steps are sign(g)·lr wherever |g| is tiny, so
  // rounding noise in a gradient that is exactly 0 flips whole updates.
  to.optimizer.eps = 1e-3;
  to.precision = precision;
  passes::buildTrainingStep(g, to);
  return g;
}

std::unique_ptr<cpu::Program> compileCpu(const ir::Graph& g, Precision precision) {
  return cpu::Program::compile(compiledGraph(g, precision));
}

/// ||got - want|| / ||want|| (or ||got - want|| when want is 0).
double relativeError(const rt::HostTensor& got, const rt::HostTensor& want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff += std::pow(got.at(i) - want.at(i), 2);
    norm += std::pow(want.at(i), 2);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

/// When the backends disagree: each one's largest relative error against the interpreter, run on
/// the same inputs and parameters, says which of the two is off.
void explainMismatch(const ir::Graph& g, const interp::TensorMap& inputs, const interp::TensorMap& params,
                     const interp::TensorMap& cpuOut, const interp::TensorMap& cudaOut, const std::string& what) {
  interp::TensorMap ref = interp::run(g, inputs, params);
  for (const auto& [name, t] : ref) {
    if (!cpuOut.count(name) || !cudaOut.count(name)) continue;
    std::printf("[ note ] %s: output %s, relative error against the interpreter: cpu %.2e, cuda %.2e\n", what.c_str(),
                name.c_str(), relativeError(cpuOut.at(name), t), relativeError(cudaOut.at(name), t));
  }
}

/// Failures (and skips) recorded so far in the running test: a helper compares it before and after
/// its own checks.
int failuresSoFar() { return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count(); }

/// Relative L2 tolerances of amp programs, from tests/passes/AmpTest.cpp (there amp against f32;
/// here two backends running the same amp graph, which differ less).
struct AmpTolerance {
  double outputs, gradient;
};
AmpTolerance ampTolerance(Precision p) {
  return p == Precision::BF16 ? AmpTolerance{1e-2, 3e-2} : AmpTolerance{2e-3, 1e-2};
}

void expectCloseAmp(const interp::TensorMap& want, const interp::TensorMap& got, Precision p, const std::string& what) {
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": no output " << name;
    if (name == "amp.skipped")
      EXPECT_EQ(got.at(name).at(0), t.at(0)) << what << ": amp.skipped";
    else
      EXPECT_LE(relativeError(got.at(name), t), ampTolerance(p).outputs) << what << " " << name;
  }
}

void compareInference(const std::string& name, int64_t batch, Precision p) {
  const std::string what = fmt::format("{} inference b{} {}", name, batch, passes::precisionName(p));
  SCOPED_TRACE(what);
  const int failures = failuresSoFar();
  ir::Graph g = inferenceGraph(name, batch);
  interp::TensorMap in = modelInputs(g);
  interp::TensorMap want = compileCpu(g, p)->run(in), got;
  try {
    got = compileCuda(g, {}, p)->run(in);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return;
  }
  if (p == Precision::F32)
    expectClose(want, got, what, 0.1);
  else
    expectCloseAmp(want, got, p, what);
  if (failuresSoFar() > failures) explainMismatch(g, in, interp::initializeParams(g), want, got, what);
}

TEST_F(CudaBackendTest, ZooInferenceMatchesTheCpuBackend) {
  for (const std::string& name : zooModelNames())
    for (int64_t batch : {1, 3}) compareInference(name, batch, Precision::F32);
}

TEST_F(CudaBackendTest, ZooInferenceInBf16AndF16) {
  for (const char* name : kAmpModels)
    for (Precision p : {Precision::BF16, Precision::F16}) compareInference(name, 3, p);
}

/// After one step of both backends: parameters and optimizer state agree. f32: elementwise,
/// relative to each tensor's largest value. amp: the gradient the step applied, seen in Adam's
/// first moments (AmpTest's measure, over all of them together), and every other state within the
/// gradient tolerance; counters and the loss scale exactly.
void compareParams(const interp::TensorMap& before, const interp::TensorMap& want, const interp::TensorMap& got,
                   Precision p, const std::string& what) {
  double diff = 0, norm = 0;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": no parameter " << name;
    const rt::HostTensor& g = got.at(name);
    if (p == Precision::F32) {
      expectClose(w, g, what + " " + name, 1.0);
    } else if (name == "optim.step" || name.starts_with("amp.")) {
      EXPECT_EQ(g.at(0), w.at(0)) << what << " " << name;
    } else if (name.ends_with(".adam_m")) {
      for (int64_t i = 0; i < w.numel(); ++i) {
        diff += std::pow(g.at(i) - w.at(i), 2);
        norm += std::pow(w.at(i) - before.at(name).at(i), 2);
      }
    } else {
      EXPECT_LE(relativeError(g, w), ampTolerance(p).gradient) << what << " " << name;
    }
  }
  if (norm > 0) {
    EXPECT_LE(std::sqrt(diff / norm), ampTolerance(p).gradient) << what << ": the gradient (adam_m)";
  }
}

void compareTraining(const std::string& name, Precision p) {
  const std::string what = fmt::format("{} adam step {}", name, passes::precisionName(p));
  SCOPED_TRACE(what);
  const int failures = failuresSoFar();
  ir::Graph g = trainingStep(name, p);
  interp::TensorMap in = modelInputs(g);
  std::unique_ptr<cpu::Program> cpu = compileCpu(g, Precision::F32);
  std::unique_ptr<cuda::Program> gpu;
  try {
    gpu = compileCuda(g);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return;
  }
  // Two steps: the second runs on the parameters and optimizer state the first produced.
  for (int step = 0; step < 2; ++step) {
    const std::string at = fmt::format("{} (step {})", what, step);
    interp::TensorMap before = cpu->params();
    interp::TensorMap want = cpu->run(in), got;
    try {
      got = gpu->run(in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << at << ": " << e.what();
      return;
    }
    // Outputs relative to each tensor's largest value, and for the loss at least 1 (near its
    // minimum log-softmax loses f32 digits to cancellation).
    if (p == Precision::F32)
      expectClose(want, got, at, 1.0, 1.0);
    else
      expectCloseAmp(want, got, p, at);
    compareParams(before, cpu->params(), gpu->params(), p, at);
    if (failuresSoFar() > failures) {
      explainMismatch(g, in, before, want, got, at);
      return;
    }
  }
}

TEST_F(CudaBackendTest, ZooTrainingStepsMatchTheCpuBackend) {
  for (const std::string& name : zooModelNames()) compareTraining(name, Precision::F32);
}

TEST_F(CudaBackendTest, ZooTrainingStepsInBf16AndF16) {
  for (const char* name : kAmpModels)
    for (Precision p : {Precision::BF16, Precision::F16}) compareTraining(name, p);
}

// --- f16 dynamic loss scaling: loss = reduce_sum(matmul(x[1,2], w[2,2])), AmpTest's graph. The
// gradient of w is row i = x[i], reached through a matmul whose other operand is the seed (the
// scale); with x in multiples of 1/4 and power-of-two scales every f16 product is exact, and a
// scale above 65504 overflows by construction.

/// The f16 SGD step of that graph on the CUDA backend and, in lockstep, the interpreter.
class LossScaledStep {
 public:
  LossScaledStep(double initialScale, int64_t growthInterval) : g_("matmul_loss") {
    ir::Initializer half{ir::Initializer::Kind::Constant, 0.5, 0, 0};
    ir::Value* w = g_.addParam("w", {DType::f32, {2, 2}}, half);
    ir::Value* x = g_.addInput("x", {DType::f32, {1, 2}});
    g_.addOutput("loss", node(g_, "reduce_sum", {node(g_, "matmul", {x, w})}, {{"axes", ir::Ints{}}}));
    passes::TrainingStepOptions options;
    options.precision = Precision::F16;
    options.lossScale.initialScale = initialScale;
    options.lossScale.growthInterval = growthInterval;
    passes::buildTrainingStep(g_, options);
    interpParams_ = interp::initializeParams(g_);
    program_ = compileCuda(g_);
  }

  /// One step on x = [x0, x1] with lr 0.125 on both; the CUDA step's outputs and new parameters
  /// must equal the interpreter's. Returns the CUDA program's amp.skipped.
  double step(double x0, double x1) {
    interp::TensorMap inputs{{"x", rt::HostTensor::fromDoubles(DType::f32, {1, 2}, {x0, x1})},
                             {"lr", rt::HostTensor::fromDoubles(DType::f32, {}, {0.125})}};
    interp::TensorMap updated;
    interp::TensorMap want = interp::run(g_, inputs, interpParams_, &updated);
    for (auto& [name, t] : updated) interpParams_.insert_or_assign(name, std::move(t));
    interp::TensorMap got = program_->run(inputs);
    const std::string what = fmt::format("step {} on x = [{}, {}]", ++steps_, x0, x1);
    expectClose(want, got, what);
    expectClose(interpParams_, params(), what, 1.0);
    return got.at("amp.skipped").at(0);
  }
  interp::TensorMap params() const { return program_->params(); }
  double scale() const { return params().at("amp.loss_scale").at(0); }
  double goodSteps() const { return params().at("amp.good_steps").at(0); }
  std::vector<double> w() const { return params().at("w").toDoubles(); }

 private:
  ir::Graph g_;
  interp::TensorMap interpParams_;
  std::unique_ptr<cuda::Program> program_;
  int steps_ = 0;
};

TEST_F(CudaBackendTest, LossScalingSkipsAnOverflowingStepAndHalvesTheScale) {
  LossScaledStep s(65536, 2000);
  EXPECT_EQ(s.step(0.75, -0.5), 1.0);  // the seed 65536 is beyond f16: infinite gradients
  EXPECT_EQ(s.w(), std::vector<double>(4, 0.5));
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.goodSteps(), 0);
  EXPECT_EQ(s.step(0.75, -0.5), 0.0);
  EXPECT_EQ(s.w(), (std::vector<double>{0.5 - 0.125 * 0.75, 0.5 - 0.125 * 0.75, 0.5 + 0.125 * 0.5, 0.5 + 0.125 * 0.5}));
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.goodSteps(), 1);
}

TEST_F(CudaBackendTest, LossScalingSkipsTheWholeAdamStep) {
  // mnist_mlp's f16 Adam step. An input of 1e6 is inf in f16, so every gradient overflows.
  ir::Graph g = trainingStep("mnist_mlp", Precision::F16);
  std::unique_ptr<cuda::Program> program = compileCuda(g);
  interp::TensorMap in = modelInputs(g);
  program->run(in);  // taken or skipped at the initial scale: either way a consistent state
  interp::TensorMap before = program->params();
  rt::HostTensor& x = in.at("x");
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 1e6);
  EXPECT_EQ(program->run(in).at("amp.skipped").at(0), 1.0);
  interp::TensorMap after = program->params();
  for (const auto& [name, t] : before) {
    if (name.starts_with("amp.")) continue;
    EXPECT_TRUE(after.at(name).identical(t)) << name << " changed in a skipped step";
  }
  EXPECT_EQ(after.at("amp.loss_scale").at(0), std::max(before.at("amp.loss_scale").at(0) / 2, 1.0));
  EXPECT_EQ(after.at("amp.good_steps").at(0), 0);
}

TEST_F(CudaBackendTest, LossScalingGrowsAfterGoodStepsInARow) {
  LossScaledStep s(1024, 3);
  for (double scale : {1024, 1024, 2048}) {
    EXPECT_EQ(s.step(0.75, -0.5), 0.0);
    EXPECT_EQ(s.scale(), scale);
  }
  EXPECT_EQ(s.goodSteps(), 0);
  EXPECT_EQ(s.step(1e6, 1), 1.0);
  EXPECT_EQ(s.scale(), 1024);
}

// --- CUDA graphs: from the second run on, a run replays the captured graph. New inputs every
// run: a replay must read them (through the pinned staging buffers) like a direct run.

/// `g` compiled twice: replayed as CUDA graphs (the default) and run step by step (graphs off).
std::pair<std::unique_ptr<cuda::Program>, std::unique_ptr<cuda::Program>> replayedAndPlain(const ir::Graph& g) {
  cuda::ProgramOptions direct;
  direct.graphs = false;
  return {compileCuda(g), compileCuda(g, direct)};
}

TEST_F(CudaBackendTest, TrainingStepsReplayAsCudaGraphsBitForBit) {
  for (auto [name, p] :
       {std::pair{"mnist_mlp", Precision::F32}, {"cnn", Precision::F32}, {"tiny_mlp", Precision::F16}}) {
    const std::string what = fmt::format("{} {}", name, passes::precisionName(p));
    SCOPED_TRACE(what);
    ir::Graph g = trainingStep(name, p);
    std::unique_ptr<cuda::Program> replayed, plain;
    try {
      std::tie(replayed, plain) = replayedAndPlain(g);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    for (int run = 0; run < 5; ++run) {
      interp::TensorMap in = modelInputs(g, 100 + static_cast<uint64_t>(run));
      expectIdentical(plain->run(in), replayed->run(in), fmt::format("{} run {}", what, run + 1));
      EXPECT_GT(replayed->lastRunDeviceMs(), 0) << what << " run " << run + 1;
    }
    expectIdentical(plain->params(), replayed->params(), what + " parameters after 5 steps");
    EXPECT_GT(replayed->stats().graphNodes, 0u) << what << ": no CUDA graph was captured";
    EXPECT_EQ(plain->stats().graphNodes, 0u) << what << ": graphs=false captured one";
  }
}

// Launch chains (codegen/cuda/Chain.h): each phase runs its launch's own code on the same blocks,
// and the update launch copies bits, so a chained program computes bit for bit what the same
// program with a launch per kernel and memcpy updates does — replayed as CUDA graphs, step after
// step: the MLPs at the batches of the benchmarks (tiny_mlp's whole step one launch), every zoo
// model at batch 3 (nearly every kernel small), the cnn in bf16.
TEST_F(CudaBackendTest, LaunchChainsComputeWhatSeparateLaunchesDo) {
  struct Case {
    std::string name;
    Precision precision;
    int64_t batch;
  };
  std::vector<Case> cases = {{"tiny_mlp", Precision::F32, 64}, {"mnist_mlp", Precision::F32, 100},
                             {"cnn", Precision::BF16, 3}};
  for (const std::string& m : zooModelNames()) cases.push_back({m, Precision::F32, 3});
  for (const Case& c : cases) {
    const std::string what = fmt::format("{} {} batch {}", c.name, passes::precisionName(c.precision), c.batch);
    SCOPED_TRACE(what);
    ir::Graph g = trainingStep(c.name, c.precision, c.batch);
    cuda::ProgramOptions separate;
    separate.chain = false;
    std::unique_ptr<cuda::Program> chained, plain;
    try {
      chained = compileCuda(g);
      plain = compileCuda(g, separate);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    EXPECT_EQ(plain->stats().chains, 0) << what;
    if (c.batch > 3) {
      EXPECT_GE(chained->stats().chains, 1) << what;
    }
    EXPECT_LE(chained->stats().launches, plain->stats().launches) << what;
    for (int run = 0; run < 3; ++run) {
      interp::TensorMap in = modelInputs(g, 200 + static_cast<uint64_t>(run));
      expectIdentical(plain->run(in), chained->run(in), fmt::format("{} run {}", what, run + 1));
    }
    expectIdentical(plain->params(), chained->params(), what + " parameters after 3 steps");
  }
}

// Inputs kept on the device (Program::keepInputs) under CUDA-graph replay: the graph captured
// without their uploads, captured again when a run gives them (and when it gives them no more),
// bit for bit what a program given every input each run computes.
TEST_F(CudaBackendTest, KeptInputsReplayAsCudaGraphs) {
  ir::Graph g = trainingStep("mnist_mlp", Precision::F32);
  std::unique_ptr<cuda::Program> replayed, plain;
  try {
    std::tie(replayed, plain) = replayedAndPlain(g);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const interp::TensorMap a = modelInputs(g, 200), b = modelInputs(g, 201);
  replayed->keepInputs(a);
  const interp::TensorMap* given[] = {&a, &a, &a, &b, &b, &b};
  const bool giving[] = {false, false, false, true, false, false};
  for (int run = 0; run < 6; ++run) {
    const std::string what = fmt::format("run {} ({})", run + 1, giving[run] ? "given" : "kept");
    expectIdentical(plain->run(*given[run]), replayed->run(giving[run] ? *given[run] : interp::TensorMap{}), what);
  }
  expectIdentical(plain->params(), replayed->params(), "parameters after 6 steps");
  EXPECT_GT(replayed->stats().graphNodes, 0u) << "no CUDA graph was captured";
}

// --- Per-kernel profile: a profiled program computes what the replayed one does, never captures a
// graph, and times every kernel that has steps; the kernels' sum is the steps' device time, within
// what the uploads before them add to lastRunDeviceMs.
TEST_F(CudaBackendTest, ProfiledRunsTimeEveryKernel) {
  ir::Graph g = trainingStep("mnist_mlp", Precision::F32);
  cuda::ProgramOptions profiled;
  profiled.profile = true;
  std::unique_ptr<cuda::Program> timed, replayed;
  try {
    timed = compileCuda(g, profiled);
    replayed = compileCuda(g);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  EXPECT_EQ(timed->profiledRuns(), 0);
  double device = 0;
  for (int run = 0; run < 3; ++run) {
    interp::TensorMap in = modelInputs(g, 200 + static_cast<uint64_t>(run));
    expectIdentical(replayed->run(in), timed->run(in), fmt::format("run {}", run + 1));
    device += timed->lastRunDeviceMs() * 1e3;
  }
  EXPECT_EQ(timed->stats().graphNodes, 0u) << "a profiled program replayed a graph";
  EXPECT_EQ(timed->profiledRuns(), 3);
  const std::vector<double> micros = timed->kernelMicros();
  const std::vector<std::string> names = timed->kernelNames();
  ASSERT_EQ(micros.size(), names.size());
  std::vector<bool> hasSteps(names.size(), false);
  for (const cuda::StepLayout& st : timed->layout().steps) hasSteps[st.kernel] = true;
  double sum = 0;
  for (size_t k = 0; k < micros.size(); ++k) {
    if (hasSteps[k]) EXPECT_GT(micros[k], 0) << names[k];
    else EXPECT_EQ(micros[k], 0) << names[k] << " has no steps";
    sum += micros[k];
  }
  EXPECT_LE(sum, device * 1.001);
  EXPECT_GT(sum, 0.5 * device);
  timed->resetProfile();
  EXPECT_EQ(timed->profiledRuns(), 0);
  for (double m : timed->kernelMicros()) EXPECT_EQ(m, 0);
  EXPECT_TRUE(replayed->kernelMicros().empty() || replayed->kernelMicros()[0] == 0) << "profiling is off there";
}

// --- A program that cannot fit: 24 inputs of 8 GiB (f64[2^30]) need 192 GiB, more than any GPU
// has. The check comes before any allocation, and the device stays usable.

TEST_F(CudaBackendTest, AProgramTooBigForTheDeviceIsAnErrorWithTheBytesNeeded) {
  constexpr int kInputs = 24;
  ir::Graph g("too_big");
  ir::Value* sum = nullptr;
  for (int i = 0; i < kInputs; ++i) {
    ir::Value* x = g.addInput(fmt::format("x{}", i), {DType::f64, {int64_t{1} << 30}});
    sum = sum ? node(g, "add", {sum, x}) : x;
  }
  g.addOutput("sum", sum);
  try {
    compileCuda(g);
    ADD_FAILURE() << "a program of " << kInputs * 8 << " GiB compiled";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(message, m, std::regex("needs ([0-9]+) bytes"))) << message;
    EXPECT_GE(std::stoll(m[1].str()), int64_t{kInputs} << 33) << message;
    EXPECT_NE(message.find("device memory"), std::string::npos) << message;
  }
  ir::Graph small("small_after_too_big");
  small.addOutput("y", node(small, "exp", {small.addInput("x", {DType::f32, {1000}})}));
  checkAgainstInterpreter(small, randomInputs(small, 1), "a program after the failed one");
}

}  // namespace
}  // namespace kiln::testing
