// DSL graphs run through the reference interpreter give hand-computed numbers.
#include "FrontendTestUtil.h"

#include "interp/Interpreter.h"

#include <cmath>

namespace kiln {
namespace {

using rt::HostTensor;

HostTensor f32(std::vector<int64_t> shape, const std::vector<double>& v) {
  return HostTensor::fromDoubles(DType::f32, std::move(shape), v);
}

HostTensor ids(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor t(DType::i64, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

void expectValues(const HostTensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(t.at(static_cast<int64_t>(i)), expected[i], tol) << "element " << i;
}

TEST(FrontendInterp, ArithmeticWithScalars) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {3});
  t.output("y", (x + 1) * x - x / 2);
  t.output("m", where(x > 0, x, 0.0) + sum(x));
  ir::Graph g = t.finish();
  interp::TensorMap out = interp::run(g, {{"x", f32({3}, {1, 2, -2})}});
  expectValues(out.at("y"), {1.5, 5, 3});  // (x+1)x - x/2
  expectValues(out.at("m"), {2, 3, 1});    // relu(x) + 1
}

TEST(FrontendInterp, LinearWithGivenWeights) {
  nn::Linear fc(2, 3);
  Tracer t;
  t.output("y", fc(t.input("x", DType::f32, {2, 2})));
  ir::Graph g = t.finish();
  interp::TensorMap out = interp::run(g, {{"x", f32({2, 2}, {1, 1, 2, -1})}},
                                      {{"weight", f32({3, 2}, {1, 2, 3, 4, 5, 6})}, {"bias", f32({3}, {0.5, -1, 0})}});
  // y = x Wᵀ + b
  expectValues(out.at("y"), {3.5, 6, 11, 0.5, 1, 4});
}

struct ConstNet : nn::Module {
  ConstNet() {
    registerParameter("w", {2, 3}, init::constant(0.5));
    registerParameter("b", {2}, init::ones());
  }
  Tensor forward(const Tensor& x) { return relu(linear(x, param(x.tracer(), "w"), param(x.tracer(), "b"))) * 2 - 1; }
};

TEST(FrontendInterp, ConstantInitializedModule) {
  ConstNet net;
  Tracer t;
  t.output("y", net.forward(t.input("x", DType::f32, {1, 3})));
  interp::TensorMap out = interp::run(t.finish(), {{"x", f32({1, 3}, {1, 2, -7})}});
  // 0.5 * (1 + 2 - 7) + 1 = -1 → relu 0 → -1 for both rows of w.
  expectValues(out.at("y"), {-1, -1});
}

TEST(FrontendInterp, LstmGateOrderIsIfgo) {
  nn::LSTM lstm(1, 1);
  Tracer t;
  nn::LSTMOutput o = lstm(t.input("x", DType::f32, {1, 2, 1}));
  t.output("seq", o.output);
  t.output("c", o.c);
  ir::Graph g = t.finish();
  // All weights zero; only the g gate's input bias is 1: i = f = o = σ(0) = 0.5, g = tanh(1).
  interp::TensorMap params = {{"weight_ih_l0", f32({4, 1}, {0, 0, 0, 0})},
                              {"weight_hh_l0", f32({4, 1}, {0, 0, 0, 0})},
                              {"bias_ih_l0", f32({4}, {0, 0, 1, 0})},
                              {"bias_hh_l0", f32({4}, {0, 0, 0, 0})}};
  interp::TensorMap out = interp::run(g, {{"x", f32({1, 2, 1}, {3, -3})}}, params);
  double c1 = 0.5 * std::tanh(1.0), c2 = 0.5 * c1 + 0.5 * std::tanh(1.0);
  expectValues(out.at("seq"), {0.5 * std::tanh(c1), 0.5 * std::tanh(c2)});
  expectValues(out.at("c"), {c2});
}

bool allFinite(const HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.at(i))) return false;
  return true;
}

HostTensor ramp(DType dt, std::vector<int64_t> shape, int64_t modulo) {
  HostTensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, dt == DType::f32 ? (i % modulo) / double(modulo) : i % modulo);
  return t;
}

TEST(FrontendInterp, TinyAndMnistMlpRun) {
  interp::TensorMap out = interp::run(buildZooModel("tiny_mlp", {.batch = 3}),
                                      {{"x", ramp(DType::f32, {3, 64}, 7)}, {"target", f32({3, 1}, {1, 0, -1})}});
  EXPECT_EQ(out.at("pred").shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(allFinite(out.at("pred")));
  EXPECT_EQ(out.at("loss").numel(), 1);
  EXPECT_GT(out.at("loss").at(0), 0.0);

  out = interp::run(buildZooModel("mnist_mlp", {.batch = 2}),
                    {{"x", ramp(DType::f32, {2, 784}, 11)}, {"labels", ids({2}, {3, 9})}});
  EXPECT_EQ(out.at("logits").shape(), (std::vector<int64_t>{2, 10}));
  EXPECT_TRUE(allFinite(out.at("logits")));
  // Freshly initialized: the logits are small, so the loss is near ln(10) ≈ 2.30.
  EXPECT_GT(out.at("loss").at(0), 1.0);
  EXPECT_LT(out.at("loss").at(0), 4.0);
}

TEST(FrontendInterp, LstmAndCnnRun) {
  interp::TensorMap out = interp::run(buildZooModel("lstm", {.batch = 2, .withLoss = false}),
                                      {{"tokens", ramp(DType::i64, {2, 16}, 64)}});
  EXPECT_EQ(out.at("logits").shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(allFinite(out.at("logits")));
  out = interp::run(buildZooModel("cnn", {.batch = 1, .withLoss = false}), {{"x", ramp(DType::f32, {1, 1, 28, 28}, 5)}});
  EXPECT_EQ(out.at("logits").shape(), (std::vector<int64_t>{1, 10}));
  EXPECT_TRUE(allFinite(out.at("logits")));
}

TEST(FrontendInterp, TransformerIsCausal) {
  ir::Graph g = buildZooModel("transformer", {.batch = 1, .withLoss = false});
  HostTensor a = ramp(DType::i64, {1, 32}, 128), b = a;
  b.set(31, 5);  // change only the last token
  HostTensor la = interp::run(g, {{"tokens", a}}).at("logits");
  HostTensor lb = interp::run(g, {{"tokens", b}}).at("logits");
  ASSERT_EQ(la.shape(), (std::vector<int64_t>{1, 32, 128}));
  EXPECT_TRUE(allFinite(la));
  for (int64_t i = 0; i < 31 * 128; ++i) ASSERT_EQ(la.at(i), lb.at(i)) << "position " << i / 128;
  bool lastDiffers = false;
  for (int64_t i = 31 * 128; i < 32 * 128; ++i) lastDiffers |= la.at(i) != lb.at(i);
  EXPECT_TRUE(lastDiffers);
}

}  // namespace
}  // namespace kiln
