// DSL tensor ops: the nodes they build, broadcasting, scalar operands, promotion and the
// PyTorch-style conveniences that resolve to IR primitives.
#include "FrontendTestUtil.h"

#include "ir/Verifier.h"

namespace kiln {
namespace {

using testing::contains;
using testing::errorOf;
using testing::producer;
using ir::OpKind;

TEST(TensorOps, BinaryOperatorsBroadcast) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2, 3});
  Tensor b = t.input("b", DType::f32, {3});
  Tensor c = t.input("c", DType::f32, {4, 1, 1});
  Tensor y = a + b;
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(producer(y).op, OpKind::Add);
  EXPECT_EQ(producer(y).operands[0], a.value());
  EXPECT_EQ(producer(y).operands[1], b.value());
  EXPECT_EQ((a * c).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(producer(a - b).op, OpKind::Sub);
  EXPECT_EQ(producer(a / c).op, OpKind::Div);
  EXPECT_EQ(producer(-a).op, OpKind::Neg);
  EXPECT_EQ((a + b + c).shape(), (Shape{4, 2, 3}));
}

TEST(TensorOps, ScalarOperandsBecomeConstantsOfTheTensorType) {
  Tracer t;
  Tensor x = t.input("x", DType::f64, {2, 3});
  Tensor y = x * 2.5;
  const ir::Node& mul = producer(y);
  EXPECT_EQ(mul.op, OpKind::Mul);
  const ir::Node* c = mul.operands[1]->producer;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->op, OpKind::Constant);
  EXPECT_EQ(c->result->type, (ir::TensorType{DType::f64, {}}));
  EXPECT_EQ(c->attrFloats("value"), (ir::Floats{2.5}));
  EXPECT_EQ(y.type(), (ir::TensorType{DType::f64, {2, 3}}));

  // A scalar on the left keeps its place: 1 - x is sub(constant 1, x).
  const ir::Node& sub = producer(1 - x);
  EXPECT_EQ(sub.op, OpKind::Sub);
  EXPECT_EQ(sub.operands[0]->producer->attrFloats("value"), (ir::Floats{1.0}));
  EXPECT_EQ(sub.operands[1], x.value());
}

TEST(TensorOps, IntegerTensorsWithScalars) {
  Tracer t;
  Tensor i = t.input("i", DType::i64, {4});
  EXPECT_EQ((i + 1).dtype(), DType::i64);
  // A fractional scalar promotes an integer tensor to f32, as in PyTorch.
  Tensor h = i * 0.5;
  EXPECT_EQ(h.dtype(), DType::f32);
  EXPECT_EQ(producer(h).operands[0]->producer->op, OpKind::Cast);
}

TEST(TensorOps, BoolTensorsWithNumbersCountAsZeroOrOne) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {3});
  Tensor mask = x > 0.0;
  EXPECT_EQ((mask * 2).dtype(), DType::i64);
  EXPECT_EQ((mask * 0.5).dtype(), DType::f32);
  EXPECT_EQ((mask == 1).dtype(), DType::boolean);
  EXPECT_EQ(producer(mask * 2).operands[0]->producer->op, OpKind::Cast);
  EXPECT_EQ(logical_and(mask, mask).dtype(), DType::boolean);
}

TEST(TensorOps, MixedElementTypesArePromoted) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2});
  Tensor b = t.input("b", DType::f64, {2});
  Tensor i = t.input("i", DType::i32, {2});
  Tensor h = t.input("h", DType::f16, {2});
  Tensor bf = t.input("bf", DType::bf16, {2});
  Tensor s = a + b;
  EXPECT_EQ(s.dtype(), DType::f64);
  EXPECT_EQ(producer(s).operands[0]->producer->op, OpKind::Cast);
  EXPECT_EQ(producer(s).operands[1], b.value());
  EXPECT_EQ((i + h).dtype(), DType::f16);
  EXPECT_EQ((h + bf).dtype(), DType::f32);
  EXPECT_EQ(cast(a, DType::f32).value(), a.value());  // casting to the same type is a no-op
}

