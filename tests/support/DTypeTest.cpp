// Element types: names, sizes, and the f16/bf16 rounding every part of kiln shares.
#include "support/DType.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln;

namespace {
uint16_t bits16(DType t, double v) {
  uint16_t b;
  unsigned char buf[8];
  storeFromDouble(t, buf, v);
  std::memcpy(&b, buf, 2);
  return b;
}
}  // namespace

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) EXPECT_EQ(parseDType(dtypeName(t)), t);
  EXPECT_FALSE(parseDType("float32").has_value());
  EXPECT_EQ(dtypeSize(DType::bf16), 2);
  EXPECT_EQ(dtypeSize(DType::boolean), 1);
}

TEST(DType, EveryHalfAndBFloat16SurvivesARoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
    } else {
      EXPECT_EQ(floatToHalf(f), h) << b;
    }
    float g = bfloat16ToFloat(h);
    if (!std::isnan(g)) {
      EXPECT_EQ(floatToBFloat16(g), h) << b;
    }
  }
}

TEST(DType, HalfRoundsToNearestEvenAndOverflowsToInf) {
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);            // tie → even (1.0)
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);            // tie → even (1 + 2^-9)
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);                      // largest finite
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);                      // rounds up to inf
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);        // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);        // tie → even (zero)
  EXPECT_EQ(floatToBFloat16(1.0f + 1.0f / 256), 0x3f80);         // tie → even
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
}

// Values just above a 16-bit tie: rounding through a plain f32 would land on the tie and round to
// even (down); a single rounding goes up. These came from review of the reference interpreter.
TEST(DType, DoublesRoundOnceToSixteenBitFloats) {
  EXPECT_EQ(bits16(DType::bf16, 1.0039062500000009), 0x3f81);  // 1.0078125
  EXPECT_EQ(bits16(DType::f16, 1.0004882812500002), 0x3c01);   // 1.0009765625
  EXPECT_EQ(bits16(DType::bf16, 1.00390625), 0x3f80);          // an exact tie still goes to even
  EXPECT_EQ(roundTo(DType::bf16, -1.0039062500000009), -1.0078125);
}

TEST(DType, RoundToOddKeepsStickyInformation) {
  EXPECT_EQ(roundToOddF32(1.5), 1.5f);                           // exact: unchanged
  float odd = roundToOddF32(1.0 + std::ldexp(1.0, -30));
  EXPECT_EQ(std::bit_cast<uint32_t>(odd), std::bit_cast<uint32_t>(1.0f) | 1u);
  EXPECT_EQ(roundToOddF32(int64_t{16973823}), std::bit_cast<float>(std::bit_cast<uint32_t>(16973822.0f) | 1u));
  // i32 16973823 → bf16 is 16908288 with one rounding (not 17039360 through f32).
  EXPECT_EQ(floatToBFloat16(roundToOddF32(int64_t{16973823})), floatToBFloat16(16908288.0f));
  // INT64_MAX lies just below 2^63: truncation gives the float below it, made odd.
  EXPECT_EQ(std::bit_cast<uint32_t>(roundToOddF32(std::numeric_limits<int64_t>::max())), 0x5effffffu);
  EXPECT_TRUE(std::isinf(roundToOddF32(1e300)));
  EXPECT_TRUE(std::isnan(roundToOddF32(std::nan(""))));
}

TEST(DType, CastsSaturateAndMapNaNToZero) {
  EXPECT_EQ(roundTo(DType::i32, 3e9), 2147483647.0);
  EXPECT_EQ(roundTo(DType::i32, -3e9), -2147483648.0);
  EXPECT_EQ(roundTo(DType::i32, -2.9), -2.0);
  EXPECT_EQ(roundTo(DType::i64, std::nan("")), 0.0);
  EXPECT_EQ(roundTo(DType::boolean, 0.25), 1.0);
}
