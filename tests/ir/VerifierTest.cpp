// The verifier on graphs built in memory (as passes build them), where nothing else checked.
#include "ir/Verifier.h"

#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

TensorType f32(Shape s) { return TensorType{DType::f32, std::move(s)}; }
const SourceLoc kLoc{"model.cpp", 7, 3};

TEST(Verifier, ValidGraphHasNoProblems) {
  Graph g("ok");
  Value* x = g.addInput("x", f32({2, 3}));
  Value* w = g.addParam("w", f32({3, 4}), Initializer{Initializer::Kind::Normal, 0, 0.1, 1});
  g.addOutput("y", g.addNode(OpKind::MatMul, {x, w}, {}));
  EXPECT_TRUE(verifyGraph(g).empty());
  EXPECT_NO_THROW(verifyOrThrow(g));
}

TEST(Verifier, WrongResultTypeNamesOpOperandsAndLocation) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2, 3}));
  Value* w = g.addInput("w", f32({3, 4}));
  g.addNodeRaw(OpKind::MatMul, {x, w}, {false, false}, f32({2, 3}), kLoc);  // transpose_a, transpose_b
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{
                                "model.cpp:7:3: %0 = op 'matmul' with operands (f32[2,3], f32[3,4]): result type "
                                "f32[2,3] does not match the inferred type f32[2,4]"});
  try {
    verifyOrThrow(g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.cpp:7:3: %0 = op 'matmul'"), std::string::npos);
  }
}

TEST(Verifier, ShapeRuleErrorIsReported) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2, 3}));
  Value* w = g.addInput("w", f32({4, 5}));
  g.addNodeRaw(OpKind::MatMul, {x, w}, {false, false}, f32({2, 5}), kLoc, "y");
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{"model.cpp:7:3: %y = op 'matmul' with operands (f32[2,3], "
                                                     "f32[4,5]): contracted dimensions differ (3 vs 4)"});
}

TEST(Verifier, OperandCount) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2}));
  g.addNodeRaw(OpKind::Add, {x}, {}, f32({2}), kLoc);
  ASSERT_EQ(verifyGraph(g).size(), 1u);
  EXPECT_NE(verifyGraph(g)[0].find("op 'add' with operands (f32[2]): expects 2 operands, got 1"), std::string::npos);
}

TEST(Verifier, AttributeCountKindAndChoices) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2, 3}));
  Value* labels = g.addInput("l", TensorType{DType::i64, {2}});
  g.addNodeRaw(OpKind::Softmax, {x}, {}, f32({2, 3}), kLoc);
  g.addNodeRaw(OpKind::Softmax, {x}, {AttrValue{1.0}}, f32({2, 3}), kLoc);
  g.addNodeRaw(OpKind::CrossEntropy, {x, labels}, {AttrValue{std::string("avg")}, AttrValue{0.0}}, f32({}), kLoc);
  std::vector<std::string> p = verifyGraph(g);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "model.cpp:7:3: %0 = op 'softmax' with operands (f32[2,3]): 0 attributes for a schema of 1");
  EXPECT_EQ(p[1], "model.cpp:7:3: %1 = op 'softmax' with operands (f32[2,3]): attribute 'axis' must be int, got float");
  EXPECT_EQ(p[2], "model.cpp:7:3: %2 = op 'cross_entropy' with operands (f32[2,3], i64[2]): attribute 'reduction' is "
                  "\"avg\", expected one of mean, sum, none");
}

TEST(Verifier, OperandUsedBeforeDefinition) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2}));
  Value* a = g.addNode(OpKind::Neg, {x}, {}, {}, "a");
  g.addNode(OpKind::Exp, {a}, {}, {}, "b");
  std::swap(g.mutableNodes()[0], g.mutableNodes()[1]);
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{
                                "%b = op 'exp' with operands (f32[2]): operand 0 (%a) is used before it is defined"});
}

TEST(Verifier, ValuesFromAnotherGraph) {
  Graph other("other");
  Value* foreign = other.addInput("z", f32({2}));
  Graph g("g");
  Value* x = g.addInput("x", f32({2}));
  g.addNode(OpKind::Add, {x, x}, {}, kLoc);
  g.mutableNodes()[0]->operands[1] = foreign;
  g.addOutput("y", x);
  g.mutableOutputs()[0].value = foreign;
  std::vector<std::string> p = verifyGraph(g);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], "model.cpp:7:3: %0 = op 'add' with operands (f32[2], f32[2]): operand 1 (%z) does not belong to "
                  "this graph");
  EXPECT_EQ(p[1], "output %y refers to a value that is not defined in this graph");
}

TEST(Verifier, InvalidInitializers) {
  Graph g("g");
  using K = Initializer::Kind;
  g.addParam("u", f32({2}), Initializer{K::Uniform, 1, -1, 0}, kLoc);
  g.addParam("n", f32({2}), Initializer{K::Normal, 0, -0.5, 0});
  g.addParam("i", TensorType{DType::i32, {2}}, Initializer{K::Uniform, 0, 1, 0});
  g.addParam("inf", f32({2}), Initializer{K::Normal, 0, std::numeric_limits<double>::infinity(), 0});
  std::vector<std::string> p = verifyGraph(g);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], "model.cpp:7:3: param %u : f32[2]: uniform low 1 is greater than high -1");
  EXPECT_EQ(p[1], "param %n : f32[2]: normal std -0.5 is negative");
  EXPECT_EQ(p[2], "param %i : i32[2]: a uniform initializer needs a float parameter, not i32");
  EXPECT_EQ(p[3], "param %inf : f32[2]: normal arguments must be finite");
}

TEST(Verifier, NamesAndOutputs) {
  Graph g("bad name");
  Value* x = g.addInput("x", f32({2}));
  Value* y = g.addNode(OpKind::Neg, {x}, {});
  y->name = "x";  // a pass renamed a value onto an existing name
  g.addOutput("o", y);
  g.mutableOutputs().push_back(Output{"o", y});
  std::vector<std::string> p = verifyGraph(g);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "graph name 'bad name' is not a valid name (letters, digits, '_' and '.')");
  EXPECT_EQ(p[1], "%x = op 'neg' with operands (f32[2]): the name %x is defined twice");
  EXPECT_EQ(p[2], "duplicate output %o");
}

TEST(Verifier, InvalidValueNameWouldNotReparse) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2}));
  g.addOutput("y", g.addNode(OpKind::Neg, {x}, {}, {}, "y"));
  g.nodes()[0]->result->name = "y:1";
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{"%y:1 = op 'neg' with operands (f32[2]): invalid name 'y:1'"});
}

TEST(Verifier, BadTypeOnAValue) {
  Graph g("g");
  Value* x = g.addInput("x", f32({2}));
  x->type.shape = {-1};
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{"input %x : f32[-1]: shape [-1] has a negative dimension"});
}

}  // namespace
}  // namespace kiln::ir
