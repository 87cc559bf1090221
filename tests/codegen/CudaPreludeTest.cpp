// The CUDA prelude (codegen/cuda/Prelude.cuh) without a GPU: compiled here as host C++ and checked
// against the interpreter's scalar semantics — every elementwise primitive of the op table for
// every dtype it accepts, on values including ±0, ±inf, NaN, denormals and large integers; every
// cast against the interpreter itself; Philox against support/Philox.h. The device build of the
// prelude differs only in the intrinsics it uses (hardware f16/bf16 conversions, CUDA's libm),
// whose accuracy the prelude's comment documents.
#include "codegen/cuda/Prelude.cuh"

#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Render.h"
#include "tests/codegen/CudaEmulation.h"
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
#include <sstream>
#include <thread>
#include <type_traits>

using namespace kiln;

namespace {

// ---- (a) the prelude on the host ----------------------------------------------------------------

/// A scalar in its compute type's class: floats in `f` (double), integers in `i`, bools in `b`.
struct Scalar {
  double f = 0;
  int64_t i = 0;
  bool b = false;
};

enum class Class { Float, Double, Int, Bool };

Class classOf(DType t) {
  switch (t) {
    case DType::f64: return Class::Double;
    case DType::i32:
    case DType::i64: return Class::Int;
    case DType::boolean: return Class::Bool;
    default: return Class::Float;
  }
}

Scalar fromResult(float r) { return {static_cast<double>(r), 0, false}; }
Scalar fromResult(double r) { return {r, 0, false}; }
Scalar fromResult(long long r) { return {0, r, false}; }
Scalar fromResult(bool r) { return {0, 0, r}; }

/// Calls fn with the compute-type value of x (dtype t); nullopt when the prelude has no overload.
template <typename F>
std::optional<Scalar> callUnary(DType t, const Scalar& x, F fn) {
  switch (classOf(t)) {
    case Class::Float:
      if constexpr (std::is_invocable_v<F, float>) return fromResult(fn(static_cast<float>(x.f)));
      break;
    case Class::Double:
      if constexpr (std::is_invocable_v<F, double>) return fromResult(fn(x.f));
      break;
    case Class::Int:
      if constexpr (std::is_invocable_v<F, long long>) return fromResult(fn(static_cast<long long>(x.i)));
      break;
    case Class::Bool:
      if constexpr (std::is_invocable_v<F, bool>) return fromResult(fn(x.b));
      break;
  }
  return std::nullopt;
}

template <typename F>
std::optional<Scalar> callBinary(DType t, const Scalar& x, const Scalar& y, F fn) {
  switch (classOf(t)) {
    case Class::Float:
      if constexpr (std::is_invocable_v<F, float, float>)
        return fromResult(fn(static_cast<float>(x.f), static_cast<float>(y.f)));
      break;
    case Class::Double:
      if constexpr (std::is_invocable_v<F, double, double>) return fromResult(fn(x.f, y.f));
      break;
    case Class::Int:
      if constexpr (std::is_invocable_v<F, long long, long long>)
        return fromResult(fn(static_cast<long long>(x.i), static_cast<long long>(y.i)));
      break;
    case Class::Bool:
      if constexpr (std::is_invocable_v<F, bool, bool>) return fromResult(fn(x.b, y.b));
      break;
  }
  return std::nullopt;
}

// The host prelude function of every unary and binary row of ir/ScalarOps.h. A row the table
// lacks fails the test, so a new op cannot be added without its prelude function.
#define KILN_HOST(fn) [](auto... v) -> decltype(fn(v...)) { return fn(v...); }
using UnaryCall = std::optional<Scalar> (*)(DType, const Scalar&);
using BinaryCall = std::optional<Scalar> (*)(DType, const Scalar&, const Scalar&);
#define KILN_UNARY(Enum, fn) {ir::OpKind::Enum, [](DType t, const Scalar& x) { return callUnary(t, x, KILN_HOST(fn)); }}
#define KILN_BINARY(Enum, fn) \
  {ir::OpKind::Enum, [](DType t, const Scalar& x, const Scalar& y) { return callBinary(t, x, y, KILN_HOST(fn)); }}

const std::pair<ir::OpKind, UnaryCall> kUnary[] = {
    KILN_UNARY(Neg, kiln_neg),     KILN_UNARY(Abs, kiln_abs),   KILN_UNARY(Exp, kiln_exp),
    KILN_UNARY(Log, kiln_log),     KILN_UNARY(Sqrt, kiln_sqrt), KILN_UNARY(Rsqrt, kiln_rsqrt),
    KILN_UNARY(Reciprocal, kiln_reciprocal), KILN_UNARY(Tanh, kiln_tanh), KILN_UNARY(Sigmoid, kiln_sigmoid),
    KILN_UNARY(Sin, kiln_sin),     KILN_UNARY(Cos, kiln_cos),   KILN_UNARY(Erf, kiln_erf),
    KILN_UNARY(Relu, kiln_relu),   KILN_UNARY(Floor, kiln_floor), KILN_UNARY(Not, kiln_not),
};
const std::pair<ir::OpKind, BinaryCall> kBinary[] = {
    KILN_BINARY(Add, kiln_add), KILN_BINARY(Sub, kiln_sub), KILN_BINARY(Mul, kiln_mul), KILN_BINARY(Div, kiln_div),
    KILN_BINARY(Pow, kiln_pow), KILN_BINARY(Max, kiln_max), KILN_BINARY(Min, kiln_min), KILN_BINARY(And, kiln_and),
    KILN_BINARY(Or, kiln_or),   KILN_BINARY(Eq, kiln_eq),   KILN_BINARY(Ne, kiln_ne),   KILN_BINARY(Lt, kiln_lt),
    KILN_BINARY(Le, kiln_le),   KILN_BINARY(Gt, kiln_gt),   KILN_BINARY(Ge, kiln_ge),
};

/// Ops that are not one correctly rounded operation in f32: libm functions (CUDA's on the device,
/// the host's here) and rsqrt (1/sqrtf(x), two roundings). Compared within ulps; the rest exactly.
bool isApproximate(ir::OpKind op) {
  using ir::OpKind;
  return op == OpKind::Exp || op == OpKind::Log || op == OpKind::Tanh || op == OpKind::Sigmoid || op == OpKind::Sin ||
         op == OpKind::Cos || op == OpKind::Erf || op == OpKind::Pow || op == OpKind::Rsqrt;
}

/// The test values of `t`: special floats and integers at the edges of every type's range, each
/// rounded to `t` as a store would.
std::vector<Scalar> grid(DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Scalar> out;
  if (t == DType::boolean) return {{0, 0, false}, {0, 1, true}};
  if (isInteger(t)) {
    const int64_t big[] = {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 65536, 2147483647, -2147483647 - 1, 2147483648LL,
                           -2147483649LL, 9007199254740993LL, -9007199254740993LL, int64_t{1} << 40,
                           std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    for (int64_t v : big) {
      int64_t x = t == DType::i32 ? static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))) : v;
      out.push_back({0, x, false});
    }
    return out;
  }
  const double values[] = {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), 1, -1, 0.5, -0.5, 1.5,
                           2.5, -2.5, 3, 10, -7.25, 0.1, 1.0 / 3, 100.5, 88.7, -88.7, -104, 710, -745, 1e-8, 6e-5,
                           -6e-8, 1e-40, -1e-40, 1.4e-45, 2.2e-308, 4.9e-324, 65504, 65520, -65536, 1e5, 3e9, -3e9,
                           2147483647.0, 2147483648.0, -2147483648.0, -2147483904.0, 9.2233720368547758e18,
                           -9.3e18, 1e19, 1e30, -1e30, 3.4028234663852886e38, 1e300, 16777217, 0.7853981633974483};
  for (double v : values) out.push_back({kiln::roundTo(t, v), 0, false});
  return out;
}

