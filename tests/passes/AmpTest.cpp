// The amp pass (passes/Amp.h) and f16 dynamic loss scaling in training steps (passes/TrainingStep.h).
//
// Policy: after amp, every contraction reads and writes the low type, every other node stays out of
// it except the casts into and out of it, parameters and outputs keep their types. Semantics: every
// zoo model's inference graph and SGD/Adam training step gives, under the reference interpreter,
// the f32 results within the tolerances below. Loss scaling: a tiny hand-built step whose
// gradients are exact in f16, so skipped steps, halving and doubling are checked exactly.
#include "passes/Amp.h"

#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "kernels/Kernel.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Decompose.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::testing {
namespace {

using passes::Precision;
using Kind = passes::OptimizerConfig::Kind;

// Tolerances on relative L2 errors ||amp - f32|| / ||f32||, from the largest errors measured over
// the zoo below (in parentheses; every other model is 2-4x below). bf16 keeps 8 significant bits
// (unit roundoff 2^-9 = 2.0e-3), f16 11 bits (2^-12 = 2.4e-4).
//   outputs (logits, predictions, loss) of inference graphs and training steps:
//     bf16 1e-2 (cnn logits 3.8e-3), f16 2e-3 (simplenet logits 5.7e-4)
//   the gradient a training step applies, over all parameters together:
//     bf16 3e-2 (cnn 1.6e-2), f16 1e-2 (cnn 4.8e-3)
// Gradients lose more than outputs: a weight gradient is a sum over the batch and positions of
// products of rounded operands, and where that sum cancels (conv1 of cnn at batch 1) the relative
// error grows, in f32 accumulation too.
struct Tolerance {
  double outputs, gradient;
};
constexpr Tolerance kBf16Tolerance{1e-2, 3e-2};
constexpr Tolerance kF16Tolerance{2e-3, 1e-2};

Tolerance tolerance(Precision p) { return p == Precision::BF16 ? kBf16Tolerance : kF16Tolerance; }

ir::Graph withAmp(const ir::Graph& g, Precision p) {
  ir::Graph out = g.clone();
  passes::PassContext ctx;
  ctx.precision = p;
  passes::amp(out, ctx);
  return out;
}

/// The policy, node by node: contractions entirely in `low`; casts f32 → low or low → f32; selects
/// between `low` values (exact: they were widened contraction results or exact constants); nothing
/// else reads or writes `low`.
void expectPolicy(const ir::Graph& g, DType low, const std::string& what) {
  int contractions = 0;
  for (const auto& n : g.nodes()) {
    std::string at = fmt::format("{}: '{}' -> {}", what, n->info().name, n->result->type.str());
    bool touchesLow = n->result->type.dtype == low;
    for (const ir::Value* v : n->operands) touchesLow |= v->type.dtype == low;
    if (n->info().has(ir::kContraction)) {
      ++contractions;
      EXPECT_EQ(n->result->type.dtype, low) << at;
      for (const ir::Value* v : n->operands) EXPECT_EQ(v->type.dtype, low) << at;
    } else if (n->op == ir::OpKind::Cast && touchesLow) {
      DType from = n->operands[0]->type.dtype, to = n->result->type.dtype;
      EXPECT_TRUE((from == DType::f32 && to == low) || (from == low && to == DType::f32)) << at;
    } else if (n->op == ir::OpKind::Select && touchesLow) {
      EXPECT_EQ(n->result->type.dtype, low) << at;
      EXPECT_EQ(n->operands[1]->type.dtype, low) << at;
      EXPECT_EQ(n->operands[2]->type.dtype, low) << at;
    } else {
      EXPECT_FALSE(touchesLow) << at;
    }
  }
  EXPECT_GT(contractions, 0) << what << " has no contraction";
}

/// The signature is untouched: same inputs, parameters (f32 master copies) and outputs.
void expectSameSignature(const ir::Graph& a, const ir::Graph& b) {
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) EXPECT_EQ(a.inputs()[i]->type, b.inputs()[i]->type);
  ASSERT_EQ(a.params().size(), b.params().size());
  for (size_t i = 0; i < a.params().size(); ++i) {
    EXPECT_EQ(a.params()[i].value->name, b.params()[i].value->name);
    EXPECT_EQ(a.params()[i].value->type, b.params()[i].value->type) << a.params()[i].value->name;
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    EXPECT_EQ(a.outputs()[i].name, b.outputs()[i].name);
    EXPECT_EQ(a.outputs()[i].value->type, b.outputs()[i].value->type) << a.outputs()[i].name;
  }
}

