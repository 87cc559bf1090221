// nn modules: PyTorch parameter names, layouts and order; training/eval; forward shapes.
#include "FrontendTestUtil.h"

namespace kiln {
namespace {

using testing::contains;
using testing::errorOf;
using testing::producer;

std::vector<std::pair<std::string, Shape>> graphParams(const ir::Graph& g) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const ir::Param& p : g.params()) out.emplace_back(p.value->name, p.value->type.shape);
  return out;
}

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = registerModule("fc1", std::make_shared<nn::Linear>(6, 4));
  std::shared_ptr<nn::Sequential> body = registerModule(
      "body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
                  std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 3, false)}));
  std::shared_ptr<nn::LayerNorm> norm = registerModule("norm", std::make_shared<nn::LayerNorm>(3));
  Net() { registerParameter("scale", {3}, init::ones()); }
  Tensor forward(const Tensor& x) { return (*norm)((*body)((*fc1)(x))) * param(x.tracer(), "scale"); }
};

TEST(Modules, NamesFollowPyTorchStateDict) {
  Net net;
  std::vector<std::string> names;
  for (const nn::NamedParam& p : net.namedParameters()) names.push_back(p.name);
  // Own parameters first, then children depth first, in registration order (named_parameters()).
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "body.1.weight", "norm.weight",
                                             "norm.bias"}));
  EXPECT_EQ(net.body->fullName(), "body");
  EXPECT_EQ((*net.body)[1].fullName(), "body.1");
  EXPECT_EQ(net.numParameters(), 3 + 24 + 4 + 12 + 3 + 3);
}

TEST(Modules, TracingDeclaresTheWholeTreeInOrder) {
  Net net;
  Tracer t("net");
  Tensor x = t.input("x", DType::f32, {5, 6});
  Tensor y = net.forward(x);
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  t.output("y", y);
  ir::Graph g = t.finish();
  EXPECT_EQ(graphParams(g), (std::vector<std::pair<std::string, Shape>>{{"scale", {3}},
                                                                        {"fc1.weight", {4, 6}},
                                                                        {"fc1.bias", {4}},
                                                                        {"body.1.weight", {3, 4}},
                                                                        {"norm.weight", {3}},
                                                                        {"norm.bias", {3}}}));
  EXPECT_EQ(g.findParam("norm.weight")->init.kind, ir::Initializer::Kind::Ones);
  EXPECT_EQ(g.findParam("norm.bias")->init.kind, ir::Initializer::Kind::Zeros);
}

TEST(Modules, ApplyingALayerTwiceSharesItsParameters) {
  nn::Linear fc(3, 3);
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3});
  Tensor y = fc(fc(x));
  t.output("y", y);
  ir::Graph g = t.finish();
  ASSERT_EQ(g.params().size(), 2u);
  EXPECT_EQ(g.params()[0].value->name, "weight");  // a root layer's names have no prefix
}

TEST(Modules, ConvAndPoolLayers) {
  nn::Sequential s{std::make_shared<nn::Conv2d>(3, 8, 3, 1, 1), std::make_shared<nn::ReLU>(),
                   std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Conv2d>(8, 4, 3, 2, 0, 1, 2, false),
                   std::make_shared<nn::AvgPool2d>(3), std::make_shared<nn::Flatten>()};
  Tracer t;
  Tensor y = s(t.input("x", DType::f32, {2, 3, 16, 16}));
  // 16 → conv(p1) 16 → pool 8 → conv(k3, s2) 3 → avgpool 1; 4 channels.
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(s.findParameter("0.weight")->shape, (Shape{8, 3, 3, 3}));
  EXPECT_EQ(s.findParameter("0.bias")->shape, (Shape{8}));
  EXPECT_EQ(s.findParameter("3.weight")->shape, (Shape{4, 4, 3, 3}));  // groups 2: in/groups = 4
  EXPECT_EQ(s.findParameter("3.bias"), nullptr);
}

TEST(Modules, LstmParametersAndOutputs) {
  nn::LSTM lstm(5, 7);
  std::vector<std::pair<std::string, Shape>> params;
  for (const nn::NamedParam& p : lstm.namedParameters()) params.emplace_back(p.name, p.slot->shape);
  EXPECT_EQ(params, (std::vector<std::pair<std::string, Shape>>{
                        {"weight_ih_l0", {28, 5}}, {"weight_hh_l0", {28, 7}}, {"bias_ih_l0", {28}}, {"bias_hh_l0", {28}}}));
  Tracer t;
  nn::LSTMOutput out = lstm(t.input("x", DType::f32, {3, 4, 5}));
  EXPECT_EQ(out.output.shape(), (Shape{3, 4, 7}));
  EXPECT_EQ(out.h.shape(), (Shape{3, 7}));
  EXPECT_EQ(out.c.shape(), (Shape{3, 7}));
  EXPECT_TRUE(contains(errorOf([&] { lstm(t.input("bad", DType::f32, {3, 4, 6})); }), "expects input [batch, time, 5]"));
}

