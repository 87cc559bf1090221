// Tests of the checker itself: it must catch a wrong gradient, report build errors under the
// case's label, and draw the tie-free values it promises.
#include "GradCheck.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::gradcheck {
namespace {

using ir::OpKind;

// y = x * stop_gradient(x): autodiff rightly gives x, the finite difference sees 2x. The checker
// must report that mismatch (a stand-in for a wrong gradient rule).
void checkKnownWrongGradient() {
  checkGradients("x * sg(x)", {arg(f64({3}, {0.5, -1, 2}))}, [](ir::Graph& g, std::span<ir::Value* const> in) {
    return node(g, OpKind::Mul, {in[0], node(g, OpKind::StopGradient, {in[0]})});
  });
}

TEST(GradCheckChecker, ReportsAWrongGradientWithLabelAndElement) {
  EXPECT_NONFATAL_FAILURE(checkKnownWrongGradient(), "x * sg(x): d loss / d x0 (f64[3]): 3 of 3 elements differ");
}

void checkBadShapes() {
  checkOp("[2] with [3]", OpKind::Add, {arg(f64({2}, {1, 2})), arg(f64({3}, {1, 2, 3}))});
}

TEST(GradCheckChecker, ReportsBuildErrorsUnderTheLabel) {
  EXPECT_NONFATAL_FAILURE(checkBadShapes(), "add [2] with [3] (x0: f64[2], x1: f64[3])");
}

TEST(GradCheckChecker, DistinctValuesAreFarApart) {
  Rng rng(7);
  std::vector<HostTensor> t = rng.distinct({{3, 4}, {5}, {}}, -2, 2);
  std::vector<double> all;
  for (const HostTensor& x : t) {
    std::vector<double> v = x.toDoubles();
    all.insert(all.end(), v.begin(), v.end());
  }
  ASSERT_EQ(all.size(), 18u);
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_GE(all[i] - all[i - 1], 4.0 / 18 / 2) << "values " << i - 1 << ", " << i;
  EXPECT_GE(all.front(), -2);
  EXPECT_LT(all.back(), 2);
}

TEST(GradCheckChecker, AwayFromZeroKeepsItsMagnitude) {
  Rng rng(8);
  HostTensor t = rng.awayFromZero({50}, 0.2, 1.5);
  bool negative = false, positive = false;
  for (double v : t.toDoubles()) {
    EXPECT_GE(std::abs(v), 0.2);
    EXPECT_LE(std::abs(v), 1.5);
    (v < 0 ? negative : positive) = true;
  }
  EXPECT_TRUE(negative && positive);
}

}  // namespace
}  // namespace kiln::gradcheck