double relativeError(const rt::HostTensor& got, const rt::HostTensor& want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff += std::pow(got.at(i) - want.at(i), 2);
    norm += std::pow(want.at(i), 2);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

rt::HostTensor scalarF32(double v) {
  rt::HostTensor t(DType::f32, {});
  t.set(0, v);
  return t;
}

/// A fixed pseudo-random batch: floats in [-1, 1); class labels below the last dimension of
/// `logits`; tokens below `tokenRange`.
interp::TensorMap randomBatch(const ir::Graph& g, int64_t tokenRange) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  const ir::Output* logits = g.findOutput("logits");
  interp::TensorMap inputs;
  for (const ir::Value* in : g.inputs()) {
    if (in->name == "lr") continue;
    rt::HostTensor t(in->type.dtype, in->type.shape);
    int64_t range = in->name == "tokens" ? tokenRange : logits ? logits->value->type.shape.back() : 1;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, isFloat(in->type.dtype) ? 2 * next() - 1 : std::floor(next() * static_cast<double>(range)));
    inputs.emplace(in->name, std::move(t));
  }
  return inputs;
}

struct ZooCase {
  const char* model;
  int64_t batch;
  int64_t tokenRange;
};

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.model; }

const ZooCase kZoo[] = {{"tiny_mlp", 2, 0},  {"mnist_mlp", 2, 0}, {"digits_mlp", 2, 0}, {"simplenet", 2, 0},
                        {"cnn", 1, 0},       {"lstm", 2, 64},     {"transformer", 2, 128}};

ir::Graph zooGraph(const ZooCase& c, bool withLoss) {
  ZooOptions zo;
  zo.batch = c.batch;
  zo.withLoss = withLoss;
  return buildZooModel(c.model, zo);
}

class ZooAmp : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooAmp, InferenceMatchesF32) {
  const ZooCase& c = GetParam();
  ir::Graph g = zooGraph(c, false);
  passes::decompose(g);
  interp::TensorMap inputs = randomBatch(g, c.tokenRange);
  interp::TensorMap params = interp::initializeParams(g);
  interp::TensorMap want = interp::run(g, inputs, params);
  for (Precision p : {Precision::BF16, Precision::F16}) {
    std::string what = fmt::format("{} {}", c.model, passes::precisionName(p));
    ir::Graph low = withAmp(g, p);
    std::vector<std::string> errors = ir::verifyGraph(low);
    ASSERT_TRUE(errors.empty()) << what << ": " << fmt::format("{}", fmt::join(errors, "\n"));
    expectPolicy(low, passes::lowPrecisionType(p), what);
    expectSameSignature(g, low);
    interp::TensorMap got = interp::run(low, inputs, params);
    for (const auto& [name, t] : want) {
      double err = relativeError(got.at(name), t);
      EXPECT_LE(err, tolerance(p).outputs) << what << " output " << name;
      std::printf("[ amp ] %s inference %s: %.2e\n", what.c_str(), name.c_str(), err);
    }
  }
}

