// max_pool2d and avg_pool2d: windows, stride, padding, count_include_pad, NaN.
#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;

HostTensor grid4x4() {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  return f32({1, 1, 4, 4}, v);
}

HostTensor pool(OpKind op, const HostTensor& x, Ints kernel, Ints stride, Ints padding = {0, 0},
                std::vector<ir::NamedAttr> extra = {}) {
  extra.push_back({"kernel", std::move(kernel)});
  extra.push_back({"stride", std::move(stride)});
  extra.push_back({"padding", std::move(padding)});
  return evalOp(op, {x}, std::move(extra));
}

TEST(InterpMaxPool2d, NonOverlappingWindows) {
  HostTensor r = pool(OpKind::MaxPool2d, grid4x4(), {2, 2}, {2, 2});
  expectType(r, DType::f32, {1, 1, 2, 2});
  expectValues(r, {5, 7, 13, 15});
}

TEST(InterpMaxPool2d, OverlappingWindowsStrideOne) {
  HostTensor r = pool(OpKind::MaxPool2d, f32({1, 1, 3, 3}, {9, 1, 2, 3, 4, 8, 5, 6, 7}), {2, 2}, {1, 1});
  expectValues(r, {9, 8, 6, 8});
}

TEST(InterpMaxPool2d, PaddingCountsAsMinusInfinity) {
  HostTensor neg = f32({1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9});
  HostTensor r = pool(OpKind::MaxPool2d, neg, {2, 2}, {2, 2}, {1, 1});
  expectType(r, DType::f32, {1, 1, 2, 2});
  expectValues(r, {-1, -2, -4, -5});
}

TEST(InterpMaxPool2d, NaNPropagatesPerWindow) {
  HostTensor x = grid4x4();
  x.set(0, kNaN);
  expectValues(pool(OpKind::MaxPool2d, x, {2, 2}, {2, 2}), {kNaN, 7, 13, 15});
}

TEST(InterpMaxPool2d, ChannelsAndBatchArePooledSeparately) {
  HostTensor x = f32({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor r = pool(OpKind::MaxPool2d, x, {1, 2}, {1, 1});
  expectType(r, DType::f32, {2, 2, 1, 1});
  expectValues(r, {2, 4, 6, 8});
}

TEST(InterpAvgPool2d, NonOverlappingWindows) {
  expectValues(pool(OpKind::AvgPool2d, grid4x4(), {2, 2}, {2, 2}), {2.5, 4.5, 10.5, 12.5});
}

TEST(InterpAvgPool2d, CountIncludePadChangesTheDivisor) {
  HostTensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  // Windows hold {1}, {2,3}, {4,7}, {5,6,8,9}: sums 1, 5, 11, 28.
  HostTensor with = pool(OpKind::AvgPool2d, x, {2, 2}, {2, 2}, {1, 1});
  expectType(with, DType::f32, {1, 1, 2, 2});
  expectValues(with, {0.25, 1.25, 2.75, 7});
  HostTensor without = pool(OpKind::AvgPool2d, x, {2, 2}, {2, 2}, {1, 1}, {{"count_include_pad", false}});
  expectValues(without, {1, 2.5, 5.5, 7});
}

TEST(InterpAvgPool2d, F16ResultRounds) {
  // mean(1, 1, 1, 1 + 2^-9) = 1 + 2^-11: a tie in f16 that rounds to 1.
  HostTensor x = tensor(DType::f16, {1, 1, 2, 2}, {1, 1, 1, 1.001953125});
  expectValues(pool(OpKind::AvgPool2d, x, {2, 2}, {2, 2}), {1});
}

}  // namespace
}  // namespace kiln::interp::testing
