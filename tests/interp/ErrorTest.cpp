// Error cases of the interpreter (ctest label `error`): signature mismatches name the value and
// both types; a bad gather index names the op, the index and the source location; a composite op
// reaching runPrimitives is an internal error.
#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

// y = relu(x) + w, with an input and a parameter.
struct SmallGraph {
  ir::Graph g;
  SmallGraph() {
    ir::Value* x = g.addInput("x", {DType::f32, {2}});
    ir::Value* w = g.addParam("w", {DType::f32, {2}}, ir::Initializer{ir::Initializer::Kind::Constant, 0.5});
    ir::Value* r = g.addNode(OpKind::Relu, {x}, {});
    g.addOutput("y", g.addNode(OpKind::Add, {r, w}, {}));
    g.addOutput("r", r);
    g.addOutput("echo", x);
  }
};

TEST(InterpSignature, MissingInputIsAnError) {
  SmallGraph s;
  std::string msg = errorOf([&] { runPrimitives(s.g, {}, {}); });
  EXPECT_NE(msg.find("missing graph input 'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2]"), std::string::npos) << msg;
}

TEST(InterpSignature, WrongDTypeOrShapeNamesBothTypes) {
  SmallGraph s;
  std::string msg = errorOf([&] { runPrimitives(s.g, {{"x", f32({3}, {1, 2, 3})}}, {}); });
  EXPECT_NE(msg.find("graph input 'x' has type f32[3], expected f32[2]"), std::string::npos) << msg;
  msg = errorOf([&] { runPrimitives(s.g, {{"x", f64({2}, {1, 2})}}, {}); });
  EXPECT_NE(msg.find("graph input 'x' has type f64[2], expected f32[2]"), std::string::npos) << msg;
  msg = errorOf([&] { runPrimitives(s.g, {{"x", HostTensor()}}, {}); });
  EXPECT_NE(msg.find("graph input 'x' has type an empty"), std::string::npos) << msg;
}

TEST(InterpSignature, UnknownInputNamesAreErrors) {
  SmallGraph s;
  std::string msg = errorOf([&] { runPrimitives(s.g, {{"x", f32({2}, {1, 2})}, {"xx", f32({2}, {1, 2})}}, {}); });
  EXPECT_NE(msg.find("unknown graph input 'xx'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inputs are: x"), std::string::npos) << msg;
  msg = errorOf([&] { runPrimitives(s.g, {{"x", f32({2}, {1, 2})}, {"w", f32({2}, {1, 2})}}, {}); });
  EXPECT_NE(msg.find("'w' is a parameter"), std::string::npos) << msg;
}

TEST(InterpSignature, ParameterChecks) {
  SmallGraph s;
  TensorMap x{{"x", f32({2}, {1, 2})}};
  std::string msg = errorOf([&] { runPrimitives(s.g, x, {{"w", f32({1}, {1})}}); });
  EXPECT_NE(msg.find("parameter 'w' has type f32[1], expected f32[2]"), std::string::npos) << msg;
  msg = errorOf([&] { runPrimitives(s.g, x, {{"w2", f32({2}, {1, 2})}}); });
  EXPECT_NE(msg.find("unknown parameter 'w2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameters are: w"), std::string::npos) << msg;
}

TEST(InterpSignature, RunChecksToo) {
  SmallGraph s;
  std::string msg = errorOf([&] { run(s.g, {}); });
  EXPECT_NE(msg.find("missing graph input 'x'"), std::string::npos) << msg;
  expectValues(run(s.g, {{"x", f32({2}, {3, -3})}}).at("y"), {3.5, 0.5});
}

TEST(InterpCompositeDeathTest, ReachingRunPrimitivesIsAnInternalError) {
  ir::Graph g;
  ir::Value* x = g.addInput("x", {DType::f32, {2}});
  g.addOutput("y", g.addNode(OpKind::Softmax, {x}, {}));
  TensorMap inputs{{"x", f32({2}, {1, 2})}};
  EXPECT_DEATH(runPrimitives(g, inputs, {}), "composite op 'softmax' reached runPrimitives");
}

TEST(InterpGather, OutOfRangeIndexNamesTheOpTheIndexAndTheLocation) {
  ir::Graph g;
  ir::Value* data = g.addInput("data", {DType::f32, {3, 2}});
  ir::Value* idx = g.addInput("idx", {DType::i64, {2}});
  g.addOutput("out", g.addNode(OpKind::Gather, {data, idx}, std::vector<ir::NamedAttr>{{"axis", int64_t{0}}},
                               SourceLoc{"model.cpp", 12, 3}));
  TensorMap inputs{{"data", f32({3, 2}, {1, 2, 3, 4, 5, 6})}, {"idx", i64({2}, {1, 5})}};
  std::string msg = errorOf([&] { runPrimitives(g, inputs, {}); });
  EXPECT_NE(msg.find("model.cpp:12:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gather"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 3)"), std::string::npos) << msg;
  inputs.insert_or_assign("idx", i64({2}, {-1, 0}));
  msg = errorOf([&] { runPrimitives(g, inputs, {}); });
  EXPECT_NE(msg.find("index -1"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::interp::testing