TEST(TensorOps, ComparisonsGiveBoolTensors) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3});
  Tensor y = t.input("y", DType::f32, {3});
  EXPECT_EQ((x > 0).type(), (ir::TensorType{DType::boolean, {2, 3}}));
  EXPECT_EQ(producer(x > 0).op, OpKind::Gt);
  EXPECT_EQ(producer(x == y).op, OpKind::Eq);
  EXPECT_EQ(producer(x != y).op, OpKind::Ne);
  EXPECT_EQ(producer(x <= y).op, OpKind::Le);
  EXPECT_EQ(producer(x >= 1.0).op, OpKind::Ge);
  EXPECT_EQ(producer(x < y).op, OpKind::Lt);
  Tensor r = where(x > 0, x, 0.0);
  EXPECT_EQ(producer(r).op, OpKind::Select);
  EXPECT_EQ(r.type(), (ir::TensorType{DType::f32, {2, 3}}));
  EXPECT_EQ(logical_not(logical_and(x > 0, x < 1)).dtype(), DType::boolean);
}

TEST(TensorOps, ReductionsNormalizeNegativeAxes) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3, 4});
  Tensor s = sum(x, -1);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(producer(s).attrInts("axes"), (ir::Ints{2}));
  Tensor m = mean(x, {0, -1}, true);
  EXPECT_EQ(m.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(producer(m).op, OpKind::ReduceMean);
  EXPECT_EQ(producer(m).attrInts("axes"), (ir::Ints{0, 2}));
  EXPECT_EQ(max(x).shape(), Shape{});
  EXPECT_EQ(min(x, 1).shape(), (Shape{2, 4}));
  Tensor am = argmax(x, -2);
  EXPECT_EQ(am.type(), (ir::TensorType{DType::i64, {2, 4}}));
  EXPECT_EQ(producer(am).attrInt("axis"), 1);
}

TEST(TensorOps, ReshapeInfersMinusOne) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3, 4});
  Tensor r = reshape(x, {-1, 4});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_EQ(producer(r).attrInts("shape"), (ir::Ints{6, 4}));
  EXPECT_EQ(reshape(x, {2, 3, 4}).value(), x.value());  // same shape: no node
  EXPECT_TRUE(contains(errorOf([&] { reshape(x, {-1, -1}); }), "more than one -1"));
  EXPECT_TRUE(contains(errorOf([&] { reshape(x, {5, -1}); }), "cannot reshape 24 elements into [5,-1]"));
}

TEST(TensorOps, TransposeFlattenSqueeze) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3, 4});
  Tensor tr = transpose(x, 0, -1);
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(producer(tr).attrInts("perm"), (ir::Ints{2, 1, 0}));
  EXPECT_EQ(permute(x, {1, -1, 0}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(x).shape(), (Shape{24}));
  EXPECT_EQ(flatten(x, 0, 1).shape(), (Shape{6, 4}));
  Tensor u = unsqueeze(x, -1);
  EXPECT_EQ(u.shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(squeeze(u, 3).shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(contains(errorOf([&] { squeeze(x, 1); }), "dimension 1 has size 3, not 1"));
  EXPECT_EQ(broadcast_to(t.input("b", DType::f32, {3, 1}), {2, 3, 5}).shape(), (Shape{2, 3, 5}));
}

TEST(TensorOps, SliceNarrowConcatPadGather) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3, 4});
  Tensor s = slice(x, 1, -2, 100);  // Python x[:, -2:100] → rows 1, 2
  EXPECT_EQ(s.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(producer(s).attrInts("starts"), (ir::Ints{0, 1, 0}));
  EXPECT_EQ(producer(s).attrInts("ends"), (ir::Ints{2, 3, 4}));
  EXPECT_EQ(slice(x, 2, 0, 4, 3).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(narrow(x, -1, 1, 2).shape(), (Shape{2, 3, 2}));
  Tensor y = t.input("y", DType::f32, {2, 3, 1});
  Tensor c = concat({x, y}, -1);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(producer(c).attrInt("axis"), 2);
  EXPECT_EQ(pad(x, {0, 1, 2}, {0, 1, 0}).shape(), (Shape{2, 5, 6}));
  Tensor idx = t.input("idx", DType::i64, {5});
  EXPECT_EQ(index_select(x, 1, idx).shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(one_hot(idx, 7).type(), (ir::TensorType{DType::f32, {5, 7}}));
}

TEST(TensorOps, ContractionsAndWindows) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {5, 2, 3});
  Tensor b = t.input("b", DType::f32, {3, 4});
  EXPECT_EQ(matmul(a, b).shape(), (Shape{5, 2, 4}));
  Tensor img = t.input("img", DType::f32, {2, 3, 9, 9});
  Tensor w = t.input("w", DType::f32, {8, 3, 3, 3});
  Tensor bias = t.input("bias", DType::f32, {8});
  Tensor y = conv2d(img, w, bias, {.stride = {2, 2}, .padding = {1, 1}});
  EXPECT_EQ(y.shape(), (Shape{2, 8, 5, 5}));  // (9 + 2 - 3) / 2 + 1 = 5
  EXPECT_EQ(producer(y).op, OpKind::Add);     // the bias is a broadcast add
  EXPECT_EQ(max_pool2d(img, {3, 3}).shape(), (Shape{2, 3, 3, 3}));  // stride defaults to the kernel
  EXPECT_EQ(avg_pool2d(img, {2}, {1}).shape(), (Shape{2, 3, 8, 8}));
}

