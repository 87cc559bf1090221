// print → parse → print is the identity, for every op and for the awkward corners of the syntax.
#include "OpExamples.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>

namespace kiln::ir {
namespace {

using testing::opExamples;
using testing::T;

Graph graphFor(const testing::OpExample& ex) {
  Graph g("ex_" + ex.op);
  std::vector<Value*> operands;
  for (size_t i = 0; i < ex.operands.size(); ++i)
    operands.push_back(g.addInput(fmt::format("a{}", i), ex.operands[i]));
  std::optional<OpKind> op = opFromName(ex.op);
  EXPECT_TRUE(op.has_value()) << ex.op;
  Value* r = g.addNode(*op, operands, ex.attrs, SourceLoc{"models/ex.cpp", 12, 5});
  g.addOutput("out", r);
  return g;
}

void expectSameAttr(const AttrValue& a, const AttrValue& b) {
  ASSERT_EQ(a.index(), b.index());
  if (auto* d = std::get_if<double>(&a)) {
    EXPECT_EQ(std::bit_cast<uint64_t>(*d), std::bit_cast<uint64_t>(std::get<double>(b)));
  } else if (auto* fs = std::get_if<Floats>(&a)) {
    const Floats& gs = std::get<Floats>(b);
    ASSERT_EQ(fs->size(), gs.size());
    for (size_t i = 0; i < fs->size(); ++i)
      if (std::isnan((*fs)[i]))
        EXPECT_TRUE(std::isnan(gs[i]));
      else
        EXPECT_EQ(std::bit_cast<uint64_t>((*fs)[i]), std::bit_cast<uint64_t>(gs[i])) << (*fs)[i];
  } else {
    EXPECT_TRUE(a == b);
  }
}

TEST(RoundTrip, ExamplesCoverEveryOp) {
  std::set<std::string> covered;
  for (const auto& ex : opExamples()) covered.insert(ex.op);
  for (const OpInfo& info : allOps())
    EXPECT_TRUE(covered.count(std::string(info.name))) << "tests/ir/OpExamples.h has no example for op '"
                                                       << info.name << "'";
  EXPECT_EQ(covered.size(), allOps().size());
}

TEST(RoundTrip, EveryOp) {
  for (const auto& ex : opExamples()) {
    SCOPED_TRACE(ex.op);
    Graph g = graphFor(ex);
    EXPECT_TRUE(verifyGraph(g).empty());
    std::string text = printGraph(g);
    Graph parsed = parseGraph(text, "rt.kir");
    EXPECT_EQ(printGraph(parsed), text);
    ASSERT_EQ(parsed.nodes().size(), 1u);
    const Node& a = *g.nodes()[0];
    const Node& b = *parsed.nodes()[0];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.result->type, b.result->type);
    EXPECT_EQ(a.loc, b.loc);
    ASSERT_EQ(a.attrs.size(), b.attrs.size());
    for (size_t i = 0; i < a.attrs.size(); ++i) expectSameAttr(a.attrs[i], b.attrs[i]);
    // Every non-default attribute of the example is spelled out in the text.
    for (const NamedAttr& attr : ex.attrs) EXPECT_NE(text.find(attr.name + "="), std::string::npos) << text;
  }
}

TEST(RoundTrip, PrintsTheDocumentedForm) {
  Graph g("mlp");
  Value* x = g.addInput("x", T(DType::f32, {32, 784}), SourceLoc{"models/mlp.cpp", 10, 3});
  Value* w = g.addParam("fc1.weight", T(DType::f32, {128, 784}),
                        Initializer{Initializer::Kind::Uniform, -0.0357, 0.0357, 1}, SourceLoc{"models/mlp.cpp", 12, 5});
  Value* bias = g.addParam("fc1.bias", T(DType::f32, {128}), Initializer{});
  Value* h = g.addNode(OpKind::Linear, {x, w, bias}, {}, SourceLoc{"models/mlp.cpp", 20, 5});
  NamedAttr axes[] = {{"axes", Ints{1}}, {"keepdim", true}};
  Value* s = g.addNode(OpKind::ReduceSum, {h}, axes);
  Value* r = g.addNode(OpKind::Relu, {s}, {}, {}, "h.out");
  g.addOutput("logits", s);
  g.addOutput("loss", r);
  EXPECT_EQ(printGraph(g),
            "graph @mlp {\n"
            "  input %x : f32[32,784] loc(\"models/mlp.cpp\":10:3)\n"
            "  param %fc1.weight : f32[128,784] = uniform(low=-0.0357, high=0.0357, seed=1) "
            "loc(\"models/mlp.cpp\":12:5)\n"
            "  param %fc1.bias : f32[128] = zeros\n"
            "  %0 = linear(%x, %fc1.weight, %fc1.bias) : f32[32,128] loc(\"models/mlp.cpp\":20:5)\n"
            "  %1 = reduce_sum(%0) {axes=[1], keepdim=true} : f32[32,1]\n"
            "  %h.out = relu(%1) : f32[32,1]\n"
            "  output %logits = %1\n"
            "  output %loss = %h.out\n"
            "}\n");
  EXPECT_EQ(printGraph(g, PrintOptions{.locations = false}).find("loc("), std::string::npos);
}

TEST(RoundTrip, UnnamedResultsSkipNumbersUsedAsNames) {
  Graph g("g");
  Value* x = g.addInput("0", T(DType::f32, {2}));
  Value* a = g.addNode(OpKind::Neg, {x}, {});
  Value* b = g.addNode(OpKind::Neg, {a}, {}, {}, "2");
  Value* c = g.addNode(OpKind::Neg, {b}, {});
  g.addOutput("y", c);
  std::string text = printGraph(g);
  EXPECT_NE(text.find("  %1 = neg(%0)"), std::string::npos) << text;
  EXPECT_NE(text.find("  %2 = neg(%1)"), std::string::npos) << text;
  EXPECT_NE(text.find("  %3 = neg(%2)"), std::string::npos) << text;
  Graph parsed = parseGraph(text);
  EXPECT_EQ(parsed.nodes()[1]->result->name, "");  // numeric node names are the printer's numbering
  EXPECT_EQ(printGraph(parsed), text);
}

TEST(RoundTrip, FloatsKeepEveryBit) {
  const double inf = std::numeric_limits<double>::infinity();
  Floats values = {0.1 + 0.2, 1.0 / 3.0, -0.0, inf, -inf, std::nan(""), 5e-324, 1.7976931348623157e308, 1e-05, 1e22,
                   -123456789.125, 4.9406564584124654e-324, 2.2250738585072014e-308};
  Graph g("floats");
  NamedAttr attrs[] = {{"shape", Ints{static_cast<int64_t>(values.size())}}, {"dtype", DType::f64}, {"value", values}};
  g.addOutput("c", g.addNode(OpKind::Constant, {}, attrs));
  std::string text = printGraph(g);
  EXPECT_NE(text.find("0.30000000000000004"), std::string::npos) << text;
  EXPECT_NE(text.find(",-0,inf,-inf,nan,5e-324,"), std::string::npos) << text;
  Graph parsed = parseGraph(text);
  expectSameAttr(g.nodes()[0]->attrs[2], parsed.nodes()[0]->attrs[2]);
  EXPECT_EQ(printGraph(parsed), text);
}

TEST(RoundTrip, NegativeZeroIsNotTheDefault) {
  Graph g("pad");
  Value* x = g.addInput("x", T(DType::f32, {2}));
  NamedAttr attrs[] = {{"low", Ints{1}}, {"high", Ints{0}}, {"value", -0.0}};
  g.addOutput("y", g.addNode(OpKind::Pad, {x}, attrs));
  std::string text = printGraph(g);
  EXPECT_NE(text.find("{low=[1], high=[0], value=-0}"), std::string::npos) << text;
  EXPECT_TRUE(std::signbit(parseGraph(text).nodes()[0]->attrFloat("value")));
}

TEST(RoundTrip, LocationsWithEscapes) {
  Graph g("locs");
  std::string file = "dir with space/a\"b\\c\n\t\x01\xc3\xa9.cpp";
  Value* x = g.addInput("x", T(DType::f32, {}), SourceLoc{file, 3, 0});
  g.addOutput("y", g.addNode(OpKind::Neg, {x}, {}, SourceLoc{file, 2147483647, 99}));
  std::string text = printGraph(g);
  EXPECT_NE(text.find(R"(loc("dir with space/a\"b\\c\n\t\x01)" "\xc3\xa9" R"(.cpp":3:0))"), std::string::npos) << text;
  Graph parsed = parseGraph(text);
  EXPECT_EQ(parsed.inputs()[0]->loc, (SourceLoc{file, 3, 0}));
  EXPECT_EQ(parsed.nodes()[0]->loc, (SourceLoc{file, 2147483647, 99}));
  EXPECT_EQ(printGraph(parsed), text);
}

TEST(RoundTrip, Initializers) {
  Graph g("init");
  using K = Initializer::Kind;
  g.addParam("z", T(DType::f32, {2}), Initializer{K::Zeros});
  g.addParam("o", T(DType::i64, {2}), Initializer{K::Ones});
  g.addParam("c", T(DType::f32, {}), Initializer{K::Constant, -2.5});
  g.addParam("u", T(DType::bf16, {3}), Initializer{K::Uniform, -1, 0.1 + 0.2, 18446744073709551615ull});
  g.addParam("n", T(DType::f64, {4}), Initializer{K::Normal, 0, 0.02, 9});
  std::string text = printGraph(g);
  EXPECT_NE(text.find("param %c : f32[] = constant(value=-2.5)"), std::string::npos) << text;
  EXPECT_NE(text.find("uniform(low=-1, high=0.30000000000000004, seed=18446744073709551615)"), std::string::npos);
  EXPECT_NE(text.find("normal(mean=0, std=0.02, seed=9)"), std::string::npos);
  Graph parsed = parseGraph(text);
  ASSERT_EQ(parsed.params().size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(parsed.params()[i].init, g.params()[i].init) << i;
  EXPECT_EQ(printGraph(parsed), text);
}

TEST(Parse, FreeFormAttributesInAnyOrderAndDefaultsSpelledOut) {
  const char* text = R"(# leading comment
graph @g{input %x:f32[2,3]   # trailing comment
  %y = reduce_sum(%x) {keepdim=false, axes=[1]}: f32[2]
  %z = softmax(%x) {axis=-1} : f32[2,3]
  %w = pad(%x) {value=2, high=[0,0], low=[1,0]} : f32[3,3]
  %c = constant() {value=[1], dtype=bool, shape=[]} : bool[]
  output %y = %y output %z = %z
  output %w = %w
  output %c = %c
}
# trailing comment without newline)";
  Graph g = parseGraph(text);
  EXPECT_EQ(printGraph(g),
            "graph @g {\n"
            "  input %x : f32[2,3]\n"
            "  %y = reduce_sum(%x) {axes=[1]} : f32[2]\n"
            "  %z = softmax(%x) : f32[2,3]\n"
            "  %w = pad(%x) {low=[1,0], high=[0,0], value=2} : f32[3,3]\n"
            "  %c = constant() {shape=[], dtype=bool, value=[1]} : bool[]\n"
            "  output %y = %y\n"
            "  output %z = %z\n"
            "  output %w = %w\n"
            "  output %c = %c\n"
            "}\n");
  EXPECT_DOUBLE_EQ(g.nodes()[2]->attrFloat("value"), 2.0);  // an int literal where a float is expected
}

TEST(Parse, ExampleFiles) {
  for (const char* name : {"mlp.kir", "cnn.kir", "attention.kir", "training_step.kir", "all_ops.kir"}) {
    SCOPED_TRACE(name);
    std::string path = std::string(KILN_SOURCE_DIR) + "/tests/ir/inputs/" + name;
    Graph g = parseGraphFile(path);
    EXPECT_TRUE(verifyGraph(g).empty());
    std::string text = printGraph(g);
    EXPECT_EQ(printGraph(parseGraph(text)), text);
  }
}

TEST(Parse, MissingFileIsAnError) {
  try {
    parseGraphFile("/nonexistent/model.kir");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot open '/nonexistent/model.kir': No such file or directory");
  }
  try {
    parseGraphFile("/");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot read '/': it is a directory");
  }
}

}  // namespace
}  // namespace kiln::ir