/// One step of f32 and of `p` from the same parameters and batch. The outputs agree within
/// tolerance(p), and so does the gradient the step applied, seen in the change of each parameter
/// (SGD: -lr * grad) or of its first moment (Adam: (1 - beta1) * grad), measured over all
/// parameters together (||all changes - all f32 changes|| / ||all f32 changes||). (Adam's weight
/// change itself is ±lr wherever |grad| >> eps, so for gradients that are rounding noise in both
/// runs — the key bias of attention, whose exact gradient is 0 — it is noise too.)
void compareTrainingSteps(const ZooCase& c, Kind optimizer, Precision p) {
  passes::TrainingStepOptions options;
  options.optimizer.kind = optimizer;
  ir::Graph ref = zooGraph(c, true);
  passes::buildTrainingStep(ref, options);
  options.precision = p;
  ir::Graph low = zooGraph(c, true);
  passes::buildTrainingStep(low, options);
  std::string what = fmt::format("{} {} step {}", c.model, optimizer == Kind::Sgd ? "sgd" : "adam",
                                 passes::precisionName(p));
  std::vector<std::string> errors = ir::verifyGraph(low);
  ASSERT_TRUE(errors.empty()) << what << ": " << fmt::format("{}", fmt::join(errors, "\n"));
  expectPolicy(low, passes::lowPrecisionType(p), what);
  for (const ir::Param& param : ref.params())
    EXPECT_EQ(low.findParam(param.value->name)->value->type, param.value->type) << what << " " << param.value->name;

  interp::TensorMap inputs = randomBatch(ref, c.tokenRange);
  inputs.emplace("lr", scalarF32(optimizer == Kind::Sgd ? 0.05 : 1e-3));
  interp::TensorMap params = interp::initializeParams(ref);
  interp::TensorMap wantUpdated, gotUpdated;
  interp::TensorMap want = interp::run(ref, inputs, params, &wantUpdated);
  // f16: a step that overflows changes nothing but the scale, so it is retried at the halved
  // scale until it is taken, as training would.
  interp::TensorMap lowParams = interp::initializeParams(low);
  interp::TensorMap got;
  for (int tries = 0;; ++tries) {
    gotUpdated.clear();
    got = interp::run(low, inputs, lowParams, &gotUpdated);
    if (p != Precision::F16 || got.at("amp.skipped").at(0) == 0) break;
    ASSERT_LT(tries, 16) << what << ": every step overflows";
    for (const char* state : {"amp.loss_scale", "amp.good_steps"}) lowParams.insert_or_assign(state, gotUpdated.at(state));
  }
  for (const auto& [name, t] : want) {
    double err = relativeError(got.at(name), t);
    EXPECT_LE(err, tolerance(p).outputs) << what << " output " << name;
    std::printf("[ amp ] %s output %s: %.2e\n", what.c_str(), name.c_str(), err);
  }
  EXPECT_EQ(optimizer != Kind::Sgd, wantUpdated.count("optim.step") == 1);
  if (optimizer != Kind::Sgd) {
    EXPECT_EQ(gotUpdated.at("optim.step").at(0), 1) << what;
  }
  double diff = 0, norm = 0;
  for (const ir::Param& param : ref.params()) {
    const std::string& w = param.value->name;
    if (optimizer != Kind::Sgd && !w.ends_with(".adam_m")) continue;
    const rt::HostTensor &before = params.at(w), &a = gotUpdated.at(w), &b = wantUpdated.at(w);
    for (int64_t i = 0; i < b.numel(); ++i) {
      diff += std::pow(a.at(i) - b.at(i), 2);
      norm += std::pow(b.at(i) - before.at(i), 2);
    }
  }
  ASSERT_GT(norm, 0) << what;
  double err = std::sqrt(diff / norm);
  EXPECT_LE(err, tolerance(p).gradient) << what << ": the gradient";
  std::printf("[ amp ] %s gradient: %.2e (scale %g)\n", what.c_str(), err,
              p == Precision::F16 ? lowParams.at("amp.loss_scale").at(0) : 0.0);
}

TEST_P(ZooAmp, SgdStepMatchesF32) {
  for (Precision p : {Precision::BF16, Precision::F16}) compareTrainingSteps(GetParam(), Kind::Sgd, p);
}

TEST_P(ZooAmp, AdamStepMatchesF32) {
  for (Precision p : {Precision::BF16, Precision::F16}) compareTrainingSteps(GetParam(), Kind::Adam, p);
}

