// Structural promises of the decompose pass, for every composite op in the table: no composite is
// left, the graph verifies, types and names of the signature survive, and the new nodes carry the
// composite's source location.
#include "DecomposeHelpers.h"

#include <map>

namespace kiln::testing {
namespace {

using ir::OpKind;
using ir::TensorType;

struct OpCase {
  std::string label;
  OpKind op;
  std::vector<TensorType> operands;
  std::vector<ir::NamedAttr> attrs;
};

TensorType t(DType d, ir::Shape s) { return {d, std::move(s)}; }

// At least one instance of every composite op, with the attribute variants that change the rule.
std::vector<OpCase> compositeCases() {
  const DType F = DType::f32;
  return {
      {"linear_bias", OpKind::Linear, {t(F, {4, 3}), t(F, {2, 3}), t(F, {2})}, {}},
      {"linear_rank3", OpKind::Linear, {t(F, {2, 5, 3}), t(F, {2, 3})}, {}},
      {"linear_rank1", OpKind::Linear, {t(F, {3}), t(F, {2, 3}), t(F, {2})}, {}},
      {"gelu", OpKind::Gelu, {t(F, {2, 3})}, {}},
      {"gelu_tanh", OpKind::Gelu, {t(DType::f16, {2, 3})}, {{"approximate", std::string("tanh")}}},
      {"silu", OpKind::Silu, {t(F, {5})}, {}},
      {"reduce_mean", OpKind::ReduceMean, {t(F, {2, 3, 4})}, {{"axes", ir::Ints{1, -1}}, {"keepdim", true}}},
      {"reduce_mean_all", OpKind::ReduceMean, {t(DType::bf16, {2, 3})}, {{"axes", ir::Ints{}}}},
      {"softmax", OpKind::Softmax, {t(F, {2, 3})}, {{"axis", int64_t{0}}}},
      {"log_softmax", OpKind::LogSoftmax, {t(F, {2, 3})}, {}},
      {"cross_entropy", OpKind::CrossEntropy, {t(F, {4, 3}), t(DType::i64, {4})}, {}},
      {"cross_entropy_none", OpKind::CrossEntropy, {t(F, {4, 3}), t(DType::i32, {4})},
       {{"reduction", std::string("none")}}},
      {"mse_sum", OpKind::Mse, {t(F, {2, 3}), t(F, {2, 3})}, {{"reduction", std::string("sum")}}},
      {"bce_with_logits", OpKind::BceWithLogits, {t(F, {4}), t(F, {4})}, {}},
      {"layer_norm", OpKind::LayerNorm, {t(F, {2, 3, 4}), t(F, {3, 4}), t(F, {3, 4})},
       {{"normalized_ndim", int64_t{2}}}},
      {"layer_norm_plain", OpKind::LayerNorm, {t(F, {2, 4})}, {}},
      {"dropout", OpKind::Dropout, {t(DType::f16, {3, 4})}, {{"p", 0.5}, {"seed", int64_t{1}}}},
      {"embedding", OpKind::Embedding, {t(DType::i64, {2, 5}), t(F, {10, 4})}, {}},
      {"attention_causal", OpKind::Attention, {t(F, {2, 4, 8}), t(F, {2, 4, 8}), t(F, {2, 4, 6})},
       {{"causal", true}}},
      {"attention_scaled", OpKind::Attention, {t(F, {3, 8}), t(F, {5, 8}), t(F, {5, 2})}, {{"scale", 0.5}}},
  };
}

TEST(DecomposeTable, EveryCompositeOpHasARule) {
  for (const ir::OpInfo& info : ir::allOps()) {
    bool composite = info.has(ir::kComposite);
    EXPECT_EQ(passes::hasDecomposition(info.kind), composite) << info.name;
  }
}

TEST(DecomposeTable, EveryCompositeOpIsCoveredByACase) {
  std::map<OpKind, int> covered;
  for (const OpCase& c : compositeCases()) ++covered[c.op];
  for (const ir::OpInfo& info : ir::allOps())
    if (info.has(ir::kComposite)) {
      EXPECT_GT(covered[info.kind], 0) << "no test case for " << info.name;
    }
}

TEST(Decompose, EveryCompositeBecomesPrimitivesAtItsLocation) {
  for (const OpCase& c : compositeCases()) {
    SCOPED_TRACE(c.label);
    ir::Graph g = singleOpGraph(c.op, c.operands, c.attrs);
    TensorType resultType = g.outputs()[0].value->type;
    decomposeChecked(g);
    ASSERT_EQ(g.inputs().size(), c.operands.size());
    for (size_t i = 0; i < c.operands.size(); ++i) {
      EXPECT_EQ(g.inputs()[i]->name, fmt::format("in{}", i));
      EXPECT_EQ(g.inputs()[i]->type, c.operands[i]);
    }
    ASSERT_EQ(g.outputs().size(), 1u);
    EXPECT_EQ(g.outputs()[0].name, "out");
    EXPECT_EQ(g.outputs()[0].value->type, resultType);
    EXPECT_EQ(g.outputs()[0].value->name, "r") << "the composite's result name is kept";
    EXPECT_GE(g.nodes().size(), 1u);
    for (const auto& n : g.nodes()) EXPECT_EQ(n->loc, modelLoc()) << n->info().name;
  }
}

TEST(Decompose, GraphWithoutCompositesIsUntouched) {
  ir::Graph g("plain");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  ir::Value* w = g.addParam("w", {DType::f32, {3}}, {ir::Initializer::Kind::Ones});
  ir::Value* y = addOp(g, OpKind::Mul, {x, w});
  g.addOutput("y", addOp(g, OpKind::Exp, {y}, {}, modelLoc(), "e"));
  std::string before = ir::printGraph(g);
  passes::decompose(g);
  EXPECT_EQ(ir::printGraph(g), before);
}

TEST(Decompose, KeepsParamsPrimitivesAndRemapsUses) {
  // x -> linear(w, b) -> %h ; %s = softmax(%h) used by a primitive and by two outputs.
  ir::Graph g("mlp");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  ir::Value* w = g.addParam("fc.weight", {DType::f32, {4, 3}}, {ir::Initializer::Kind::Uniform, -1, 1, 7});
  ir::Value* b = g.addParam("fc.bias", {DType::f32, {4}}, {ir::Initializer::Kind::Zeros});
  ir::Value* h = addOp(g, OpKind::Linear, {x, w, b}, {}, SourceLoc{"mlp.cpp", 3, 1}, "h");
  ir::Value* a = addOp(g, OpKind::Relu, {h}, {}, SourceLoc{"mlp.cpp", 4, 1}, "a");
  ir::Value* s = addOp(g, OpKind::Softmax, {a}, {}, SourceLoc{"mlp.cpp", 5, 1}, "s");
  ir::Value* n = addOp(g, OpKind::Neg, {s}, {}, SourceLoc{"mlp.cpp", 6, 1}, "n");
  g.addOutput("probs", s);
  g.addOutput("neg", n);
  g.addOutput("probs_again", s);
  decomposeChecked(g);

  ASSERT_EQ(g.params().size(), 2u);
  EXPECT_EQ(g.params()[0].value->name, "fc.weight");
  EXPECT_EQ(g.params()[0].init, (ir::Initializer{ir::Initializer::Kind::Uniform, -1, 1, 7}));
  EXPECT_EQ(g.params()[1].value->name, "fc.bias");
  ir::Value* relu = g.findValue("a");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->producer->op, OpKind::Relu);
  EXPECT_EQ(relu->producer->loc, (SourceLoc{"mlp.cpp", 4, 1}));
  EXPECT_EQ(relu->producer->operands[0], g.findValue("h"));
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.outputs()[0].value, g.findValue("s"));
  EXPECT_EQ(g.outputs()[2].value, g.outputs()[0].value);
  EXPECT_EQ(g.findValue("n")->producer->operands[0], g.findValue("s"));
  EXPECT_EQ(g.findValue("s")->producer->op, OpKind::Div);
  EXPECT_EQ(g.findValue("s")->producer->loc, (SourceLoc{"mlp.cpp", 5, 1}));
}

