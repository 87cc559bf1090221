// The LLVM CPU backend's training steps against the reference interpreter: every zoo model's SGD
// and Adam steps, bf16 steps on the dot-product path, f16 steps with loss scaling, and parameter
// updates computed in place (kernels::updatesInPlace) only where that is safe.
#include "BackendTestSupport.h"

#include "codegen/cpu/KernelAbi.h"
#include "ir/Parser.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

using namespace kiln;
using namespace kiln::cputest;

TEST(CpuBackend, ZooTrainingSteps) {
  for (const std::string& name : zooModelNames())
    for (const char* optimizer : {"sgd", "adam"}) {
      ZooOptions o;
      o.batch = 3;
      ir::Graph g = buildZooModel(name, o);
      passes::TrainingStepOptions to;
      to.optimizer.kind = passes::optimizerKindFromName(optimizer);
      to.optimizer.momentum = 0.9;
      // With eps = 1e-8 Adam's first steps are sign(g)·lr wherever |g| is tiny, so f32 rounding
      // noise in a gradient that is exactly 0 in f64 (a key bias under softmax) flips whole
      // updates; a larger eps keeps the update a smooth function of the gradient.
      to.optimizer.eps = 1e-3;
      passes::buildTrainingStep(g, to);
      interp::TensorMap in = modelInputs(g);
      interp::TensorMap params = interp::initializeParams(g);
      std::unique_ptr<cpu::Program> p = compileFor(g, 2);
      // Two steps: the second runs on the parameters and optimizer state the first produced.
      for (int step = 0; step < 2; ++step) {
        interp::TensorMap updated;
        interp::TensorMap want = interp::run(g, in, params, &updated);
        interp::TensorMap got = p->run(in);
        std::string what = fmt::format("{} {} step {}", name, optimizer, step);
        // Errors relative to each tensor's largest value, and for the loss at least 1: near its
        // minimum log-softmax loses f32 digits to cancellation (log(1 + tiny)).
        expectClose(want, got, what, 1.0, 1.0);
        interp::TensorMap gotParams = p->params();
        for (auto& [key, t] : updated) expectClose(t, gotParams.at(key), what + " " + key, 1.0);
        for (auto& [key, t] : updated) params.insert_or_assign(key, t);
      }
    }
}

// bf16 training steps on the GEMM's k-pair path (GemmEmitter.h's usesBf16Pairs: native on CPUs
// whose vdpbf16ps outruns the FMAs, where every bf16 program takes it; emulated elsewhere,
// JitOptions::emulateBf16Dot):
// the amp pass's bf16 graphs of mnist_mlp, tiny_mlp and cnn Adam steps at batch 33 (forward,
// weight- and input-gradient products on the pair path, odd K included) against the interpreter
// on the same graph, within bf16's rounding (a product input rounded the other way moves a
// result by about 2^-8 of its tensor's scale). On AVX-512 CPUs again on emulated AMX tiles
// (JitOptions::emulateAmx: the tile path's blocking and packing; on a CPU with AMX both Jits use
// its tiles natively).
TEST(CpuBackend, Bf16StepsOnTheDotProductPath) {
  cpu::JitOptions options;
  options.emulateBf16Dot = true;
  cpu::Jit pairs(options);
  options.emulateAmx = true;
  cpu::Jit tiles(options);
  for (cpu::Jit* jit : {&pairs, &tiles})
  for (const char* name : {"mnist_mlp", "tiny_mlp", "cnn"}) {
    if (jit == &tiles && !cpu::isaOf(tiles).avx512) continue;
    ZooOptions o;
    o.batch = 33;
    ir::Graph g = buildZooModel(name, o);
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
    to.optimizer.eps = 1e-3;  // see ZooTrainingSteps
    passes::buildTrainingStep(g, to);
    const ir::Graph compiled = passes::compiledCopy(g, passes::Precision::BF16);
    interp::TensorMap in = modelInputs(compiled);
    interp::TensorMap updated;
    interp::TensorMap want = interp::run(compiled, in, interp::initializeParams(compiled), &updated);
    std::unique_ptr<cpu::Program> p = compileWith(compiled, *jit);
    EXPECT_GE(p->stats().bf16PairContractions, 1) << name;
    // On tiles: all of them when emulated, and on a CPU with AMX natively in both Jits.
    EXPECT_EQ(p->stats().amxContractions, cpu::isaOf(*jit).amxTiles() ? p->stats().bf16PairContractions : 0) << name;
    interp::TensorMap got = p->run(in);  // before params(): the step's updated parameters
    got = withParams(std::move(got), p->params());
    want = withParams(std::move(want), updated);
    for (const auto& [key, w] : want) {
      ASSERT_TRUE(got.count(key)) << name << ": " << key;
      expectWithinScale(w, got.at(key), 2e-2, 1, fmt::format("{} {}", name, key));  // at least 1: the loss
    }
  }
}