TEST(TensorOps, CompositesAndSources) {
  Tracer t;
  Tensor logits = t.input("logits", DType::f32, {4, 10});
  Tensor labels = t.input("labels", DType::i64, {4});
  EXPECT_EQ(cross_entropy(logits, labels).shape(), Shape{});
  EXPECT_EQ(cross_entropy(logits, labels, "none").shape(), (Shape{4}));
  EXPECT_EQ(producer(softmax(logits)).attrInt("axis"), 1);
  EXPECT_EQ(log_softmax(logits, 0).shape(), (Shape{4, 10}));
  EXPECT_EQ(mse_loss(logits, logits).shape(), Shape{});
  EXPECT_EQ(bce_with_logits(logits, logits, "sum").shape(), Shape{});
  EXPECT_EQ(layer_norm(logits).shape(), (Shape{4, 10}));
  EXPECT_EQ(producer(gelu(logits, "tanh")).attrStr("approximate"), "tanh");
  Tensor d1 = dropout(logits, 0.1), d2 = dropout(logits, 0.1);
  EXPECT_NE(producer(d1).attrInt("seed"), producer(d2).attrInt("seed"));
  Tensor q = t.input("q", DType::f32, {2, 4, 8, 16});
  EXPECT_EQ(scaled_dot_product_attention(q, q, q, true).shape(), (Shape{2, 4, 8, 16}));
  EXPECT_EQ(zeros(t, {2, 2}).type(), (ir::TensorType{DType::f32, {2, 2}}));
  EXPECT_EQ(iota(t, {3, 5}, -1).type(), (ir::TensorType{DType::i64, {3, 5}}));
  EXPECT_EQ(producer(arange(t, 7)).attrInt("axis"), 0);
  EXPECT_EQ(random_normal(t, {3}, 42).dtype(), DType::f32);
  EXPECT_EQ(constant(t, {2}, {1, 2}, DType::i32).type(), (ir::TensorType{DType::i32, {2}}));
}

TEST(Tracer, FinishVerifiesAndHandsOverTheGraph) {
  Tracer t("g");
  Tensor x = t.input("x", DType::f32, {2});
  t.output("y", relu(x) + 1);
  ir::Graph g = t.finish();
  EXPECT_EQ(g.name(), "g");
  EXPECT_TRUE(ir::verifyGraph(g).empty());
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0].name, "y");
  EXPECT_TRUE(contains(errorOf([&] { t.finish(); }), "already finished"));
}

TEST(Tracer, UserMistakesAreErrors) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2});
  EXPECT_TRUE(contains(errorOf([&] { t.input("x", DType::f32, {3}); }), "already defined"));
  EXPECT_TRUE(contains(errorOf([&] { t.finish(); }), "has no outputs"));
  EXPECT_TRUE(contains(errorOf([&] { t.output("bad", Tensor()); }), "undefined"));
  Tracer other;
  Tensor z = other.input("z", DType::f32, {2});
  EXPECT_TRUE(contains(errorOf([&] { x + z; }), "another Tracer"));
  EXPECT_TRUE(contains(errorOf([&] { x.size(3); }), "out of range"));
}

}  // namespace
}  // namespace kiln
