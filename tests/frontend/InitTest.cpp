// Initializers: PyTorch's bounds, and seeds that are deterministic and platform independent.
#include "FrontendTestUtil.h"

#include "ir/Printer.h"

#include <cmath>

namespace kiln {
namespace {

using Kind = ir::Initializer::Kind;

void expectUniform(const ir::Initializer& init, double bound) {
  EXPECT_EQ(init.kind, Kind::Uniform);
  EXPECT_NEAR(init.a, -bound, 1e-12);
  EXPECT_NEAR(init.b, bound, 1e-12);
}

TEST(Init, KaimingAndXavierBounds) {
  // PyTorch's default a = sqrt(5): gain sqrt(1/3), bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
  Init k = init::kaimingUniform(100);
  EXPECT_NEAR(k.b, 0.1, 1e-12);
  EXPECT_NEAR(k.a, -0.1, 1e-12);
  // a = 0 (He init for ReLU): bound = sqrt(6 / fan_in).
  EXPECT_NEAR(init::kaimingUniform(24, 0.0).b, 0.5, 1e-12);
  // Glorot: sqrt(6 / (3 + 5)).
  EXPECT_NEAR(init::xavierUniform(3, 5).b, std::sqrt(0.75), 1e-12);
  EXPECT_NEAR(init::xavierUniform(3, 5, 2.0).b, 2 * std::sqrt(0.75), 1e-12);
  EXPECT_NEAR(init::biasUniform(16).b, 0.25, 1e-12);
}

TEST(Init, LayerDefaultsMatchPyTorch) {
  Tracer t("m", 3);
  nn::Sequential s{std::make_shared<nn::Linear>(784, 128), std::make_shared<nn::Conv2d>(2, 32, 3),
                   std::make_shared<nn::Embedding>(10, 4)};
  nn::LSTM lstm(32, 64);
  s[0](t.input("x", DType::f32, {1, 784}));
  s[1](t.input("img", DType::f32, {1, 2, 5, 5}));
  s[2](t.input("ids", DType::i64, {3}));
  t.output("h", lstm(t.input("seq", DType::f32, {1, 2, 32})).h);
  ir::Graph g = t.finish();
  expectUniform(g.findParam("0.weight")->init, 1.0 / 28);  // 1/sqrt(784)
  expectUniform(g.findParam("0.bias")->init, 1.0 / 28);
  expectUniform(g.findParam("1.weight")->init, 1.0 / std::sqrt(18.0));  // fan_in = 2 * 3 * 3
  expectUniform(g.findParam("1.bias")->init, 1.0 / std::sqrt(18.0));
  EXPECT_EQ(g.findParam("2.weight")->init.kind, Kind::Normal);
  EXPECT_EQ(g.findParam("2.weight")->init.a, 0.0);
  EXPECT_EQ(g.findParam("2.weight")->init.b, 1.0);
  for (const char* n : {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"})
    expectUniform(g.findParam(n)->init, 0.125);  // 1/sqrt(hidden = 64)
}

TEST(Init, SeedsArePlatformIndependent) {
  // Reference values computed independently (Python) from the documented FNV-1a + SplitMix64.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(deriveSeed(0, "fc1.weight"), 0x16a53d119d8763bull);
  EXPECT_EQ(deriveSeed(42, "fc1.weight"), 0x11bc07fe8818cec1ull);
}

TEST(Init, ParameterSeedsDeriveFromModelSeedAndName) {
  ir::Graph g = buildZooModel("mnist_mlp", {.batch = 2, .withLoss = false, .seed = 42});
  EXPECT_EQ(g.findParam("fc1.weight")->init.seed, deriveSeed(42, "fc1.weight"));
  EXPECT_EQ(g.findParam("fc2.bias")->init.seed, deriveSeed(42, "fc2.bias"));
  EXPECT_NE(g.findParam("fc1.weight")->init.seed, g.findParam("fc1.bias")->init.seed);
}

TEST(Init, SameSeedSameGraphText) {
  for (const std::string& name : zooModelNames()) {
    std::string a = ir::printGraph(buildZooModel(name, {.batch = 2, .seed = 5}));
    std::string b = ir::printGraph(buildZooModel(name, {.batch = 2, .seed = 5}));
    std::string c = ir::printGraph(buildZooModel(name, {.batch = 2, .seed = 6}));
    EXPECT_EQ(a, b) << name;
    EXPECT_NE(a, c) << name;
  }
}

}  // namespace
}  // namespace kiln
