// The counter-based generator: known-answer values from the Philox paper (Random123 kat_vectors),
// and the properties kiln relies on (element i depends only on seed and offset + i).
#include "support/Philox.h"

#include <gtest/gtest.h>

using kiln::Philox4x32;

TEST(Philox, MatchesRandom123KnownAnswers) {
  // philox4x32-10, counter 0, key 0.
  Philox4x32 r = Philox4x32::run(0, 0);
  EXPECT_EQ(r.out[0], 0x6627e8d5u);
  EXPECT_EQ(r.out[1], 0xe169c58du);
  EXPECT_EQ(r.out[2], 0xbc57ac4cu);
  EXPECT_EQ(r.out[3], 0x9b00dbd8u);
}

TEST(Philox, OffsetShiftsTheStream) {
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_EQ(kiln::philoxUniform(7, 5, i), kiln::philoxUniform(7, 0, i + 5));
  EXPECT_NE(kiln::philoxUniform(7, 0, 0), kiln::philoxUniform(8, 0, 0));
}

TEST(Philox, UniformIsInUnitIntervalAndNormalIsFinite) {
  double sum = 0, sumSq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    float u = kiln::philoxUniform(1, 0, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    float z = kiln::philoxNormal(1, 0, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sumSq += double(z) * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sumSq / n, 1.0, 0.04);
}
