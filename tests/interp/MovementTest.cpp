// Movement ops: reshape, permute, broadcast, slice, concat, pad, gather, one_hot.
#include <cstdint>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;

HostTensor iotaF32(std::vector<int64_t> shape) {
  std::vector<double> v(static_cast<size_t>(ir::numElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return f32(std::move(shape), v);
}

TEST(InterpReshape, KeepsRowMajorOrder) {
  HostTensor r = evalOp(OpKind::Reshape, {iotaF32({2, 3})}, {{"shape", Ints{3, 1, 2}}});
  expectType(r, DType::f32, {3, 1, 2});
  expectValues(r, {0, 1, 2, 3, 4, 5});
  HostTensor s = evalOp(OpKind::Reshape, {f32({1}, {7})}, {{"shape", Ints{}}});
  expectType(s, DType::f32, {});
  expectValues(s, {7});
}

TEST(InterpPermute, TransposeAndThreeDims) {
  // [[0,1,2],[3,4,5]]^T
  HostTensor t = evalOp(OpKind::Permute, {iotaF32({2, 3})}, {{"perm", Ints{1, 0}}});
  expectType(t, DType::f32, {3, 2});
  expectValues(t, {0, 3, 1, 4, 2, 5});
  // out[a][b][c] = x[b][c][a] for x of shape [2, 2, 3] holding its own linear index 6b + 3c + a.
  HostTensor p = evalOp(OpKind::Permute, {iotaF32({2, 2, 3})}, {{"perm", Ints{2, 0, 1}}});
  expectType(p, DType::f32, {3, 2, 2});
  expectValues(p, {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11});
}

TEST(InterpPermute, CopiesI64Exactly) {
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(ints(evalOp(OpKind::Permute, {i64({1, 2}, {big, -big})}, {{"perm", Ints{1, 0}}})),
            (std::vector<int64_t>{big, -big}));
}

TEST(InterpBroadcast, RowColumnAndScalar) {
  expectValues(evalOp(OpKind::Broadcast, {f32({3}, {1, 2, 3})}, {{"shape", Ints{2, 3}}}), {1, 2, 3, 1, 2, 3});
  expectValues(evalOp(OpKind::Broadcast, {f32({2, 1}, {1, 2})}, {{"shape", Ints{2, 3}}}), {1, 1, 1, 2, 2, 2});
  HostTensor s = evalOp(OpKind::Broadcast, {f32({}, {4})}, {{"shape", Ints{2, 1, 2}}});
  expectType(s, DType::f32, {2, 1, 2});
  expectValues(s, {4, 4, 4, 4});
}

TEST(InterpSlice, StepsAndRanges) {
  HostTensor r = evalOp(OpKind::Slice, {iotaF32({7})}, {{"starts", Ints{1}}, {"ends", Ints{7}}, {"steps", Ints{2}}});
  expectType(r, DType::f32, {3});
  expectValues(r, {1, 3, 5});
  // Rows 1..2 and every other column of a [3, 4] matrix of linear indices.
  HostTensor m =
      evalOp(OpKind::Slice, {iotaF32({3, 4})}, {{"starts", Ints{1, 0}}, {"ends", Ints{3, 4}}, {"steps", Ints{1, 2}}});
  expectType(m, DType::f32, {2, 2});
  expectValues(m, {4, 6, 8, 10});
  HostTensor empty =
      evalOp(OpKind::Slice, {iotaF32({4})}, {{"starts", Ints{2}}, {"ends", Ints{2}}, {"steps", Ints{1}}});
  expectType(empty, DType::f32, {0});
}

TEST(InterpConcat, AlongEachAxis) {
  HostTensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({1, 2}, {5, 6}), c = f32({2, 1}, {7, 8});
  HostTensor rows = evalOp(OpKind::Concat, {a, b, a}, {{"axis", int64_t{0}}});
  expectType(rows, DType::f32, {5, 2});
  expectValues(rows, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4});
  HostTensor cols = evalOp(OpKind::Concat, {a, c}, {{"axis", int64_t{-1}}});
  expectType(cols, DType::f32, {2, 3});
  expectValues(cols, {1, 2, 7, 3, 4, 8});
  expectValues(evalOp(OpKind::Concat, {a}, {{"axis", int64_t{1}}}), {1, 2, 3, 4});
}

TEST(InterpPad, LowHighAndFillValue) {
  HostTensor r =
      evalOp(OpKind::Pad, {f32({2, 2}, {1, 2, 3, 4})}, {{"low", Ints{1, 0}}, {"high", Ints{0, 1}}, {"value", 9.0}});
  expectType(r, DType::f32, {3, 3});
  expectValues(r, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  // The default fill is zero; an integer tensor pads with the value converted.
  EXPECT_EQ(ints(evalOp(OpKind::Pad, {i32({1}, {5})}, {{"low", Ints{2}}, {"high", Ints{1}}})),
            (std::vector<int64_t>{0, 0, 5, 0}));
}

TEST(InterpGather, RowsAlongAxis0) {
  HostTensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  HostTensor r = evalOp(OpKind::Gather, {data, i64({4}, {2, 0, 2, 1})}, {{"axis", int64_t{0}}});
  expectType(r, DType::f32, {4, 2});
  expectValues(r, {5, 6, 1, 2, 5, 6, 3, 4});
}

TEST(InterpGather, TwoDimensionalIndicesAlongAxis1) {
  // data [2, 3], indices [2, 2] i32 → out [2, 2, 2]: out[r][i][j] = data[r][idx[i][j]].
  HostTensor data = f32({2, 3}, {10, 11, 12, 20, 21, 22});
  HostTensor r = evalOp(OpKind::Gather, {data, i32({2, 2}, {2, 1, 0, 0})}, {{"axis", int64_t{1}}});
  expectType(r, DType::f32, {2, 2, 2});
  expectValues(r, {12, 11, 10, 10, 22, 21, 20, 20});
}

TEST(InterpOneHot, OutOfRangeGivesZeroRow) {
  HostTensor r = evalOp(OpKind::OneHot, {i64({4}, {0, 2, 5, -1})}, {{"num_classes", int64_t{3}}});
  expectType(r, DType::f32, {4, 3});
  expectValues(r, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  HostTensor typed =
      evalOp(OpKind::OneHot, {i32({2, 1}, {1, 0})}, {{"num_classes", int64_t{2}}, {"dtype", DType::i32}});
  expectType(typed, DType::i32, {2, 1, 2});
  EXPECT_EQ(ints(typed), (std::vector<int64_t>{0, 1, 1, 0}));
}

}  // namespace
}  // namespace kiln::interp::testing