TEST(Decompose, SoftmaxIsMaxSubtractedExpOverSum) {
  ir::Graph g = singleOpGraph(OpKind::Softmax, {{DType::f32, {2, 3}}}, {});
  decomposeChecked(g);
  std::vector<OpKind> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op);
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::ReduceMax, OpKind::StopGradient, OpKind::Sub, OpKind::Exp,
                                      OpKind::ReduceSum, OpKind::Div}));
  const ir::Node& max = *g.nodes()[0];
  EXPECT_EQ(max.attrInts("axes"), (ir::Ints{1}));
  EXPECT_TRUE(max.attrBool("keepdim"));
}

TEST(Decompose, ChainedCompositesAllExpand) {
  ir::Graph g("chain");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 5, 3}});
  ir::Value* w = g.addInput("w", {DType::f32, {4, 3}});
  ir::Value* y = addOp(g, OpKind::Linear, {x, w});
  y = addOp(g, OpKind::Gelu, {y});
  y = addOp(g, OpKind::LayerNorm, {y});
  y = addOp(g, OpKind::ReduceMean, {y}, {{"axes", ir::Ints{}}});
  g.addOutput("y", y);
  decomposeChecked(g);
  EXPECT_EQ(g.outputs()[0].value->type, (TensorType{DType::f32, {}}));
}

}  // namespace
}  // namespace kiln::testing
