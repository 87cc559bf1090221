// Elementwise unary and binary ops: hand-computed values, broadcasting, NaN, f16/bf16 rounding and
// integer wrap-around.
#include <cstdint>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

constexpr int64_t kI32Max = INT32_MAX, kI32Min = INT32_MIN;
constexpr int64_t kI64Max = INT64_MAX, kI64Min = INT64_MIN;
constexpr int64_t k2p53 = int64_t{1} << 53;

// ---- unary -------------------------------------------------------------------------------------

TEST(InterpUnary, NegFloatAndWrappingIntegers) {
  HostTensor r = evalOp(OpKind::Neg, {f32({3}, {-1.5, 0, 2})});
  expectValues(r, {1.5, 0, -2});
  EXPECT_TRUE(std::signbit(r.at(1)));  // -(+0) = -0
  EXPECT_EQ(ints(evalOp(OpKind::Neg, {i32({2}, {kI32Min, 7})})), (std::vector<int64_t>{kI32Min, -7}));
  EXPECT_EQ(ints(evalOp(OpKind::Neg, {i64({2}, {kI64Min, k2p53 + 1})})), (std::vector<int64_t>{kI64Min, -(k2p53 + 1)}));
}

TEST(InterpUnary, Abs) {
  HostTensor r = evalOp(OpKind::Abs, {f32({4}, {-2, -0.0, 3, kNaN})});
  expectValues(r, {2, 0, 3, kNaN});
  EXPECT_FALSE(std::signbit(r.at(1)));
  EXPECT_EQ(ints(evalOp(OpKind::Abs, {i32({3}, {-5, kI32Min, 4})})), (std::vector<int64_t>{5, kI32Min, 4}));
}

TEST(InterpUnary, ExpAndLog) {
  expectNear(evalOp(OpKind::Exp, {f32({4}, {0, 1, 1000, -kInf})}), {1, 2.718281828, kInf, 0}, 1e-6);
  expectNear(evalOp(OpKind::Log, {f32({5}, {1, 2.718281828459045, 0, -1, kInf})}), {0, 1, -kInf, kNaN, kInf}, 1e-6);
}

TEST(InterpUnary, SqrtRsqrtReciprocal) {
  expectNear(evalOp(OpKind::Sqrt, {f32({3}, {4, 2, -1})}), {2, 1.41421356, kNaN}, 1e-6);
  expectValues(evalOp(OpKind::Rsqrt, {f32({3}, {4, 0, 0.25})}), {0.5, kInf, 2});
  expectValues(evalOp(OpKind::Reciprocal, {f32({4}, {2, 0, -0.0, -4})}), {0.5, kInf, -kInf, -0.25});
}

TEST(InterpUnary, TanhSigmoid) {
  expectNear(evalOp(OpKind::Tanh, {f32({3}, {0, 1, -20})}), {0, 0.7615941559557649, -1}, 1e-6);
  // sigmoid(±1000) must not overflow into NaN.
  expectNear(evalOp(OpKind::Sigmoid, {f32({4}, {0, 1000, -1000, 2})}), {0.5, 1, 0, 0.8807970779778823}, 1e-6);
  HostTensor tiny = evalOp(OpKind::Sigmoid, {f64({2}, {-700, -800})});
  EXPECT_NEAR(tiny.at(0), 9.85967654375977e-305, 1e-318);
  EXPECT_EQ(tiny.at(1), 0.0);
}

TEST(InterpUnary, SinCosErf) {
  const double pi = 3.141592653589793;
  expectNear(evalOp(OpKind::Sin, {f64({3}, {0, pi / 2, pi})}), {0, 1, 0}, 1e-12);
  expectNear(evalOp(OpKind::Cos, {f64({3}, {0, pi / 2, pi})}), {1, 0, -1}, 1e-12);
  expectNear(evalOp(OpKind::Erf, {f64({4}, {0, 1, -1, 3})}),
             {0, 0.8427007929497149, -0.8427007929497149, 0.9999779095030014}, 1e-15);
}

TEST(InterpUnary, ReluKeepsNaNAndClearsNegativeZero) {
  HostTensor r = evalOp(OpKind::Relu, {f32({5}, {-1, -0.0, 0.5, kNaN, -kInf})});
  expectValues(r, {0, 0, 0.5, kNaN, 0});
  EXPECT_FALSE(std::signbit(r.at(1)));
  EXPECT_EQ(ints(evalOp(OpKind::Relu, {i32({2}, {-3, 4})})), (std::vector<int64_t>{0, 4}));
}

TEST(InterpUnary, Floor) {
  HostTensor r = evalOp(OpKind::Floor, {f32({5}, {1.5, -1.5, -0.0, 2, -0.25})});
  expectValues(r, {1, -2, 0, 2, -1});
  EXPECT_TRUE(std::signbit(r.at(2)));
}