// A training step canonicalizes before amp: the transposes of a linear layer's forward and weight
// gradient are matmul flags by the time amp casts the operands, so it casts each weight as it is
// stored (never a transposed copy: a cast of a transpose is a strided loop, 75 µs of mnist_mlp's
// 0.8 ms bf16 step before) and no transpose sits between a weight gradient's cast and the
// optimizer (which kept the update out of the product's epilogue: a kernel of its own). Both hold
// after the whole pipeline too. (Permutes that move other dimensions, the transformer's heads,
// are no matmul flag and stay.)
TEST_P(ZooAmp, TrainingStepsCastWeightsAsStored) {
  const ZooCase& c = GetParam();
  passes::TrainingStepOptions options;
  options.optimizer.kind = Kind::Adam;
  options.precision = Precision::BF16;
  ir::Graph low = zooGraph(c, true);
  passes::buildTrainingStep(low, options);
  auto expectNoTransposedCasts = [&](const ir::Graph& g, const std::string& when) {
    for (const auto& n : g.nodes()) {
      const ir::Node* p = n->operands.empty() ? nullptr : n->operands[0]->producer;
      if (p == nullptr) continue;
      auto transpose = [](const ir::Node* x) {
        if (x->op != ir::OpKind::Permute) return false;
        ir::Ints perm = x->attrInts("perm");
        const size_t r = perm.size();
        if (r < 2) return false;
        for (size_t d = 0; d + 2 < r; ++d)
          if (perm[d] != static_cast<int64_t>(d)) return false;
        return perm[r - 2] == static_cast<int64_t>(r - 1) && perm[r - 1] == static_cast<int64_t>(r - 2);
      };
      const bool castOfPermute = n->op == ir::OpKind::Cast && transpose(p);
      const bool permuteOfCast = transpose(n.get()) && p->op == ir::OpKind::Cast;
      EXPECT_FALSE(castOfPermute || permuteOfCast)
          << c.model << " " << when << ": " << ir::opName(n->op) << " of " << ir::opName(p->op) << "\n"
          << ir::printGraph(g);
    }
  };
  expectNoTransposedCasts(low, "after the step's amp");
  passes::compileGraph(low);
  expectNoTransposedCasts(low, "after the pipeline");
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooAmp, ::testing::ValuesIn(kZoo),
                         [](const auto& info) { return std::string(info.param.model); });

// --- The pass on hand-written graphs.

/// param w f32[3,2]; input x f32[4,3]; h = matmul(x, w); out = matmul(h, permute(w)) + x.
ir::Graph twoMatmuls(DType t) {
  ir::Graph g("two_matmuls");
  ir::Value* w = g.addParam("w", {t, {3, 2}}, ir::Initializer{ir::Initializer::Kind::Uniform, -1, 1, 3});
  ir::Value* x = g.addInput("x", {t, {4, 3}});
  ir::Value* h = g.addNode(ir::OpKind::MatMul, {x, w}, {}, {}, "h");
  const ir::NamedAttr perm[] = {{"perm", ir::Ints{1, 0}}};
  ir::Value* wt = g.addNode(ir::OpKind::Permute, {w}, perm);
  ir::Value* y = g.addNode(ir::OpKind::MatMul, {h, wt}, {});
  g.addOutput("h", h);
  g.addOutput("y", g.addNode(ir::OpKind::Add, {y, x}, {}));
  return g;
}

int countOps(const ir::Graph& g, ir::OpKind op, DType result) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op && node->result->type.dtype == result;
  return n;
}

