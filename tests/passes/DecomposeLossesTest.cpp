// Numerical checks of the loss rules against closed-form values. See DecomposeHelpers.h for the
// tolerances.
#include "DecomposeHelpers.h"

#include <limits>

namespace kiln::testing {
namespace {

using ir::OpKind;

const std::vector<ir::NamedAttr> kNone = {{"reduction", std::string("none")}};
const std::vector<ir::NamedAttr> kSum = {{"reduction", std::string("sum")}};

TEST(DecomposeCrossEntropy, PicksTheLabelOfEachRow) {
  // Both rows are logits [1, 2, 3]; -log_softmax = [2.4076, 1.4076, 0.4076]; labels pick 2 and 0.
  rt::HostTensor logits = f32({2, 3}, {1, 2, 3, 1, 2, 3});
  rt::HostTensor labels = i64({2}, {2, 0});
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}, kNone), {0.4076059644443803, 2.40760596444438},
               kF32Tol);
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}), {1.4076059644443802}, kF32Tol);
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}, kSum), {2.8152119288887604}, kF32Tol);
}

TEST(DecomposeCrossEntropy, ConfidentAndUniformRows) {
  // Row 0 is uniform over two classes: log 2. Row 1 is confident and right: log(1 + e^-20).
  rt::HostTensor logits = f64({2, 2}, {0, 0, 10, -10});
  rt::HostTensor labels = rt::HostTensor::fromDoubles(DType::i32, {2}, {1, 0});
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}, kNone),
               {0.6931471805599453, 2.0611536900435727e-09}, kF64Tol);
}

TEST(DecomposeCrossEntropy, MaskedClassesAndOutOfRangeLabels) {
  // Row 0 masks class 1 with -inf: softmax over {1, 2} gives -log(e/(e+e^2)) = log(1+e) for label 0.
  // Row 1's label 7 is outside [0, 3): it contributes 0 (documented at the op).
  const double inf = std::numeric_limits<double>::infinity();
  rt::HostTensor logits = f32({2, 3}, {1, -inf, 2, 0, 0, 0});
  rt::HostTensor labels = i64({2}, {0, 7});
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}, kNone), {1.3132616875182228, 0}, kF32Tol);
}

TEST(DecomposeCrossEntropy, LabelSmoothingFollowsPyTorch) {
  // Logits [1, 2, 3], label 2, e = 0.1: -(0.9 * lp[2] + 0.1/3 * (lp[0] + lp[1] + lp[2])) with
  // lp = [-2.4076, -1.4076, -0.4076]: 0.9 * 0.40761 + 0.1/3 * 4.22282 = 0.50761 (torch gives 0.5076).
  rt::HostTensor logits = f32({1, 3}, {1, 2, 3});
  rt::HostTensor labels = i64({1}, {2});
  expectValues(evalDecomposed(OpKind::CrossEntropy, {logits, labels}, {{"label_smoothing", 0.1}}),
               {0.9 * 0.4076059644443803 + 0.1 / 3 * (2.40760596444438 + 1.4076059644443802 + 0.4076059644443803)},
               kF32Tol);
}

TEST(DecomposeMse, Reductions) {
  rt::HostTensor a = f32({3}, {1, 2, 3}), b = f32({3}, {1, 0, 0});
  expectValues(evalDecomposed(OpKind::Mse, {a, b}, kNone), {0, 4, 9}, kF32Tol);
  expectValues(evalDecomposed(OpKind::Mse, {a, b}), {13.0 / 3.0}, kF32Tol);
  expectValues(evalDecomposed(OpKind::Mse, {a, b}, kSum), {13}, kF32Tol);
}

TEST(DecomposeBceWithLogits, LargeLogitsStayFinite) {
  // Saturated logits: right answers cost ~0 (e^-50), wrong ones cost |x|; x = 0 costs log 2.
  rt::HostTensor x = f32({5}, {50, -50, 50, -50, 0});
  rt::HostTensor y = f32({5}, {1, 0, 0, 1, 1});
  rt::HostTensor r = evalDecomposed(OpKind::BceWithLogits, {x, y}, kNone);
  for (double v : r.toDoubles()) EXPECT_TRUE(std::isfinite(v));
  expectValues(r, {0, 0, 50, 50, 0.6931471805599453}, kF32Tol);
}

TEST(DecomposeBceWithLogits, SoftTargetsAndMean) {
  // x = 2, y = 0.25: 2 - 0.5 + log(1 + e^-2); x = -2, y = 1: 0 + 2 + log(1 + e^-2).
  rt::HostTensor x = f64({2}, {2, -2}), y = f64({2}, {0.25, 1});
  expectValues(evalDecomposed(OpKind::BceWithLogits, {x, y}, kNone), {1.6269280110429727, 2.1269280110429727},
               kF64Tol);
  expectValues(evalDecomposed(OpKind::BceWithLogits, {x, y}), {1.8769280110429727}, kF64Tol);
}

}  // namespace
}  // namespace kiln::testing
