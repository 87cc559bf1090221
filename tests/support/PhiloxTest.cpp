// The counter-based generator: known-answer values from the Philox paper (Random123 kat_vectors),
// and the properties kiln relies on (element i depends only on seed, offset + i and the step).
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
  // The digits of pi, which fill all four counter words (the high two hold a training step).
  r = Philox4x32::run(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull);
  EXPECT_EQ(r.out[0], 0xd16cfe09u);
  EXPECT_EQ(r.out[1], 0x94fdccebu);
  EXPECT_EQ(r.out[2], 0x5001e420u);
  EXPECT_EQ(r.out[3], 0x24126ea1u);
}

TEST(Philox, StepSelectsADisjointStream) {
  // Step 0 is the plain stream; another step is unrelated to it at every offset.
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(kiln::philoxUniform(7, 0, i, 0), kiln::philoxUniform(7, 0, i));
  int equal = 0;
  for (uint64_t i = 0; i < 100; ++i) equal += kiln::philoxUniform(7, 0, i, 1) == kiln::philoxUniform(7, 0, i + 1);
  EXPECT_EQ(equal, 0);
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