TEST(Amp, CastsEachValueOnceAndKeepsNames) {
  ir::Graph g = withAmp(twoMatmuls(DType::f32), Precision::BF16);
  ASSERT_TRUE(ir::verifyGraph(g).empty()) << ir::printGraph(g);
  expectPolicy(g, DType::bf16, "two_matmuls");
  // x, w and permute(w) are narrowed once each; h's narrow form is the first matmul's own result.
  EXPECT_EQ(countOps(g, ir::OpKind::Cast, DType::bf16), 3) << ir::printGraph(g);
  EXPECT_EQ(countOps(g, ir::OpKind::Cast, DType::f32), 2) << ir::printGraph(g);
  const ir::Value* h = g.findValue("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, (ir::TensorType{DType::f32, {4, 2}}));
  EXPECT_EQ(h->producer->op, ir::OpKind::Cast);
  EXPECT_EQ(g.findOutput("h")->value, h);
  const ir::Node* second = nullptr;
  for (const auto& n : g.nodes())
    if (n->op == ir::OpKind::MatMul && n->operands[0] == h->producer->operands[0]) second = n.get();
  EXPECT_NE(second, nullptr) << "the second matmul reads the first one's bf16 result\n" << ir::printGraph(g);
}

// A select between values exact in the low type (a ReLU gradient: a widened product or 0) is made
// in the low type and widened after, so the next product reads it without a cast and a sum over it
// (the bias gradient) reads the narrow values: no kernel writes the f32 copy. 0.1 is not exact in
// bf16: that select stays f32.
TEST(Amp, SelectsBetweenExactValuesStayNarrow) {
  const ir::Graph g = ir::parseGraph(R"(graph @relu_grad {
  input %x : f32[4,8]
  input %w : f32[8,8]
  input %m : bool[4,8]
  %y = matmul(%x, %w) : f32[4,8]
  %zero = constant() {shape=[], dtype=f32, value=[0]} : f32[]
  %tenth = constant() {shape=[], dtype=f32, value=[0.1]} : f32[]
  %s = select(%m, %y, %zero) : f32[4,8]
  %u = select(%m, %y, %tenth) : f32[4,8]
  %r = reduce_sum(%s) {axes=[0]} : f32[8]
  %t = matmul(%s, %w) : f32[4,8]
  output %r = %r
  output %t = %t
  output %u = %u
}
)",
                                     "relu_grad.kir");
  ir::Graph low = withAmp(g, Precision::BF16);
  ASSERT_TRUE(ir::verifyGraph(low).empty()) << ir::printGraph(low);
  expectPolicy(low, DType::bf16, "relu_grad");
  const ir::Value* s = low.findValue("s");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->producer->op, ir::OpKind::Cast) << ir::printGraph(low);
  EXPECT_EQ(s->producer->operands[0]->producer->op, ir::OpKind::Select);
  EXPECT_EQ(s->producer->operands[0]->type.dtype, DType::bf16);
  EXPECT_EQ(low.findValue("u")->producer->op, ir::OpKind::Select) << "0.1 is not exact in bf16";
  EXPECT_EQ(low.findValue("u")->type.dtype, DType::f32);
  // After fusion no kernel writes an f32 tensor of the select's shape.
  for (const kernels::Kernel& k : kernels::lowerGraph(passes::compiledCopy(g, Precision::BF16)))
    for (int32_t o : k.outputs) {
      const kernels::Buffer& b = k.buffers[static_cast<size_t>(o)];
      EXPECT_FALSE(b.type == (ir::TensorType{DType::f32, {4, 8}}) && b.name != "t" && b.name != "u")
          << k.name << " writes %" << b.name;
    }
}

TEST(Amp, ReusesACastAlreadyInTheGraph) {
  ir::Graph g("pre_cast");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 2}});
  const ir::NamedAttr toBf16[] = {{"dtype", DType::bf16}};
  ir::Value* xb = g.addNode(ir::OpKind::Cast, {x}, toBf16, {}, "xb");
  g.addOutput("xb", xb);
  g.addOutput("y", g.addNode(ir::OpKind::MatMul, {x, x}, {}));
  g = withAmp(g, Precision::BF16);
  ASSERT_TRUE(ir::verifyGraph(g).empty()) << ir::printGraph(g);
  EXPECT_EQ(countOps(g, ir::OpKind::Cast, DType::bf16), 1) << ir::printGraph(g);
  for (const auto& n : g.nodes()) {
    if (n->op == ir::OpKind::MatMul) {
      EXPECT_EQ(n->operands[0]->name, "xb");
      EXPECT_EQ(n->operands[1]->name, "xb");
    }
  }
}

TEST(Amp, IsIdempotent) {
  for (Precision p : {Precision::BF16, Precision::F16}) {
    ir::Graph once = withAmp(twoMatmuls(DType::f32), p);
    ir::Graph twice = withAmp(once, p);
    EXPECT_EQ(ir::printGraph(twice), ir::printGraph(once));
  }
  ir::Graph step = zooGraph(kZoo[2], true);
  passes::TrainingStepOptions options;
  options.precision = Precision::F16;
  passes::buildTrainingStep(step, options);
  EXPECT_EQ(ir::printGraph(withAmp(step, Precision::F16)), ir::printGraph(step));
}

TEST(Amp, LeavesF64AndF32PolicyAlone) {
  ir::Graph f64 = twoMatmuls(DType::f64);
  std::string text = ir::printGraph(f64);
  EXPECT_EQ(ir::printGraph(withAmp(f64, Precision::BF16)), text);
  EXPECT_EQ(ir::printGraph(withAmp(f64, Precision::F16)), text);
  ir::Graph f32 = twoMatmuls(DType::f32);
  EXPECT_EQ(ir::printGraph(withAmp(f32, Precision::F32)), ir::printGraph(f32));
}

