// matmul (batch broadcasting, transpose flags, integer and f16 accumulation) and conv2d (stride,
// padding, dilation, groups).
#include <cstdint>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;

TEST(InterpMatMul, TwoByThreeTimesThreeByTwo) {
  HostTensor r = evalOp(OpKind::MatMul, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})});
  expectType(r, DType::f32, {2, 2});
  expectValues(r, {58, 64, 139, 154});
}

TEST(InterpMatMul, BatchDimensionsBroadcast) {
  // a: [2, 1, 2, 2] holding I and 2I; b: [3, 2, 2] holding B0, B1, B2 → out[i][j] = a_i · b_j.
  HostTensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  HostTensor b = f32({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, -1, 0, 0, 5});
  HostTensor r = evalOp(OpKind::MatMul, {a, b});
  expectType(r, DType::f32, {2, 3, 2, 2});
  expectValues(r, {1, 2, 3, 4, 0, 1, 1, 0, -1, 0, 0, 5, 2, 4, 6, 8, 0, 2, 2, 0, -2, 0, 0, 10});
}

TEST(InterpMatMul, RankTwoTimesBatch) {
  // [[0,1],[1,0]] swaps the rows of each batch of b.
  HostTensor r = evalOp(OpKind::MatMul, {f32({2, 2}, {0, 1, 1, 0}), f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})});
  expectType(r, DType::f32, {2, 2, 2});
  expectValues(r, {3, 4, 1, 2, 7, 8, 5, 6});
}

TEST(InterpMatMul, TransposeFlagsReadTheOperandsTransposed) {
  // a = [[1,2,3],[4,5,6]] stored transposed as [3,2]; b = [[7,8],[9,10],[11,12]] stored as [2,3].
  HostTensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  const std::vector<double> expected = {58, 64, 139, 154};
  expectValues(evalOp(OpKind::MatMul, {at, b}, {{"transpose_a", true}}), expected);
  expectValues(evalOp(OpKind::MatMul, {a, bt}, {{"transpose_b", true}}), expected);
  HostTensor both = evalOp(OpKind::MatMul, {at, bt}, {{"transpose_a", true}, {"transpose_b", true}});
  expectType(both, DType::f32, {2, 2});
  expectValues(both, expected);
}

TEST(InterpMatMul, TransposeFlagsWithBroadcastBatch) {
  // a: [2, 2, 1] is two column vectors (one per batch), transposed to rows [1, 2]; b: one [2, 3].
  HostTensor r = evalOp(OpKind::MatMul, {f32({2, 2, 1}, {1, 2, 3, 4}), f32({2, 3}, {1, 0, 1, 0, 1, 1})},
                        {{"transpose_a", true}});
  expectType(r, DType::f32, {2, 1, 3});
  expectValues(r, {1, 2, 3, 3, 4, 7});
}

TEST(InterpMatMul, OddSizes) {
  HostTensor a = f32({1, 7}, std::vector<double>(7, 1.0));
  HostTensor b = f32({7, 33}, std::vector<double>(7 * 33, 0.5));
  HostTensor r = evalOp(OpKind::MatMul, {a, b});
  expectType(r, DType::f32, {1, 33});
  expectValues(r, std::vector<double>(33, 3.5));
}

TEST(InterpMatMul, F16AccumulatesWide) {
  const double u = 1.0 / 2048;
  HostTensor r = evalOp(OpKind::MatMul, {tensor(DType::f16, {1, 3}, {1, u, u}), tensor(DType::f16, {3, 1}, {1, 1, 1})});
  expectValues(r, {1.0009765625});
}

TEST(InterpMatMul, IntegersWrapAndStayExact) {
  EXPECT_EQ(ints(evalOp(OpKind::MatMul, {i32({1, 2}, {65536, 1}), i32({2, 1}, {65536, 5})})),
            (std::vector<int64_t>{5}));
  const int64_t big = int64_t{1} << 53;
  EXPECT_EQ(ints(evalOp(OpKind::MatMul, {i64({1, 2}, {big, 1}), i64({2, 1}, {1, 1})})),
            (std::vector<int64_t>{big + 1}));
}

HostTensor conv(const HostTensor& x, const HostTensor& w, std::vector<ir::NamedAttr> attrs = {}) {
  return evalOp(OpKind::Conv2d, {x, w}, std::move(attrs));
}

HostTensor image3x3() { return f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}); }

TEST(InterpConv2d, PlainCrossCorrelation) {
  HostTensor r = conv(image3x3(), f32({1, 1, 2, 2}, {1, 2, 3, 4}));
  expectType(r, DType::f32, {1, 1, 2, 2});
  // out[0][0] = 1·1 + 2·2 + 4·3 + 5·4 = 37, and so on (not flipped: cross-correlation).
  expectValues(r, {37, 47, 67, 77});
}

TEST(InterpConv2d, ZeroPadding) {
  HostTensor r = conv(f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 1, 2, 2}, {1, 1, 1, 1}), {{"padding", Ints{1, 1}}});
  expectType(r, DType::f32, {1, 1, 3, 3});
  expectValues(r, {1, 3, 2, 4, 10, 6, 3, 7, 4});
}

TEST(InterpConv2d, StrideAndAsymmetricPadding) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  HostTensor r = conv(f32({1, 1, 4, 4}, v), f32({1, 1, 1, 1}, {1}), {{"stride", Ints{2, 2}}});
  expectType(r, DType::f32, {1, 1, 2, 2});
  expectValues(r, {0, 2, 8, 10});
  // Padding only in width, stride only in height: rows 0 and 2, columns -1..4.
  HostTensor p = conv(f32({1, 1, 4, 4}, v), f32({1, 1, 1, 1}, {1}), {{"stride", Ints{2, 1}}, {"padding", Ints{0, 1}}});
  expectType(p, DType::f32, {1, 1, 2, 6});
  expectValues(p, {0, 0, 1, 2, 3, 0, 0, 8, 9, 10, 11, 0});
}

TEST(InterpConv2d, Dilation) {
  // A dilated 2x2 kernel of ones covers the four corners of the 3x3 image.
  HostTensor r = conv(image3x3(), f32({1, 1, 2, 2}, {1, 1, 1, 1}), {{"dilation", Ints{2, 2}}});
  expectType(r, DType::f32, {1, 1, 1, 1});
  expectValues(r, {20});
}

TEST(InterpConv2d, GroupsKeepChannelsApart) {
  HostTensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor grouped = conv(x, f32({2, 1, 1, 1}, {2, 3}), {{"groups", int64_t{2}}});
  expectType(grouped, DType::f32, {1, 2, 2, 2});
  expectValues(grouped, {2, 4, 6, 8, 15, 18, 21, 24});
  // With one group both output channels see both input channels.
  HostTensor mixed = conv(x, f32({2, 2, 1, 1}, {1, 1, 1, -1}));
  expectValues(mixed, {6, 8, 10, 12, -4, -4, -4, -4});
}

TEST(InterpConv2d, BatchAndSeveralOutputChannels) {
  // Two images (the second is the first negated), two 1x1 filters (x1 and x10).
  HostTensor x = f32({2, 1, 1, 2}, {1, 2, -1, -2});
  HostTensor r = conv(x, f32({2, 1, 1, 1}, {1, 10}));
  expectType(r, DType::f32, {2, 2, 1, 2});
  expectValues(r, {1, 2, 10, 20, -1, -2, -10, -20});
}

}  // namespace
}  // namespace kiln::interp::testing
