// Reductions: axes (empty = all, negative), keepdim, NaN propagation, accumulation precision,
// integer semantics; argmax/argmin ties and NaN.
#include <cstdint>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;

// [[1, 2, 3], [4, 5, 6]]
HostTensor m23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(InterpReduceSum, OverEachAxis) {
  HostTensor rows = evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{1}}});
  expectType(rows, DType::f32, {2});
  expectValues(rows, {6, 15});
  expectValues(evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{0}}}), {5, 7, 9});
  expectValues(evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{-1}}}), {6, 15});
}

TEST(InterpReduceSum, EmptyAxesReducesEverything) {
  HostTensor all = evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{}}});
  expectType(all, DType::f32, {});
  expectValues(all, {21});
  HostTensor kept = evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{}}, {"keepdim", true}});
  expectType(kept, DType::f32, {1, 1});
  expectValues(kept, {21});
}

TEST(InterpReduceSum, Keepdim) {
  HostTensor r = evalOp(OpKind::ReduceSum, {m23()}, {{"axes", Ints{1}}, {"keepdim", true}});
  expectType(r, DType::f32, {2, 1});
  expectValues(r, {6, 15});
}

TEST(InterpReduceSum, TwoOfThreeAxes) {
  // x[i][j][k] = 100 i + 10 j + k over [2, 3, 2]; summing axes 0 and 2 leaves j:
  // sum = (0 + 100) * 2 + 2 * 2 * 10 j + 2 * (0 + 1) = 202 + 40 j.
  std::vector<double> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) v.push_back(100 * i + 10 * j + k);
  expectValues(evalOp(OpKind::ReduceSum, {f32({2, 3, 2}, v)}, {{"axes", Ints{0, 2}}}), {202, 242, 282});
}

TEST(InterpReduceSum, OddSizes) {
  for (int64_t n : {1, 7, 33}) {
    std::vector<double> v(static_cast<size_t>(n), 1.5);
    expectValues(evalOp(OpKind::ReduceSum, {f32({n}, v)}, {{"axes", Ints{0}}}), {1.5 * static_cast<double>(n)});
  }
}

TEST(InterpReduceSum, F16AccumulatesWideAndRoundsOnce) {
  // Summed in f16 step by step, 1 + 2^-11 + 2^-11 would stay 1; accumulated wide it is 1 + 2^-10.
  const double u = 1.0 / 2048;
  expectValues(evalOp(OpKind::ReduceSum, {tensor(DType::f16, {3}, {1, u, u})}, {{"axes", Ints{}}}), {1.0009765625});
}

TEST(InterpReduceSum, IntegersWrapAndStayExact) {
  EXPECT_EQ(ints(evalOp(OpKind::ReduceSum, {i32({2}, {INT32_MAX, 1})}, {{"axes", Ints{}}})),
            (std::vector<int64_t>{INT32_MIN}));
  const int64_t big = int64_t{1} << 53;
  EXPECT_EQ(ints(evalOp(OpKind::ReduceSum, {i64({3}, {big, 1, 2})}, {{"axes", Ints{}}})),
            (std::vector<int64_t>{big + 3}));
}

TEST(InterpReduceSum, NaNPropagates) {
  expectValues(evalOp(OpKind::ReduceSum, {f32({2, 2}, {1, kNaN, 2, 3})}, {{"axes", Ints{1}}}), {kNaN, 5});
}

TEST(InterpReduceMaxMin, ValuesAndNaN) {
  HostTensor x = f32({2, 3}, {1, 5, 3, -1, -7, -2});
  expectValues(evalOp(OpKind::ReduceMax, {x}, {{"axes", Ints{1}}}), {5, -1});
  expectValues(evalOp(OpKind::ReduceMin, {x}, {{"axes", Ints{1}}}), {1, -7});
  expectValues(evalOp(OpKind::ReduceMax, {x}, {{"axes", Ints{0}}}), {1, 5, 3});
  // NaN wins wherever it appears, first or last.
  HostTensor n = f32({2, 3}, {kNaN, 1, 2, 1, 2, kNaN});
  expectValues(evalOp(OpKind::ReduceMax, {n}, {{"axes", Ints{1}}}), {kNaN, kNaN});
  expectValues(evalOp(OpKind::ReduceMin, {n}, {{"axes", Ints{1}}}), {kNaN, kNaN});
  expectValues(evalOp(OpKind::ReduceMin, {n}, {{"axes", Ints{0}}}), {kNaN, 1, kNaN});
}

TEST(InterpReduceMaxMin, IntegersExact) {
  const int64_t big = int64_t{1} << 53;
  EXPECT_EQ(ints(evalOp(OpKind::ReduceMax, {i64({3}, {big, big + 1, -4})}, {{"axes", Ints{}}})),
            (std::vector<int64_t>{big + 1}));
  EXPECT_EQ(ints(evalOp(OpKind::ReduceMin, {i32({3}, {4, INT32_MIN, 0})}, {{"axes", Ints{}}})),
            (std::vector<int64_t>{INT32_MIN}));
  HostTensor keep = evalOp(OpKind::ReduceMax, {i32({2, 2}, {1, 9, 8, 2})}, {{"axes", Ints{0}}, {"keepdim", true}});
  expectType(keep, DType::i32, {1, 2});
  EXPECT_EQ(ints(keep), (std::vector<int64_t>{8, 9}));
}

TEST(InterpArgMax, FirstOnTiesAlongEachAxis) {
  HostTensor x = f32({2, 3}, {1, 3, 3, 7, 0, 7});
  HostTensor r = evalOp(OpKind::ArgMax, {x}, {{"axis", int64_t{1}}});
  expectType(r, DType::i64, {2});
  EXPECT_EQ(ints(r), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ints(evalOp(OpKind::ArgMax, {x}, {{"axis", int64_t{0}}})), (std::vector<int64_t>{1, 0, 1}));
  HostTensor kept = evalOp(OpKind::ArgMax, {x}, {{"axis", int64_t{-1}}, {"keepdim", true}});
  expectType(kept, DType::i64, {2, 1});
  EXPECT_EQ(ints(kept), (std::vector<int64_t>{1, 0}));
}

TEST(InterpArgMax, NaNCountsAsLargestAndTheFirstNaNWins) {
  EXPECT_EQ(ints(evalOp(OpKind::ArgMax, {f32({4}, {1, kNaN, 5, kNaN})}, {{"axis", int64_t{0}}})),
            (std::vector<int64_t>{1}));
  EXPECT_EQ(ints(evalOp(OpKind::ArgMax, {f32({3}, {kInf, 2, kNaN})}, {{"axis", int64_t{0}}})),
            (std::vector<int64_t>{2}));
}

TEST(InterpArgMin, TiesNaNAndIntegers) {
  EXPECT_EQ(ints(evalOp(OpKind::ArgMin, {f32({3}, {4, 1, 1})}, {{"axis", int64_t{0}}})), (std::vector<int64_t>{1}));
  EXPECT_EQ(ints(evalOp(OpKind::ArgMin, {f32({3}, {-kInf, kNaN, 0})}, {{"axis", int64_t{0}}})),
            (std::vector<int64_t>{1}));
  const int64_t big = int64_t{1} << 53;
  EXPECT_EQ(ints(evalOp(OpKind::ArgMin, {i64({3}, {big + 1, big, big})}, {{"axis", int64_t{0}}})),
            (std::vector<int64_t>{1}));
  EXPECT_EQ(ints(evalOp(OpKind::ArgMax, {i32({1, 7}, {0, 6, 2, 6, 1, 0, 5})}, {{"axis", int64_t{1}}})),
            (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace kiln::interp::testing