/// The interpreter's stored result for a float computation `r` of dtype `t` (comparisons: r != 0).
Scalar expectFloat(DType t, double r) {
  if (t == DType::boolean) return {0, 0, r != 0};
  if (isInteger(t)) return {0, static_cast<int64_t>(r), false};
  return {kiln::roundTo(t, r), 0, false};
}

/// The interpreter's stored result for an integer computation (i32: wrapped, bool: != 0).
Scalar expectInt(DType t, int64_t r) {
  if (t == DType::boolean) return {0, 0, r != 0};
  if (t == DType::i32) return {0, static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(r))), false};
  return {0, r, false};
}

/// What the generated code does after an op of result dtype t: ExprEmitter's rounding.
Scalar roundLikeEmitter(DType t, Scalar v) {
  if (t == DType::f16) v.f = kiln_round_f16(static_cast<float>(v.f));
  if (t == DType::bf16) v.f = kiln_round_bf16(static_cast<float>(v.f));
  if (t == DType::i32) v.i = kiln_round_i32(v.i);
  return v;
}

/// A float's position in the total order of `t`'s values (adjacent values differ by 1).
int64_t ordinal(DType t, double v) {
  int64_t bits;
  int64_t signBit;
  switch (t) {
    case DType::f64:
      bits = std::bit_cast<int64_t>(v);
      signBit = std::numeric_limits<int64_t>::min();
      break;
    case DType::f32:
      bits = std::bit_cast<uint32_t>(static_cast<float>(v));
      signBit = int64_t{1} << 31;
      break;
    case DType::f16:
      bits = floatToHalf(static_cast<float>(v));
      signBit = 1 << 15;
      break;
    default:
      bits = floatToBFloat16(static_cast<float>(v));
      signBit = 1 << 15;
      break;
  }
  if (t == DType::f64) return bits < 0 ? std::numeric_limits<int64_t>::min() - bits : bits;
  return bits & signBit ? -(bits & (signBit - 1)) : bits;
}