TEST(Modules, TransformerBlockNames) {
  nn::TransformerBlock block(16, 4);
  std::vector<std::pair<std::string, Shape>> params;
  for (const nn::NamedParam& p : block.namedParameters()) params.emplace_back(p.name, p.slot->shape);
  EXPECT_EQ(params, (std::vector<std::pair<std::string, Shape>>{{"ln1.weight", {16}},
                                                                {"ln1.bias", {16}},
                                                                {"attn.qkv.weight", {48, 16}},
                                                                {"attn.qkv.bias", {48}},
                                                                {"attn.proj.weight", {16, 16}},
                                                                {"attn.proj.bias", {16}},
                                                                {"ln2.weight", {16}},
                                                                {"ln2.bias", {16}},
                                                                {"mlp.fc1.weight", {64, 16}},
                                                                {"mlp.fc1.bias", {64}},
                                                                {"mlp.fc2.weight", {16, 64}},
                                                                {"mlp.fc2.bias", {16}}}));
  Tracer t;
  Tensor y = block(t.input("x", DType::f32, {2, 5, 16}));
  EXPECT_EQ(y.shape(), (Shape{2, 5, 16}));
  EXPECT_EQ(producer(y).op, ir::OpKind::Add);  // the residual
}

int countOps(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

TEST(Modules, DropoutIsIdentityInEvalModeAndDistinctInTraining) {
  nn::Sequential s{std::make_shared<nn::Dropout>(0.25), std::make_shared<nn::Dropout>(0.25)};
  {
    Tracer t;
    Tensor x = t.input("x", DType::f32, {4});
    s.eval();
    EXPECT_FALSE(s[0].isTraining());
    EXPECT_EQ(s(x).value(), x.value());
  }
  s.train();
  Tracer t;
  Tensor y = s(t.input("x", DType::f32, {4}));
  t.output("y", y);
  ir::Graph g = t.finish();
  ASSERT_EQ(countOps(g, ir::OpKind::Dropout), 2);
  const ir::Node& second = *y.value()->producer;
  const ir::Node& first = *second.operands[0]->producer;
  EXPECT_DOUBLE_EQ(first.attrFloat("p"), 0.25);
  EXPECT_NE(first.attrInt("seed"), second.attrInt("seed"));

  // With a fixed seed, successive applications take successive offsets of one stream.
  nn::Dropout d(0.5, 7);
  Tracer t2;
  Tensor x2 = t2.input("x", DType::f32, {3, 2});
  Tensor a = d(x2), b = d(x2);
  EXPECT_EQ(producer(a).attrInt("seed"), 7);
  EXPECT_EQ(producer(a).attrInt("offset"), 0);
  EXPECT_EQ(producer(b).attrInt("offset"), 6);

  // Tracing the same module again (another graph) starts the stream afresh: same masks.
  Tracer t3;
  Tensor x3 = t3.input("x", DType::f32, {3, 2});
  EXPECT_EQ(producer(d(x3)).attrInt("offset"), 0);
}

TEST(Modules, RegistrationMistakes) {
  nn::Linear fc(2, 2);
  EXPECT_TRUE(contains(errorOf([&] { fc.registerParameter("weight", {1}, init::zeros()); }), "already has a member"));
  EXPECT_TRUE(contains(errorOf([&] { fc.registerParameter("a.b", {1}, init::zeros()); }), "invalid member name"));
  Tracer t;
  EXPECT_TRUE(contains(errorOf([&] { fc.param(t, "weights"); }),
                       "Linear has no parameter 'weights' (its own parameters: weight, bias)"));
  auto child = std::make_shared<nn::ReLU>();
  nn::Sequential s1, s2;
  s1.push_back(child);
  EXPECT_TRUE(contains(errorOf([&] { s2.push_back(child); }), "already registered"));
  EXPECT_TRUE(contains(errorOf([&] { s1[5]; }), "out of range"));
  EXPECT_TRUE(contains(errorOf([&] { nn::Linear(0, 3); }), "must be positive"));
  EXPECT_TRUE(contains(errorOf([&] { nn::Conv2d(3, 4, 3, 1, 0, 1, 2); }), "divisible by groups"));
}

}  // namespace
}  // namespace kiln
