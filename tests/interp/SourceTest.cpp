// Source ops: constant (splat and full), iota, random (determinism, offsets, the step operand,
// statistics).
#include "InterpTestUtil.h"
#include "support/Philox.h"

namespace kiln::interp::testing {
namespace {

using ir::Floats;
using ir::Ints;

TEST(InterpConstant, SplatAndFull) {
  HostTensor s = evalOp(OpKind::Constant, {}, {{"shape", Ints{2, 2}}, {"dtype", DType::f32}, {"value", Floats{3.5}}});
  expectType(s, DType::f32, {2, 2});
  expectValues(s, {3.5, 3.5, 3.5, 3.5});
  HostTensor f =
      evalOp(OpKind::Constant, {}, {{"shape", Ints{3}}, {"dtype", DType::f64}, {"value", Floats{1, -2, 0.1}}});
  expectValues(f, {1, -2, 0.1});
  HostTensor scalar = evalOp(OpKind::Constant, {}, {{"shape", Ints{}}, {"dtype", DType::f32}, {"value", Floats{7}}});
  expectType(scalar, DType::f32, {});
  expectValues(scalar, {7});
}

TEST(InterpConstant, ValuesRoundToTheElementType) {
  HostTensor h =
      evalOp(OpKind::Constant, {}, {{"shape", Ints{2}}, {"dtype", DType::f16}, {"value", Floats{1 + 1.0 / 2048, 0.1}}});
  expectValues(h, {1, 0.0999755859375});
  HostTensor i = evalOp(OpKind::Constant, {}, {{"shape", Ints{2}}, {"dtype", DType::i32}, {"value", Floats{1.9, -3}}});
  EXPECT_EQ(ints(i), (std::vector<int64_t>{1, -3}));
}

TEST(InterpIota, IndexAlongAxis) {
  HostTensor cols = evalOp(OpKind::Iota, {}, {{"shape", Ints{2, 3}}, {"axis", int64_t{1}}});
  expectType(cols, DType::i64, {2, 3});
  EXPECT_EQ(ints(cols), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  HostTensor rows = evalOp(OpKind::Iota, {}, {{"shape", Ints{2, 3}}, {"axis", int64_t{0}}, {"dtype", DType::f32}});
  expectType(rows, DType::f32, {2, 3});
  expectValues(rows, {0, 0, 0, 1, 1, 1});
  HostTensor odd = evalOp(OpKind::Iota, {}, {{"shape", Ints{33}}, {"axis", int64_t{0}}, {"dtype", DType::i32}});
  EXPECT_EQ(ints(odd).back(), 32);
}

HostTensor random(int64_t n, int64_t seed, int64_t offset, std::string dist = "uniform", DType dtype = DType::f32) {
  return evalOp(OpKind::Random, {},
                {{"shape", Ints{n}}, {"seed", seed}, {"offset", offset}, {"dist", dist}, {"dtype", dtype}});
}

TEST(InterpRandom, DeterministicAndMatchesPhilox) {
  HostTensor a = random(7, 42, 0), b = random(7, 42, 0);
  EXPECT_TRUE(a.identical(b));
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(a.at(i), philoxUniform(42, 0, static_cast<uint64_t>(i)));
  HostTensor other = random(7, 43, 0);
  EXPECT_FALSE(a.identical(other));
}

TEST(InterpRandom, StepOperandSelectsTheStepsStream) {
  auto withStep = [](int64_t step, std::string dist) {
    HostTensor s(DType::i64, {});
    s.set(0, static_cast<double>(step));
    return evalOp(OpKind::Random, {s}, {{"shape", Ints{9}}, {"seed", int64_t{5}}, {"offset", int64_t{2}}, {"dist", dist}});
  };
  EXPECT_TRUE(withStep(0, "uniform").identical(random(9, 5, 2)));
  HostTensor u = withStep(3, "uniform"), z = withStep(3, "normal");
  for (int64_t i = 0; i < 9; ++i) {
    auto index = static_cast<uint64_t>(i);
    EXPECT_EQ(u.at(i), philoxUniform(5, 2, index, 3)) << i;
    EXPECT_EQ(z.at(i), philoxNormal(5, 2, index, 3)) << i;
  }
  EXPECT_FALSE(u.identical(withStep(4, "uniform")));
}

TEST(InterpRandom, OffsetShiftsTheStream) {
  HostTensor base = random(33, 5, 0), shifted = random(32, 5, 1);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(shifted.at(i), base.at(i + 1)) << i;
  HostTensor n0 = random(8, 5, 0, "normal"), n3 = random(5, 5, 3, "normal");
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(n3.at(i), n0.at(i + 3)) << i;
}

TEST(InterpRandom, UniformStatistics) {
  HostTensor u = random(10000, 1234, 0);
  double sum = 0;
  for (int64_t i = 0; i < u.numel(); ++i) {
    ASSERT_GE(u.at(i), 0.0);
    ASSERT_LT(u.at(i), 1.0);
    sum += u.at(i);
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(InterpRandom, NormalStatistics) {
  HostTensor z = random(10000, 99, 0, "normal");
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < z.numel(); ++i) {
    sum += z.at(i);
    sq += z.at(i) * z.at(i);
  }
  double mean = sum / 10000;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sq / 10000 - mean * mean, 1.0, 0.1);
}

TEST(InterpRandom, F16ValuesAreTheRoundedF32Draws) {
  HostTensor h = random(7, 3, 2, "uniform", DType::f16);
  for (int64_t i = 0; i < 7; ++i)
    EXPECT_EQ(h.at(i), roundTo(DType::f16, philoxUniform(3, 2, static_cast<uint64_t>(i))));
}

}  // namespace
}  // namespace kiln::interp::testing