/// Compares a prelude result with the interpreter's: bit-exact (±0 and NaN-ness included), or
/// within `ulps` of dtype t.
::testing::AssertionResult same(DType t, const Scalar& want, const Scalar& got, int64_t ulps = 0) {
  if (t == DType::boolean) {
    if (want.b == got.b) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "want " << want.b << ", got " << got.b;
  }
  if (isInteger(t)) {
    if (want.i == got.i) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "want " << want.i << ", got " << got.i;
  }
  bool ok;
  if (std::isnan(want.f) || std::isnan(got.f)) ok = std::isnan(want.f) && std::isnan(got.f);
  else if (ulps == 0) ok = want.f == got.f && std::signbit(want.f) == std::signbit(got.f);
  else ok = std::abs(ordinal(t, want.f) - ordinal(t, got.f)) <= ulps;
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format("want {:.17g}, got {:.17g} ({} ulps allowed)", want.f, got.f, ulps);
}

std::string show(DType t, const Scalar& x) {
  if (t == DType::boolean) return x.b ? "true" : "false";
  if (isInteger(t)) return std::to_string(x.i);
  return fmt::format("{:.17g}", x.f);
}

/// The result dtype of `op` on operands of `t`, or nullopt where the op rejects `t`.
std::optional<DType> resultOf(ir::OpKind op, DType t, size_t arity) {
  std::vector<ir::TensorType> operands(arity, ir::TensorType{t, {}});
  try {
    return ir::inferType(ir::opInfo(op), operands, {}, {}).dtype;
  } catch (const kiln::Error&) {
    return std::nullopt;
  }
}

/// Allowed ulps of an approximate op at `t`'s compute precision against the interpreter's f64
/// evaluation rounded to t: glibc's float functions are within about an ulp; f64 uses the same
/// functions as the interpreter.
int64_t hostUlps(DType t) { return t == DType::f64 ? 0 : t == DType::f32 ? 2 : 1; }

