// Numerical checks of the layer rules (linear, embedding, layer_norm, dropout, attention) against
// hand-computed values. See DecomposeHelpers.h for the tolerances.
#include "DecomposeHelpers.h"

#include "support/Philox.h"

#include <cmath>

namespace kiln::testing {
namespace {

using ir::OpKind;

// x = [[1,2,3],[4,5,6]], w = [[1,0,-1],[0.5,0.5,0.5]], b = [10,20]:
// x w^T = [[-2,3],[-2,7.5]], plus b = [[8,23],[8,27.5]].
const std::vector<double> kX = {1, 2, 3, 4, 5, 6};
const std::vector<double> kW = {1, 0, -1, 0.5, 0.5, 0.5};

TEST(DecomposeLinear, MatrixWithAndWithoutBias) {
  rt::HostTensor x = f32({2, 3}, kX), w = f32({2, 3}, kW), b = f32({2}, {10, 20});
  expectValues(evalDecomposed(OpKind::Linear, {x, w, b}), {8, 23, 8, 27.5}, kF32Tol);
  expectValues(evalDecomposed(OpKind::Linear, {x, w}), {-2, 3, -2, 7.5}, kF32Tol);
}

TEST(DecomposeLinear, HigherRankAndVectorInputs) {
  rt::HostTensor w = f32({2, 3}, kW), b = f32({2}, {10, 20});
  rt::HostTensor r3 = evalDecomposed(OpKind::Linear, {f32({2, 1, 3}, kX), w, b});
  EXPECT_EQ(r3.shape(), (std::vector<int64_t>{2, 1, 2}));
  expectValues(r3, {8, 23, 8, 27.5}, kF32Tol);
  rt::HostTensor r1 = evalDecomposed(OpKind::Linear, {f32({3}, {4, 5, 6}), w, b});
  EXPECT_EQ(r1.shape(), (std::vector<int64_t>{2}));
  expectValues(r1, {8, 27.5}, kF32Tol);
}

TEST(DecomposeEmbedding, GathersRows) {
  rt::HostTensor weight = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  rt::HostTensor r = evalDecomposed(OpKind::Embedding, {i64({2, 2}, {2, 0, 1, 1}), weight});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 2, 2}));
  expectValues(r, {20, 21, 0, 1, 10, 11, 10, 11}, 0);
}

TEST(DecomposeLayerNorm, NormalizesWithBiasedVariance) {
  // mean 2.5, biased variance 1.25: (x - 2.5) / sqrt(1.25 + 1e-5).
  rt::HostTensor r = evalDecomposed(OpKind::LayerNorm, {f64({4}, {1, 2, 3, 4})});
  expectValues(r, {-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269}, kF64Tol);
}

TEST(DecomposeLayerNorm, WeightBiasAndEps) {
  rt::HostTensor x = f32({4}, {1, 2, 3, 4});
  rt::HostTensor r = evalDecomposed(OpKind::LayerNorm, {x, f32({4}, {1, 2, 1, 1}), f32({4}, {0, 0, 0, 1})});
  expectValues(r, {-1.3416354199689269, -0.894423613312618, 0.447211806656309, 2.341635419968927}, kF32Tol);
  rt::HostTensor noEps = evalDecomposed(OpKind::LayerNorm, {f64({4}, {1, 2, 3, 4})}, {{"eps", 0.0}});
  expectValues(noEps, {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738}, kF64Tol);
}

TEST(DecomposeLayerNorm, RowsAreIndependentAndConstantRowsGiveZero) {
  // normalized_ndim = 2 over [2,2] blocks: the first block is [1,2,3,4], the second is constant.
  rt::HostTensor x = f64({2, 2, 2}, {1, 2, 3, 4, 7, 7, 7, 7});
  rt::HostTensor r = evalDecomposed(OpKind::LayerNorm, {x}, {{"normalized_ndim", int64_t{2}}});
  expectValues(r, {-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269, 0, 0, 0, 0},
               kF64Tol);
}

TEST(DecomposeDropout, DropsByTheCounterBasedMaskAndRescales) {
  const int64_t n = 10000;
  const double p = 0.25;
  std::vector<double> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<double>(i % 7) - 3;
  rt::HostTensor r = evalDecomposed(OpKind::Dropout, {f32({n}, xs)},
                                    {{"p", p}, {"seed", int64_t{42}}, {"offset", int64_t{3}}});
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = philoxUniform(42, 3, i) >= static_cast<float>(p);
    kept += keep;
    // Kept elements are x / (1 - p) (as x * (1/(1-p)) in f32), dropped ones exactly 0.
    EXPECT_NEAR(r.at(i), keep ? xs[i] / (1 - p) : 0.0, kF32Tol * 4) << "element " << i;
  }
  // Binomial(10000, 0.75): standard deviation 0.0043, so 0.02 is more than four of them.
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.02);
}

TEST(DecomposeDropout, ZeroProbabilityIsIdentity) {
  rt::HostTensor r = evalDecomposed(OpKind::Dropout, {f32({3}, {1, -2, 3})}, {{"p", 0.0}, {"seed", int64_t{5}}});
  expectValues(r, {1, -2, 3}, 0);
}

TEST(DecomposeAttention, DefaultScaleIsInverseSqrtOfHeadSize) {
  // q = [1,0], k = I: scores [1, 0] / sqrt(2); weights [0.6698, 0.3302] over v rows [1,2] and [3,4].
  rt::HostTensor q = f64({1, 2}, {1, 0}), k = f64({2, 2}, {1, 0, 0, 1}), v = f64({2, 2}, {1, 2, 3, 4});
  expectValues(evalDecomposed(OpKind::Attention, {q, k, v}), {1.6604769013466862, 2.6604769013466862}, kF64Tol);
  // scale 2: scores [2, 0], weights sigmoid(2) and 1 - sigmoid(2).
  expectValues(evalDecomposed(OpKind::Attention, {q, k, v}, {{"scale", 2.0}}),
               {1.2384058440442354, 2.2384058440442356}, kF64Tol);
}

TEST(DecomposeAttention, CausalQueriesSeeOnlyEarlierKeys) {
  // One batch, L = S = 3, D = 2, scale 1. Query 0 sees key 0 only, so its output is v[0].
  // Query 1: scores [0, 1] → [0.2689, 0.7311]. Query 2: scores [1, 1, 2] → [1, 1, e] / (2 + e).
  rt::HostTensor q = f64({1, 3, 2}, {1, 0, 0, 1, 1, 1});
  rt::HostTensor k = f64({1, 3, 2}, {1, 0, 0, 1, 1, 1});
  rt::HostTensor v = f64({1, 3, 2}, {1, 0, 0, 1, 2, 2});
  rt::HostTensor r = evalDecomposed(OpKind::Attention, {q, k, v}, {{"causal", true}, {"scale", 1.0}});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{1, 3, 2}));
  expectValues(r, {1, 0, 0.2689414213699951, 0.7310585786300049, 1.3641753271487438, 1.3641753271487438}, kF64Tol);
}

}  // namespace
}  // namespace kiln::testing