TEST(InterpUnary, Not) { expectValues(evalOp(OpKind::Not, {boolean({2}, {1, 0})}), {0, 1}); }

TEST(InterpUnary, F16ResultsAreRounded) {
  // exp(1) = 2.71828…; the nearest f16 is 2.71875 (ulp 2^-9 in [2, 4)).
  HostTensor r = evalOp(OpKind::Exp, {tensor(DType::f16, {1}, {1})});
  expectType(r, DType::f16, {1});
  expectValues(r, {2.71875});
  // bf16 has 8 significant bits: exp(1) → 2.71875 as well; sqrt(2) = 1.414… → 1.4140625.
  expectValues(evalOp(OpKind::Sqrt, {tensor(DType::bf16, {1}, {2})}), {1.4140625});
}

TEST(InterpUnary, OddSizes) {
  for (int64_t n : {1, 7, 33}) {
    std::vector<double> x, expected;
    for (int64_t i = 0; i < n; ++i) {
      x.push_back(i - 3.0);
      expected.push_back(i - 3.0 > 0 ? i - 3.0 : 0.0);
    }
    expectValues(evalOp(OpKind::Relu, {f32({n}, x)}), expected);
  }
}

// ---- binary ------------------------------------------------------------------------------------

TEST(InterpBinary, AddBroadcastsColumnWithRow) {
  HostTensor r = evalOp(OpKind::Add, {f32({3, 1}, {1, 2, 3}), f32({4}, {10, 20, 30, 40})});
  expectType(r, DType::f32, {3, 4});
  expectValues(r, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
}

TEST(InterpBinary, ScalarWithTensorBothWays) {
  expectValues(evalOp(OpKind::Add, {f32({}, {5}), f32({2}, {1, 2})}), {6, 7});
  expectValues(evalOp(OpKind::Sub, {f32({2}, {1, 2}), f32({}, {5})}), {-4, -3});
  expectValues(evalOp(OpKind::Sub, {f32({}, {5}), f32({2}, {1, 2})}), {4, 3});
}

TEST(InterpBinary, OddSizes) {
  for (int64_t n : {1, 7, 33}) {
    std::vector<double> a, b, expected;
    for (int64_t i = 0; i < n; ++i) {
      a.push_back(static_cast<double>(i));
      b.push_back(2.0 * static_cast<double>(i));
      expected.push_back(3.0 * static_cast<double>(i));
    }
    expectValues(evalOp(OpKind::Add, {f32({n}, a), f32({n}, b)}), expected);
  }
}

TEST(InterpBinary, F16AndBf16AddRoundToNearestEven) {
  const double u = 1.0 / 2048;  // 2^-11: half an f16 ulp at 1
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even mantissa wins → 1.
  expectValues(evalOp(OpKind::Add, {tensor(DType::f16, {2}, {1, 1}), tensor(DType::f16, {2}, {u, 3 * u})}),
               {1.0, 1.001953125});
  // bf16: 1 + 2^-8 → 1; 256 + 1 → 256 (ulp 2 at 256, tie to even).
  expectValues(evalOp(OpKind::Add, {tensor(DType::bf16, {2}, {1, 256}), tensor(DType::bf16, {2}, {1.0 / 256, 1})}),
               {1.0, 256});
  // f16 overflow goes to infinity.
  expectValues(evalOp(OpKind::Mul, {tensor(DType::f16, {1}, {300}), tensor(DType::f16, {1}, {300})}), {kInf});
}

TEST(InterpBinary, IntegerAddSubMulWrap) {
  EXPECT_EQ(ints(evalOp(OpKind::Add, {i32({2}, {kI32Max, -5}), i32({2}, {1, 3})})),
            (std::vector<int64_t>{kI32Min, -2}));
  EXPECT_EQ(ints(evalOp(OpKind::Add, {i64({2}, {kI64Max, k2p53}), i64({2}, {1, 1})})),
            (std::vector<int64_t>{kI64Min, k2p53 + 1}));
  EXPECT_EQ(ints(evalOp(OpKind::Sub, {i32({2}, {kI32Min, 5}), i32({2}, {1, 7})})), (std::vector<int64_t>{kI32Max, -2}));
  EXPECT_EQ(ints(evalOp(OpKind::Sub, {i64({1}, {kI64Min}), i64({1}, {1})})), (std::vector<int64_t>{kI64Max}));
  EXPECT_EQ(ints(evalOp(OpKind::Mul, {i32({2}, {65536, 46341}), i32({2}, {65536, 46341})})),
            (std::vector<int64_t>{0, -2147479015}));
  EXPECT_EQ(
      ints(evalOp(OpKind::Mul, {i64({2}, {int64_t{1} << 32, 3037000500}), i64({2}, {int64_t{1} << 32, 3037000500})})),
      (std::vector<int64_t>{0, -9223372036709301616}));
}

TEST(InterpBinary, FloatDivisionFollowsIeee) {
  expectValues(evalOp(OpKind::Div, {f32({4}, {1, -1, 0, 7}), f32({4}, {0, 0, 0, 2})}), {kInf, -kInf, kNaN, 3.5});
}

TEST(InterpBinary, IntegerDivisionTruncatesAndDivByZeroIsZero) {
  EXPECT_EQ(ints(evalOp(OpKind::Div, {i32({6}, {7, -7, 7, -7, 5, kI32Min}), i32({6}, {2, 2, -2, -2, 0, -1})})),
            (std::vector<int64_t>{3, -3, -3, 3, 0, kI32Min}));
  EXPECT_EQ(ints(evalOp(OpKind::Div, {i64({3}, {kI64Min, k2p53 + 1, -9}), i64({3}, {-1, 1, 0})})),
            (std::vector<int64_t>{kI64Min, k2p53 + 1, 0}));
}

TEST(InterpBinary, Pow) {
  expectNear(evalOp(OpKind::Pow, {f64({6}, {2, 2, -8, -8, 0, kNaN}), f64({6}, {3, 0.5, 1.0 / 3, 2, 0, 0})}),
             {8, 1.4142135623730951, kNaN, 64, 1, 1}, 1e-15);
}

TEST(InterpBinary, MaxMinPropagateNaN) {
  expectValues(evalOp(OpKind::Max, {f32({4}, {1, kNaN, 3, -kInf}), f32({4}, {2, 1, kNaN, -5})}), {2, kNaN, kNaN, -5});
  expectValues(evalOp(OpKind::Min, {f32({4}, {1, kNaN, 3, kInf}), f32({4}, {2, 1, kNaN, 5})}), {1, kNaN, kNaN, 5});
  EXPECT_EQ(ints(evalOp(OpKind::Max, {i64({2}, {k2p53 + 1, -3}), i64({2}, {k2p53, -4})})),
            (std::vector<int64_t>{k2p53 + 1, -3}));
  EXPECT_EQ(ints(evalOp(OpKind::Min, {i32({2}, {kI32Min, 9}), i32({2}, {0, 8})})), (std::vector<int64_t>{kI32Min, 8}));
}

TEST(InterpBinary, AndOrBroadcast) {
  HostTensor a = boolean({2, 1}, {0, 1}), b = boolean({2}, {0, 1});
  expectValues(evalOp(OpKind::And, {a, b}), {0, 0, 0, 1});
  expectValues(evalOp(OpKind::Or, {a, b}), {0, 1, 1, 1});
}

TEST(InterpBinary, ComparisonsWithNaN) {
  HostTensor a = f32({4}, {1, 2, kNaN, 3}), b = f32({4}, {1, 3, kNaN, 2});
  HostTensor eq = evalOp(OpKind::Eq, {a, b});
  expectType(eq, DType::boolean, {4});
  expectValues(eq, {1, 0, 0, 0});
  expectValues(evalOp(OpKind::Ne, {a, b}), {0, 1, 1, 1});
  expectValues(evalOp(OpKind::Lt, {a, b}), {0, 1, 0, 0});
  expectValues(evalOp(OpKind::Le, {a, b}), {1, 1, 0, 0});
  expectValues(evalOp(OpKind::Gt, {a, b}), {0, 0, 0, 1});
  expectValues(evalOp(OpKind::Ge, {a, b}), {1, 0, 0, 1});
}

TEST(InterpBinary, IntegerAndBoolComparisonsAreExact) {
  // 2^53 and 2^53 + 1 are one double apart only in int64 arithmetic.
  HostTensor a = i64({2}, {k2p53, -1}), b = i64({2}, {k2p53 + 1, -1});
  expectValues(evalOp(OpKind::Eq, {a, b}), {0, 1});
  expectValues(evalOp(OpKind::Lt, {a, b}), {1, 0});
  expectValues(evalOp(OpKind::Ge, {a, b}), {0, 1});
  expectValues(evalOp(OpKind::Eq, {boolean({2}, {1, 0}), boolean({2}, {1, 1})}), {1, 0});
}

TEST(InterpSelect, BroadcastsAllThree) {
  HostTensor cond = boolean({3, 1}, {1, 0, 1});
  HostTensor r = evalOp(OpKind::Select, {cond, f32({2}, {1, 2}), f32({}, {-1})});
  expectType(r, DType::f32, {3, 2});
  expectValues(r, {1, 2, -1, -1, 1, 2});
}

TEST(InterpSelect, CopiesI64Exactly) {
  HostTensor r =
      evalOp(OpKind::Select, {boolean({2}, {0, 1}), i64({2}, {k2p53 + 1, k2p53 + 3}), i64({2}, {kI64Min, 0})});
  EXPECT_EQ(ints(r), (std::vector<int64_t>{kI64Min, k2p53 + 3}));
}

}  // namespace
}  // namespace kiln::interp::testing