TEST(CudaPrelude, UnaryOpsMatchTheInterpreter) {
  for (const ir::ScalarUnary& row : ir::scalarUnaryOps()) {
    auto fn = std::find_if(std::begin(kUnary), std::end(kUnary), [&](auto& e) { return e.first == row.op; });
    ASSERT_NE(fn, std::end(kUnary)) << "no prelude function for '" << ir::opName(row.op) << "'";
    int checked = 0;
    for (DType t : kAllDTypes) {
      std::optional<DType> result = resultOf(row.op, t, 1);
      if (!result) continue;
      for (const Scalar& x : grid(t)) {
        std::optional<Scalar> got = fn->second(t, x);
        ASSERT_TRUE(got) << "kiln_" << ir::opName(row.op) << " has no overload for " << dtypeName(t);
        Scalar want = isFloat(t) ? expectFloat(*result, row.onFloat(x.f)) : expectInt(*result, row.onInt(t == DType::boolean ? x.b : x.i));
        int64_t ulps = isApproximate(row.op) ? hostUlps(t) : 0;
        EXPECT_TRUE(same(*result, want, roundLikeEmitter(*result, *got), ulps))
            << ir::opName(row.op) << "(" << show(t, x) << ") at " << dtypeName(t);
        ++checked;
      }
    }
    EXPECT_GT(checked, 0) << ir::opName(row.op);
  }
}

TEST(CudaPrelude, BinaryOpsMatchTheInterpreter) {
  for (const ir::ScalarBinary& row : ir::scalarBinaryOps()) {
    auto fn = std::find_if(std::begin(kBinary), std::end(kBinary), [&](auto& e) { return e.first == row.op; });
    ASSERT_NE(fn, std::end(kBinary)) << "no prelude function for '" << ir::opName(row.op) << "'";
    for (DType t : kAllDTypes) {
      std::optional<DType> result = resultOf(row.op, t, 2);
      if (!result) continue;
      std::vector<Scalar> values = grid(t);
      int failures = 0;
      for (const Scalar& x : values)
        for (const Scalar& y : values) {
          std::optional<Scalar> got = fn->second(t, x, y);
          ASSERT_TRUE(got) << "kiln_" << ir::opName(row.op) << " has no overload for " << dtypeName(t);
          Scalar want = isFloat(t) ? expectFloat(*result, row.onFloat(x.f, y.f))
                                   : expectInt(*result, t == DType::boolean ? row.onInt(x.b, y.b) : row.onInt(x.i, y.i));
          int64_t ulps = isApproximate(row.op) ? hostUlps(t) : 0;
          auto ok = same(*result, want, roundLikeEmitter(*result, *got), ulps);
          if (!ok && ++failures <= 5)
            ADD_FAILURE() << ir::opName(row.op) << "(" << show(t, x) << ", " << show(t, y) << ") at " << dtypeName(t) << ": "
                          << ok.message();
        }
    }
  }
}

TEST(CudaPrelude, SelectAndStopGradientPassValuesThrough) {
  EXPECT_EQ(kiln_select(true, 1.5f, 2.5f), 1.5f);
  EXPECT_EQ(kiln_select(false, 1LL, 2LL), 2LL);
  EXPECT_TRUE(std::signbit(kiln_select(true, -0.0, 1.0)));
  EXPECT_EQ(kiln_stop_gradient(-3.0f), -3.0f);
}

/// Calls kiln_cast_<to> on a compute value of `from`.
Scalar hostCast(DType from, DType to, const Scalar& x) {
  auto call = [&](auto v) -> Scalar {
    switch (to) {
      case DType::f32: return fromResult(kiln_cast_f32(v));
      case DType::f16: return fromResult(kiln_cast_f16(v));
      case DType::bf16: return fromResult(kiln_cast_bf16(v));
      case DType::f64: return fromResult(kiln_cast_f64(v));
      case DType::i32: return fromResult(kiln_cast_i32(v));
      case DType::i64: return fromResult(kiln_cast_i64(v));
      case DType::boolean: return fromResult(kiln_cast_bool(v));
    }
    return {};
  };
  switch (classOf(from)) {
    case Class::Float: return call(static_cast<float>(x.f));
    case Class::Double: return call(x.f);
    case Class::Int: return call(static_cast<long long>(x.i));
    case Class::Bool: return call(x.b);
  }
  return {};
}

