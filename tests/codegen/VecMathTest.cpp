// The vectorized math emitters against the C library in double precision: ~10^6 points per
// function on the host's vector width (with FMA where the host has it) and on baseline x86-64
// (SSE2, no FMA), each within the documented maximum ulp error; special values exactly; and no
// calls in the generated code.
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/VecMath.h"
#include "support/File.h"
#include "tests/runtime/TestFiles.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using kiln::cpu::CompileOptions;
using kiln::cpu::Jit;
using kiln::cpu::MathFn;
using kiln::rt::test::ScratchDir;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// void apply(const float* in, float* out): one vector of `lanes` floats (a scalar when lanes is
/// 1) through emitMath(fn).
using Apply = void(const float*, float*);

Apply* compileApply(Jit& jit, MathFn fn, unsigned lanes, const CompileOptions& options = {}) {
  auto m = std::make_unique<llvm::Module>(std::string(kiln::cpu::mathFnName(fn)) + "_x" +
                                              std::to_string(lanes),
                                          jit.context());
  llvm::IRBuilder<> b(jit.context());
  llvm::Type* type = lanes == 1 ? b.getFloatTy()
                                : static_cast<llvm::Type*>(llvm::FixedVectorType::get(b.getFloatTy(), lanes));
  auto* f = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy()}, false),
                                   llvm::Function::ExternalLinkage, "apply", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", f));
  llvm::Value* x = b.CreateAlignedLoad(type, f->getArg(0), llvm::Align(4));
  b.CreateAlignedStore(kiln::cpu::emitMath(b, fn, x), f->getArg(1), llvm::Align(4));
  b.CreateRetVoid();
  return jit.compile(std::move(m), options)->fn<Apply>("apply");
}

/// Runs `apply` over `xs` (padded to whole vectors).
std::vector<float> run(Apply* apply, unsigned lanes, std::vector<float> xs) {
  const size_t n = xs.size();
  xs.resize((n + lanes - 1) / lanes * lanes, 0.0f);
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); i += lanes) apply(&xs[i], &ys[i]);
  ys.resize(n);
  return ys;
}

double reference(MathFn fn, double x) {
  switch (fn) {
    case MathFn::Exp: return std::exp(x);
    case MathFn::Log: return std::log(x);
    case MathFn::Tanh: return std::tanh(x);
    case MathFn::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case MathFn::Erf: return std::erf(x);
  }
  return 0;
}

/// The unit in the last place of an f32 near v (2^−149 for subnormals).
double ulpOf(double v) {
  v = std::fabs(v);
  if (v < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(v, &e);  // v = m·2^e, m ∈ [½, 1)
  return std::ldexp(1.0, e - 24);
}

/// ~10^6 inputs: uniform over the interesting range, log-uniform magnitudes of both signs down to
/// the subnormals, and a sweep over the bit patterns of positive floats.
std::vector<float> inputs(MathFn fn) {
  struct Range { float lo, hi; };
  const Range range = fn == MathFn::Exp     ? Range{-104.0f, 89.0f}
                      : fn == MathFn::Log     ? Range{0.0f, 4.0f}
                      : fn == MathFn::Sigmoid ? Range{-110.0f, 30.0f}
                      : fn == MathFn::Erf     ? Range{-5.0f, 5.0f}
                                              : Range{-10.0f, 10.0f};
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> uniform(range.lo, range.hi);
  std::uniform_real_distribution<float> exponent(-45.0f, 38.5f);
  std::vector<float> xs;
  for (int i = 0; i < 500000; ++i) xs.push_back(uniform(rng));
  for (int i = 0; i < 250000; ++i) {
    float v = std::pow(10.0f, exponent(rng));
    xs.push_back(fn == MathFn::Log || (i & 1) ? v : -v);
  }
  for (std::uint32_t bits = 1; bits < 0x7f800000u; bits += 0x7f800000u / 250000) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    xs.push_back(v);
  }
  return xs;
}

struct Measured {
  double maxUlp = 0, maxRel = 0;
  float worstX = 0;
};

Measured measure(MathFn fn, const std::vector<float>& xs, const std::vector<float>& ys) {
  Measured m;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = reference(fn, xs[i]);
    // Beyond the f32 range the correctly rounded result is ±inf.
    if (!std::isfinite(static_cast<float>(want)) || std::isnan(ys[i])) {
      EXPECT_TRUE(std::isnan(want) ? std::isnan(ys[i]) : ys[i] == static_cast<float>(want)) << "x = " << xs[i];
      continue;
    }
    const double err = std::fabs(ys[i] - want);
    const double ulps = err / ulpOf(want);
    if (ulps > m.maxUlp) m.maxUlp = ulps, m.worstX = xs[i];
    // Relative error where the result is a normal f32.
    if (std::fabs(want) >= 0x1p-126) m.maxRel = std::max(m.maxRel, err / std::fabs(want));
  }
  return m;
}

