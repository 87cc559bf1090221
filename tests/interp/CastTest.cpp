// cast: rounding to nearest even, saturation, NaN → 0, bool conversions, exact i64 sources.
#include <cstdint>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

HostTensor castTo(const HostTensor& x, DType to) { return evalOp(OpKind::Cast, {x}, {{"dtype", to}}); }

TEST(InterpCast, FloatToIntTruncatesSaturatesAndMapsNaNToZero) {
  HostTensor r = castTo(f32({6}, {1.9, -1.9, 3e9, -3e9, kNaN, kInf}), DType::i32);
  expectType(r, DType::i32, {6});
  EXPECT_EQ(ints(r), (std::vector<int64_t>{1, -1, INT32_MAX, INT32_MIN, 0, INT32_MAX}));
  EXPECT_EQ(ints(castTo(f64({2}, {1e300, -0.5}), DType::i64)), (std::vector<int64_t>{INT64_MAX, 0}));
}

TEST(InterpCast, FloatToF16AndBf16RoundToNearestEven) {
  const double u = 1.0 / 2048;
  // 1 + 2^-11 ties to 1 (even); 1 + 3·2^-11 ties to 1 + 2^-9 (even); 70000 overflows f16.
  expectValues(castTo(f32({4}, {1 + u, 1 + 3 * u, 70000, kNaN}), DType::f16), {1, 1.001953125, kInf, kNaN});
  expectValues(castTo(f32({3}, {1 + 1.0 / 256, 1 + 3.0 / 256, -3.4e38}), DType::bf16), {1, 1 + 4.0 / 256, -kInf});
  // f16 → f32 is exact.
  expectValues(castTo(tensor(DType::f16, {1}, {1.001953125}), DType::f32), {1.001953125});
}

TEST(InterpCast, ToAndFromBool) {
  expectValues(castTo(f32({4}, {0, -0.0, 0.5, kNaN}), DType::boolean), {0, 0, 1, 1});
  expectValues(castTo(i32({2}, {0, -7}), DType::boolean), {0, 1});
  expectValues(castTo(boolean({2}, {1, 0}), DType::f32), {1, 0});
  EXPECT_EQ(ints(castTo(boolean({2}, {1, 0}), DType::i64)), (std::vector<int64_t>{1, 0}));
}

TEST(InterpCast, IntegerNarrowingSaturates) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(ints(castTo(i64({3}, {big, -big, 5}), DType::i32)), (std::vector<int64_t>{INT32_MAX, INT32_MIN, 5}));
  EXPECT_EQ(ints(castTo(i32({2}, {INT32_MIN, 3}), DType::i64)), (std::vector<int64_t>{INT32_MIN, 3}));
}

TEST(InterpCast, I64ToFloatRoundsOnceFromTheExactValue) {
  // 2^60 + 2^36 + 1 lies just above the midpoint between two f32 neighbours (ulp 2^37), so it
  // rounds up; through a double (which drops the +1) it would be a tie and round down to 2^60.
  const int64_t v = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  expectValues(castTo(i64({1}, {v}), DType::f32), {1152921642045800448.0});
  // 2^53 + 1 → f64: a tie between 2^53 and 2^53 + 2, even mantissa → 2^53.
  expectValues(castTo(i64({1}, {(int64_t{1} << 53) + 1}), DType::f64), {9007199254740992.0});
  expectValues(castTo(i32({2}, {-3, 70000}), DType::f16), {-3, kInf});
}

}  // namespace
}  // namespace kiln::interp::testing
