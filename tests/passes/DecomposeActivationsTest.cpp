// Numerical checks of the activation and normalizing-reduction rules against closed-form values
// (computed with Python's math module). See DecomposeHelpers.h for the tolerances.
#include "DecomposeHelpers.h"

#include <limits>

namespace kiln::testing {
namespace {

using ir::OpKind;

TEST(DecomposeSoftmax, MatchesHandComputedValues) {
  rt::HostTensor r = evalDecomposed(OpKind::Softmax, {f32({3}, {1, 2, 3})});
  expectValues(r, {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, kF32Tol);
}

TEST(DecomposeSoftmax, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows even in f64; the max subtraction makes this softmax([0, 1, 2]) shifted.
  rt::HostTensor r = evalDecomposed(OpKind::Softmax, {f32({3}, {1000, 1001, 1002})});
  expectValues(r, {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, kF32Tol);
}

TEST(DecomposeSoftmax, AlongAxisZero) {
  // Columns [1, 3] and [2, 2]: softmax([1, 3]) = [0.11920292, 0.88079708]; equal entries give 0.5.
  rt::HostTensor r = evalDecomposed(OpKind::Softmax, {f64({2, 2}, {1, 2, 3, 2})}, {{"axis", int64_t{0}}});
  expectValues(r, {0.11920292202211755, 0.5, 0.8807970779778823, 0.5}, kF64Tol);
}

TEST(DecomposeLogSoftmax, MatchesHandComputedValues) {
  rt::HostTensor r = evalDecomposed(OpKind::LogSoftmax, {f64({2, 3}, {1, 2, 3, 1001, 1002, 1003})});
  std::vector<double> row = {-2.40760596444438, -1.4076059644443801, -0.4076059644443803};
  std::vector<double> expected = row;
  expected.insert(expected.end(), row.begin(), row.end());
  expectValues(r, expected, kF64Tol);
}

TEST(DecomposeGelu, ErfForm) {
  rt::HostTensor r = evalDecomposed(OpKind::Gelu, {f64({4}, {1, -1, 2.5, 0})});
  expectValues(r, {0.8413447460685429, -0.15865525393145707, 2.4844758366855597, 0}, kF64Tol);
}

TEST(DecomposeGelu, TanhForm) {
  rt::HostTensor r = evalDecomposed(OpKind::Gelu, {f64({4}, {1, -1, 2.5, 0})}, {{"approximate", std::string("tanh")}});
  expectValues(r, {0.8411919906082768, -0.15880800939172324, 2.484915733910001, 0}, kF64Tol);
}

TEST(DecomposeGelu, F32StaysWithinTolerance) {
  rt::HostTensor r = evalDecomposed(OpKind::Gelu, {f32({2}, {1, -1})});
  expectValues(r, {0.8413447460685429, -0.15865525393145707}, kF32Tol);
}

TEST(DecomposeSilu, MatchesHandComputedValues) {
  rt::HostTensor r = evalDecomposed(OpKind::Silu, {f64({3}, {1, -2, 0})});
  expectValues(r, {0.7310585786300049, -0.2384058440442351, 0}, kF64Tol);
}

TEST(DecomposeReduceMean, OverOneAxisAndNegativeAxis) {
  rt::HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(evalDecomposed(OpKind::ReduceMean, {x}, {{"axes", ir::Ints{1}}}), {2, 5}, kF32Tol);
  rt::HostTensor keep = evalDecomposed(OpKind::ReduceMean, {x}, {{"axes", ir::Ints{-2}}, {"keepdim", true}});
  EXPECT_EQ(keep.shape(), (std::vector<int64_t>{1, 3}));
  expectValues(keep, {2.5, 3.5, 4.5}, kF32Tol);
}

TEST(DecomposeReduceMean, EmptyAxesMeansAll) {
  rt::HostTensor r = evalDecomposed(OpKind::ReduceMean, {f64({2, 2}, {1, 2, 3, 4})}, {{"axes", ir::Ints{}}});
  EXPECT_EQ(r.rank(), 0);
  expectValues(r, {2.5}, kF64Tol);
}

TEST(DecomposeReduceMean, NaNPropagates) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  rt::HostTensor r = evalDecomposed(OpKind::ReduceMean, {f32({2, 2}, {1, nan, 3, 4})}, {{"axes", ir::Ints{1}}});
  EXPECT_TRUE(std::isnan(r.at(0)));
  EXPECT_NEAR(r.at(1), 3.5, kF32Tol);
}

}  // namespace
}  // namespace kiln::testing