TEST(Amp, ConvolutionsAndTheirGradients) {
  ZooOptions zo;
  zo.batch = 1;
  ir::Graph g = buildZooModel("cnn", zo);
  passes::autodiff(g);  // adds conv2d_grad_input and conv2d_grad_weight
  ir::Graph low = withAmp(g, Precision::F16);
  ASSERT_TRUE(ir::verifyGraph(low).empty());
  for (ir::OpKind op : {ir::OpKind::Conv2d, ir::OpKind::Conv2dGradInput, ir::OpKind::Conv2dGradWeight}) {
    EXPECT_GT(countOps(low, op, DType::f16), 0) << opName(op);
    EXPECT_EQ(countOps(low, op, DType::f32), 0) << opName(op);
  }
  expectPolicy(low, DType::f16, "cnn gradients");
}

TEST(Amp, RegisteredAndDrivenByThePrecision) {
  ASSERT_NE(passes::findPass("amp"), nullptr);
  ir::Graph g = twoMatmuls(DType::f32);
  passes::PassContext ctx;
  ctx.precision = passes::precisionFromName("f16");
  passes::runPipeline(g, {"amp"}, ctx);
  expectPolicy(g, DType::f16, "pipeline");
}

// --- The seed of appendGradients, through which loss scaling enters the backward pass.

TEST(AutodiffSeed, TheSeedScalesEveryGradient) {
  ir::Graph g("seeded");
  ir::Value* w = g.addParam("w", {DType::f32, {2}}, ir::Initializer{});
  ir::Value* x = g.addInput("x", {DType::f32, {2}});
  ir::Initializer four{ir::Initializer::Kind::Constant, 4, 0, 0};
  ir::Value* seed = g.addParam("seed", {DType::f32, {}}, four);
  const ir::NamedAttr all[] = {{"axes", ir::Ints{}}};
  ir::Value* loss = g.addNode(ir::OpKind::ReduceSum, {g.addNode(ir::OpKind::Mul, {w, x}, {})}, all);
  passes::GradientResult r = passes::appendGradients(g, loss, std::vector<ir::Value*>{w}, seed);
  g.addOutput("grad", r.grads[0]);
  rt::HostTensor got =
      interp::run(g, {{"x", rt::HostTensor::fromDoubles(DType::f32, {2}, {1.5, -2})}}).at("grad");
  EXPECT_EQ(got.at(0), 6);
  EXPECT_EQ(got.at(1), -8);

  ir::Value* wrongType = g.addParam("seed2", {DType::f32, {2}}, ir::Initializer{});
  try {
    passes::appendGradients(g, loss, std::vector<ir::Value*>{w}, wrongType);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
}

// --- Dynamic loss scaling in an f16 training step.
//
// loss = reduce_sum(matmul(x[1,2], w[2,2])): the gradient of w is row i = x[i], reached through a
// matmul whose other operand is the seed `scale` itself. With x in multiples of 1/4 and scales that
// are powers of two, every f16 product is exact, so the step equals the f32 one exactly, and a
// scale above 65504 (f16's largest value) overflows by construction.

ir::Graph matmulLoss() {
  ir::Graph g("matmul_loss");
  ir::Initializer half{ir::Initializer::Kind::Constant, 0.5, 0, 0};
  ir::Value* w = g.addParam("w", {DType::f32, {2, 2}}, half);
  ir::Value* x = g.addInput("x", {DType::f32, {1, 2}});
  const ir::NamedAttr all[] = {{"axes", ir::Ints{}}};
  g.addOutput("loss", g.addNode(ir::OpKind::ReduceSum, {g.addNode(ir::OpKind::MatMul, {x, w}, {})}, all));
  return g;
}

struct Stepper {
  ir::Graph g;
  interp::TensorMap params;

  Stepper(Kind optimizer, double initialScale, int64_t growthInterval) : g(matmulLoss()) {
    passes::TrainingStepOptions options;
    options.optimizer.kind = optimizer;
    options.precision = Precision::F16;
    options.lossScale.initialScale = initialScale;
    options.lossScale.growthInterval = growthInterval;
    passes::buildTrainingStep(g, options);
    std::vector<std::string> errors = ir::verifyGraph(g);
    EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
    params = interp::initializeParams(g);
  }

  /// One step on x = [x0, x1] with lr 0.125; returns amp.skipped.
  double step(double x0, double x1) {
    interp::TensorMap inputs{{"x", rt::HostTensor::fromDoubles(DType::f32, {1, 2}, {x0, x1})},
                             {"lr", scalarF32(0.125)}};
    interp::TensorMap updated;
    interp::TensorMap out = interp::run(g, inputs, params, &updated);
    EXPECT_EQ(updated.size(), g.params().size()) << "every parameter and state has an update";
    for (auto& [name, t] : updated) params.insert_or_assign(name, std::move(t));
    return out.at("amp.skipped").at(0);
  }
  double scale() const { return params.at("amp.loss_scale").at(0); }
  double goodSteps() const { return params.at("amp.good_steps").at(0); }
  std::vector<double> w() const {
    const rt::HostTensor& t = params.at("w");
    return {t.at(0), t.at(1), t.at(2), t.at(3)};
  }
};

TEST(LossScaling, StateAndOutputs) {
  Stepper s(Kind::Sgd, 65536, 2000);
  EXPECT_EQ(s.g.findParam("amp.loss_scale")->value->type, (ir::TensorType{DType::f32, {}}));
  EXPECT_EQ(s.g.findParam("amp.loss_scale")->init.a, 65536);
  EXPECT_EQ(s.g.findParam("amp.good_steps")->value->type, (ir::TensorType{DType::f32, {}}));
  ASSERT_NE(s.g.findOutput("amp.skipped"), nullptr);
  EXPECT_EQ(s.g.findOutput("amp.skipped")->value->type, (ir::TensorType{DType::f32, {}}));
  expectPolicy(s.g, DType::f16, "matmul_loss step");
  std::string text = ir::printGraph(s.g);
  EXPECT_NE(text.find("amp.grads_finite"), std::string::npos) << text;
}

TEST(LossScaling, TheDefaultScaleOverflowsHereSoTheFirstStepIsSkipped) {
  Stepper s(Kind::Sgd, 65536, 2000);
  EXPECT_EQ(s.step(0.75, -0.5), 1.0);  // the seed 65536 is beyond f16: infinite gradients
  EXPECT_EQ(s.w(), std::vector<double>(4, 0.5));
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.step(0.75, -0.5), 0.0);
  EXPECT_EQ(s.w(), (std::vector<double>{0.5 - 0.125 * 0.75, 0.5 - 0.125 * 0.75, 0.5 + 0.125 * 0.5,
                                        0.5 + 0.125 * 0.5}));
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.goodSteps(), 1);
}