/// The grid of `t` as a host tensor (integers written exactly).
rt::HostTensor tensorOf(DType t, const std::vector<Scalar>& values) {
  auto n = static_cast<int64_t>(values.size());
  rt::HostTensor x(t, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::i64) x.as<int64_t>()[i] = values[i].i;
    else if (t == DType::i32) x.as<int32_t>()[i] = static_cast<int32_t>(values[i].i);
    else if (t == DType::boolean) x.as<uint8_t>()[i] = values[i].b;
    else x.set(i, values[i].f);
  }
  return x;
}

Scalar elementOf(const rt::HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i64: return {0, t.as<int64_t>()[i], false};
    case DType::i32: return {0, t.as<int32_t>()[i], false};
    case DType::boolean: return {0, 0, t.as<uint8_t>()[i] != 0};
    default: return {t.at(i), 0, false};
  }
}

TEST(CudaPrelude, CastsMatchTheInterpreter) {
  // Integers beyond 2^53 and every float edge, through the interpreter's own cast evaluator.
  std::vector<Scalar> extra;
  for (int64_t v : {int64_t{16777217}, int64_t{16777219}, int64_t{33554435}, (int64_t{1} << 53) + 3, int64_t{-65521},
                    int64_t{1} << 62, -(int64_t{1} << 62) - 12345})
    extra.push_back({0, v, false});
  int checked = 0;
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      std::vector<Scalar> values = grid(from);
      if (from == DType::i64) values.insert(values.end(), extra.begin(), extra.end());
      auto n = static_cast<int64_t>(values.size());
      ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %x : {0}[{2}]\n  %y = cast(%x) {{dtype={1}}} : {1}[{2}]\n"
                                               "  output %y = %y\n}}\n",
                                               dtypeName(from), dtypeName(to), n),
                                   "cast.kir");
      interp::TensorMap out = interp::run(g, {{"x", tensorOf(from, values)}});
      const rt::HostTensor& want = out.at("y");
      for (int64_t i = 0; i < n; ++i)
        EXPECT_TRUE(same(to, elementOf(want, i), hostCast(from, to, values[i])))
            << "cast " << dtypeName(from) << "→" << dtypeName(to) << " of " << show(from, values[i]);
      checked += static_cast<int>(n);
    }
  EXPECT_GT(checked, 49 * 20);
}

TEST(CudaPrelude, LoadsAndStoresOfHalfTypesRoundTrip) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    __half h{static_cast<unsigned short>(bits)};
    __nv_bfloat16 b{static_cast<unsigned short>(bits)};
    float hv = kiln_ld(h), bv = kiln_ld(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(hv), std::bit_cast<uint32_t>(halfToFloat(static_cast<uint16_t>(bits))));
    ASSERT_EQ(std::bit_cast<uint32_t>(bv), std::bit_cast<uint32_t>(bfloat16ToFloat(static_cast<uint16_t>(bits))));
    if (std::isnan(hv)) continue;
    __half h2{};
    __nv_bfloat16 b2{};
    kiln_st(&h2, hv);
    kiln_st(&b2, bv);
    ASSERT_EQ(h2.x, bits);
    ASSERT_EQ(b2.x, bits);
  }
  // Rounding every 997th f32 bit pattern to f16 and bf16 agrees with support/DType.h.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 997) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    float h = kiln_round_f16(f), b = kiln_round_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(h) && std::isnan(b));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(h), std::bit_cast<uint32_t>(halfToFloat(floatToHalf(f)))) << bits;
    ASSERT_EQ(std::bit_cast<uint32_t>(b), std::bit_cast<uint32_t>(bfloat16ToFloat(floatToBFloat16(f)))) << bits;
  }
}