class VecMath : public ::testing::TestWithParam<MathFn> {};

TEST_P(VecMath, WithinTheDocumentedErrorOnAMillionPoints) {
  const MathFn fn = GetParam();
  const std::vector<float> xs = inputs(fn);
  Jit& host = Jit::host();
  Jit baseline([] {
    kiln::cpu::JitOptions o;
    o.cpu = "x86-64";
    return o;
  }());
  const unsigned hostLanes = host.hasFeature("avx512f") ? 16 : host.hasFeature("avx") ? 8 : 4;
  struct Target { const char* name; Jit& jit; unsigned lanes; };
  for (const Target& t : {Target{"host", host, hostLanes}, Target{"x86-64", baseline, 4},
                          Target{"scalar", host, 1}}) {
    const Measured m = measure(fn, xs, run(compileApply(t.jit, fn, t.lanes), t.lanes, xs));
    std::printf("%-8s %-7s x%-2u max %.3f ulp (at x = %.9g), max rel err %.3g over %zu points\n",
                kiln::cpu::mathFnName(fn), t.name, t.lanes, m.maxUlp, m.worstX, m.maxRel, xs.size());
    EXPECT_LE(m.maxUlp, kiln::cpu::maxUlpError(fn))
        << kiln::cpu::mathFnName(fn) << " on " << t.name << " at x = " << m.worstX;
  }
}

TEST_P(VecMath, GeneratesNoCalls) {
  const MathFn fn = GetParam();
  ScratchDir dir;
  CompileOptions options;
  options.dumpDir = dir.path().string();
  options.dumpStem = "math";
  kiln::cpu::JitOptions baseline;
  baseline.cpu = "x86-64";
  Jit jit(baseline);
  compileApply(jit, fn, 4, options);
  const std::string assembly = kiln::readTextFile((dir.path() / "math.s").string());
  EXPECT_EQ(assembly.find("call"), std::string::npos) << assembly;
  EXPECT_EQ(assembly.find("@PLT"), std::string::npos) << assembly;
}

INSTANTIATE_TEST_SUITE_P(Functions, VecMath,
                         ::testing::Values(MathFn::Exp, MathFn::Log, MathFn::Tanh, MathFn::Sigmoid,
                                           MathFn::Erf),
                         [](const auto& info) { return std::string(kiln::cpu::mathFnName(info.param)); });

struct Special {
  MathFn fn;
  float x, want;
};

TEST(VecMathSpecials, FollowTheCLibrary) {
  const Special specials[] = {
      {MathFn::Exp, -kInf, 0.0f},      {MathFn::Exp, kInf, kInf},        {MathFn::Exp, 0.0f, 1.0f},
      {MathFn::Exp, 89.0f, kInf},      {MathFn::Exp, -105.0f, 0.0f},     {MathFn::Exp, kNaN, kNaN},
      {MathFn::Log, 0.0f, -kInf},      {MathFn::Log, -0.0f, -kInf},      {MathFn::Log, -1.0f, kNaN},
      {MathFn::Log, kInf, kInf},       {MathFn::Log, 1.0f, 0.0f},        {MathFn::Log, kNaN, kNaN},
      {MathFn::Tanh, kInf, 1.0f},      {MathFn::Tanh, -kInf, -1.0f},     {MathFn::Tanh, -0.0f, -0.0f},
      {MathFn::Tanh, kNaN, kNaN},      {MathFn::Sigmoid, kInf, 1.0f},    {MathFn::Sigmoid, -kInf, 0.0f},
      {MathFn::Sigmoid, 0.0f, 0.5f},   {MathFn::Sigmoid, kNaN, kNaN},    {MathFn::Erf, kInf, 1.0f},
      {MathFn::Erf, -kInf, -1.0f},     {MathFn::Erf, 0.0f, 0.0f},        {MathFn::Erf, kNaN, kNaN},
  };
  Jit& jit = Jit::host();
  for (const Special& s : specials) {
    for (unsigned lanes : {1u, 4u}) {
      const float y = run(compileApply(jit, s.fn, lanes), lanes, {s.x})[0];
      const char* name = kiln::cpu::mathFnName(s.fn);
      if (std::isnan(s.want)) {
        EXPECT_TRUE(std::isnan(y)) << name << "(" << s.x << ") = " << y;
      } else {
        EXPECT_EQ(y, s.want) << name << "(" << s.x << ")";
        EXPECT_EQ(std::signbit(y), std::signbit(s.want)) << name << "(" << s.x << ") = " << y;
      }
    }
  }
}

}  // namespace