TEST(LossScaling, AHugeScaleSkipsAndHalves) {
  Stepper s(Kind::Sgd, 1e38, 2000);
  EXPECT_EQ(s.step(0.75, -0.5), 1.0);
  EXPECT_EQ(s.w(), std::vector<double>(4, 0.5));
  EXPECT_FLOAT_EQ(s.scale(), 5e37);
  EXPECT_EQ(s.goodSteps(), 0);
}

TEST(LossScaling, AHugeInputSkipsTheWholeAdamStep) {
  Stepper s(Kind::Adam, 1024, 2000);
  ASSERT_EQ(s.step(0.75, -0.5), 0.0);
  interp::TensorMap before = s.params;
  EXPECT_EQ(s.step(1e6, 1), 1.0);  // 1e6 is inf in f16
  for (const char* name : {"w", "w.adam_m", "w.adam_v", "optim.step"}) {
    const rt::HostTensor &a = before.at(name), &b = s.params.at(name);
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.at(i), b.at(i)) << name << "[" << i << "]";
  }
  EXPECT_EQ(s.params.at("optim.step").at(0), 1);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.goodSteps(), 0);
}

TEST(LossScaling, TheScaleStaysAtLeastOne) {
  Stepper s(Kind::Sgd, 1, 2000);
  EXPECT_EQ(s.step(1e6, 1), 1.0);
  EXPECT_EQ(s.scale(), 1);
  EXPECT_EQ(s.step(0.75, -0.5), 0.0);
  EXPECT_EQ(s.scale(), 1);
}