TEST(CudaPrelude, RoundToOddMatchesSupport) {
  for (double d : {1.0 + 1e-12, 1.0 - 1e-17, 3.4028235677973366e38, 3.5e38, -1e-50, 1e-46, 6.103515625e-05 + 1e-20,
                   65519.999999999, 65520.0, 0.1, -0.1, 1e300})
    EXPECT_EQ(std::bit_cast<uint32_t>(kiln_round_to_odd_f32(d)), std::bit_cast<uint32_t>(roundToOddF32(d))) << d;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 100000; ++i) {  // xorshift over every magnitude
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    auto v = static_cast<int64_t>(x) >> (i % 63);
    ASSERT_EQ(std::bit_cast<uint32_t>(kiln_round_to_odd_f32(static_cast<long long>(v))),
              std::bit_cast<uint32_t>(roundToOddF32(v)))
        << v;
    double d = std::bit_cast<double>(x);
    if (std::isnan(d)) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(kiln_round_to_odd_f32(d)), std::bit_cast<uint32_t>(roundToOddF32(d))) << d;
  }
}

TEST(CudaPrelude, PhiloxMatchesSupport) {
  int inexactNormals = 0, draws = 0;
  for (uint64_t seed : {0ull, 1ull, 42ull, 0xDEADBEEFCAFEF00Dull})
    for (uint64_t step : {0ull, 1ull, 1ull << 40})
      for (uint64_t i = 0; i < 2000; ++i) {
        uint64_t offset = i * 7919;
        unsigned int words[4];
        kiln_philox(seed, offset + i, step, words);
        Philox4x32 ref = Philox4x32::run(seed, offset + i, step);
        for (int w = 0; w < 4; ++w) ASSERT_EQ(words[w], ref.out[w]);
        ASSERT_EQ(std::bit_cast<uint32_t>(kiln_philox_uniform(seed, offset + i, step)),
                  std::bit_cast<uint32_t>(philoxUniform(seed, offset, i, step)));
        float n = kiln_philox_normal(seed, offset + i, step), want = philoxNormal(seed, offset, i, step);
        ASSERT_LE(std::abs(ordinal(DType::f32, n) - ordinal(DType::f32, want)), 2) << n << " vs " << want;
        inexactNormals += n != want;
        ++draws;
      }
  // log and cos are evaluated in f64 and rounded (nearly always the correctly rounded f32), the
  // interpreter uses the host's logf/cosf: a few percent of the draws differ in the last bits.
  EXPECT_LE(inexactNormals, draws / 20) << inexactNormals << " of " << draws << " normal draws differ by an ulp";
  std::printf("%d of %d normal draws differ from support/Philox.h (by at most 2 ulps)\n", inexactNormals, draws);
}

TEST(CudaPrelude, LiteralsRoundLikeStores) {
  EXPECT_EQ(cuda::literal(DType::f32, 0.1), "0.100000001f");
  EXPECT_EQ(cuda::literal(DType::f32, -0.0), "-0.0f");
  EXPECT_EQ(cuda::literal(DType::f16, 65520), "kiln_f32_bits(0x7f800000u)");
  EXPECT_EQ(cuda::literal(DType::bf16, 1.00390625), "1.0f");
  EXPECT_EQ(cuda::literal(DType::f64, -std::numeric_limits<double>::infinity()), "kiln_f64_bits(0xfff0000000000000ull)");
  EXPECT_EQ(cuda::literal(DType::i64, static_cast<double>(std::numeric_limits<int64_t>::min())),
            "(-9223372036854775807LL - 1)");
  EXPECT_EQ(cuda::literal(DType::i32, 3e9), "2147483647LL");
  EXPECT_EQ(cuda::literal(DType::boolean, 0.5), "true");
}

}  // namespace