// f16 training with dynamic loss scaling, its updates in place (kernels::updatesInPlace): the
// scale's first values overflow, so the first steps are skipped (every update writes the old value
// back) and the ones after them taken; the outputs and every parameter and state after each of four
// steps against the interpreter on the same graph, within f16's rounding of the gradients (Adam
// divides by their root mean square: 1 % of each tensor's largest value, at least 1 for the loss).
TEST(CpuBackend, LossScaledF16StepsUpdateInPlace) {
  ZooOptions o;
  o.batch = 16;
  ir::Graph g = buildZooModel("mnist_mlp", o);
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
  to.optimizer.eps = 1e-3;  // see ZooTrainingSteps
  to.precision = passes::Precision::F16;
  to.lossScale.initialScale = 1 << 20;  // overflows f16: two steps skipped, the scale halved each time
  passes::buildTrainingStep(g, to);
  const ir::Graph compiled = passes::compiledCopy(g, passes::Precision::F16);
  cpu::ProgramOptions po;
  po.pool = &pool(2);
  std::unique_ptr<cpu::Program> p = cpu::Program::compile(compiled, po);
  // fc2's and fc1.bias's updates and moments; fc1.weight's share a kernel with the reduction that
  // checks its gradient is finite (full stores beside a reduction: not in place).
  EXPECT_GE(p->stats().updatesInPlace, 9);
  interp::TensorMap in = modelInputs(compiled);
  interp::TensorMap params = interp::initializeParams(compiled);
  std::vector<double> skipped;
  for (int step = 0; step < 4; ++step) {
    interp::TensorMap updated;
    interp::TensorMap want = interp::run(compiled, in, params, &updated);
    interp::TensorMap got = p->run(in);
    skipped.push_back(want.at("amp.skipped").at(0));
    EXPECT_EQ(got.at("amp.skipped").at(0), skipped.back()) << "step " << step;
    got = withParams(std::move(got), p->params());
    for (const auto& [key, w] : withParams(want, updated)) {
      ASSERT_TRUE(got.count(key)) << key;
      const double floor = key.rfind("param ", 0) == 0 ? 0 : 1;  // the loss: at least 1
      expectWithinScale(w, got.at(key), 1e-2, floor, fmt::format("step {} {}", step, key));
    }
    params = std::move(updated);
  }
  EXPECT_EQ(skipped, (std::vector<double>{1, 1, 0, 0}));
}

// Parameter updates computed straight into the parameter's buffer (kernels::updatesInPlace) where
// nothing reads the old value after the kernel that writes the new one, and into a buffer of
// their own otherwise; either way two steps equal the interpreter's.
TEST(CpuBackend, UpdatesInPlaceOnlyWhereTheOldValueIsDead) {
  struct Case {
    const char* what;
    const char* body;  // after the declarations of %x : f32[4,4], %w, %v : f32[4,4] and %b : f32[4]
    int inPlace;
  };
  const Case cases[] = {
      {"an elementwise step", "  %n = sub(%w, %x) : f32[4,4]\n  %m = mul(%v, %x) : f32[4,4]\n  output %m = %m\n"
                              "  update %w = %n\n  update %v = %m\n", 2},
      {"the old value read in another nest", "  %n = mul(%x, %x) : f32[4,4]\n  %m = add(%v, %w) : f32[4,4]\n"
                                             "  output %m = %m\n  update %w = %n\n  update %v = %m\n", 1},
      {"the old value read after the store", "  %a = mul(%x, %x) : f32[4,4]\n  %n = add(%a, %x) : f32[4,4]\n"
                                             "  %m = mul(%a, %w) : f32[4,4]\n  output %m = %m\n"
                                             "  update %w = %n\n  update %v = %m\n", 1},
      {"a column sum's outer store", "  %g = reduce_sum(%x) {axes=[0]} : f32[4]\n  %n = sub(%b, %g) : f32[4]\n"
                                     "  output %n = %n\n  update %b = %n\n", 1},
      {"a full store beside a reduction", "  %n = sub(%w, %x) : f32[4,4]\n  %s = reduce_sum(%n) {axes=[0,1]} : f32[]\n"
                                          "  output %loss = %s\n  update %w = %n\n", 0},
      {"the old value an output", "  %n = sub(%w, %x) : f32[4,4]\n  output %old = %w\n  update %w = %n\n", 0},
      {"the old value read transposed", "  %t = permute(%w) {perm=[1,0]} : f32[4,4]\n"
                                        "  %n = sub(%w, %t) : f32[4,4]\n  output %n = %n\n  update %w = %n\n", 0},
      {"one value updating two parameters", "  %n = sub(%w, %x) : f32[4,4]\n  output %n = %n\n"
                                            "  update %w = %n\n  update %v = %n\n", 0},
      {"the old value read by a later product", "  %n = sub(%w, %x) : f32[4,4]\n  %y = matmul(%n, %w) : f32[4,4]\n"
                                                "  output %y = %y\n  update %w = %n\n", 0},
  };
  for (const Case& c : cases) {
    ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %x : f32[4,4]\n  param %w : f32[4,4] = ones\n"
                                             "  param %v : f32[4,4] = ones\n  param %b : f32[4] = ones\n{}}}\n", c.body),
                                 "in_place.kir");
    std::unique_ptr<cpu::Program> p = compileFor(g, 2);
    EXPECT_EQ(p->stats().updatesInPlace, c.inPlace) << c.what;
    interp::TensorMap params = interp::initializeParams(g);
    for (int step = 0; step < 2; ++step) {
      interp::TensorMap in = kiln::testing::randomInputs(g, 50 + step), updated;
      interp::TensorMap want = interp::run(g, in, params, &updated);
      const std::string what = fmt::format("{}, step {}", c.what, step);
      expectClose(want, p->run(in), what);
      interp::TensorMap got = p->params();
      for (auto& [key, t] : updated) expectClose(t, got.at(key), what + " " + key);
      for (auto& [key, t] : updated) params.insert_or_assign(key, t);
    }
  }
  // The zoo's Adam steps update their parameters and moments in place, in the weight gradients'
  // products (their epilogues) and the bias gradients' column sums (outer stores) — all but cnn's
  // fc.weight, whose old value the product of fc's input gradient reads after its update.
  for (const char* name : {"mnist_mlp", "cnn"}) {
    ir::Graph g = adamStep(name, 4);
    cpu::ProgramOptions o;
    o.pool = &pool(2);
    const int all = static_cast<int>(g.updates().size());
    EXPECT_EQ(cpu::Program::compile(g, o)->stats().updatesInPlace, name == std::string("cnn") ? all - 1 : all) << name;
  }
}