TEST(LossScaling, GrowsAfterNGoodStepsInARow) {
  Stepper s(Kind::Sgd, 1024, 3);
  std::vector<double> w(4, 0.5);
  auto expectTaken = [&](double scale, double good) {
    EXPECT_EQ(s.step(0.75, -0.5), 0.0);
    for (int i = 0; i < 4; ++i) w[i] -= 0.125 * (i < 2 ? 0.75 : -0.5);
    EXPECT_EQ(s.w(), w);  // exact: the unscaled f16 gradient is the f32 one
    EXPECT_EQ(s.scale(), scale);
    EXPECT_EQ(s.goodSteps(), good);
  };
  expectTaken(1024, 1);
  expectTaken(1024, 2);
  expectTaken(2048, 0);  // the third good step in a row doubles the scale
  expectTaken(2048, 1);
  // An overflow restarts the count: two more good steps do not grow the scale, the third does.
  EXPECT_EQ(s.step(1e6, 1), 1.0);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.goodSteps(), 0);
  expectTaken(1024, 1);
  expectTaken(1024, 2);
  expectTaken(2048, 0);
}

TEST(LossScaling, BadConfigurations) {
  for (auto [scale, interval] : {std::pair{0.5, int64_t{2000}}, std::pair{65536.0, int64_t{0}}}) {
    ir::Graph g = matmulLoss();
    passes::TrainingStepOptions options;
    options.precision = Precision::F16;
    options.lossScale.initialScale = scale;
    options.lossScale.growthInterval = interval;
    try {
      passes::buildTrainingStep(g, options);
      ADD_FAILURE() << "no error for scale " << scale << ", interval " << interval;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("loss scaling"), std::string::npos) << e.what();
    }
  }
}

// --- f16 training with loss scaling lowers the loss as f32 training does.

/// Runs `steps` steps on one fixed batch; returns the loss before the first and after the last step
/// and the number of skipped steps.
struct Trajectory {
  double first, last;
  int skipped;
};

Trajectory train(const ZooCase& c, Kind optimizer, double lr, Precision p, int steps) {
  ir::Graph g = zooGraph(c, true);
  passes::TrainingStepOptions options;
  options.optimizer.kind = optimizer;
  options.precision = p;
  passes::buildTrainingStep(g, options);
  interp::TensorMap inputs = randomBatch(g, c.tokenRange);
  inputs.emplace("lr", scalarF32(lr));
  interp::TensorMap params = interp::initializeParams(g);
  Trajectory t{0, 0, 0};
  for (int s = 0; s <= steps; ++s) {
    interp::TensorMap updated;
    interp::TensorMap out = interp::run(g, inputs, params, &updated);
    if (s == 0) t.first = out.at("loss").at(0);
    t.last = out.at("loss").at(0);
    if (s < steps && out.count("amp.skipped")) t.skipped += out.at("amp.skipped").at(0) != 0;
    for (auto& [name, v] : updated) params.insert_or_assign(name, std::move(v));
  }
  return t;
}

TEST(LossScaling, F16TrainingLowersTheLossLikeF32) {
  struct Case {
    ZooCase zoo;
    Kind optimizer;
    double lr;
  };
  for (const Case& c : {Case{{"tiny_mlp", 8, 0}, Kind::Sgd, 0.05}, Case{{"digits_mlp", 8, 0}, Kind::Adam, 1e-2}}) {
    Trajectory f32 = train(c.zoo, c.optimizer, c.lr, Precision::F32, 8);
    Trajectory f16 = train(c.zoo, c.optimizer, c.lr, Precision::F16, 8);
    std::printf("[ amp ] %s: f32 loss %.5f -> %.5f; f16 %.5f -> %.5f with %d skipped steps\n", c.zoo.model,
                f32.first, f32.last, f16.first, f16.last, f16.skipped);
    ASSERT_LT(f32.last, f32.first) << c.zoo.model;
    EXPECT_LT(f16.last, f16.first) << c.zoo.model;
    // Skipped steps aside, f16 makes the progress f32 makes.
    EXPECT_GE(f16.first - f16.last, 0.5 * (f32.first - f32.last)) << c.zoo.model;
  }
}

}  // namespace
}  // namespace kiln::testing
