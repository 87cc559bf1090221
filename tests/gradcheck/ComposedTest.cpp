// Gradient checks of composed use: an LSTM cell unrolled over two steps (weights shared between
// the steps, so their gradients accumulate), values used several times, an input the loss does
// not depend on, stop_gradient, and the gradient-helper ops autodiff itself emits (checked where
// autodiff gives them a rule, so gradients of gradients stay covered). Last, the coverage test:
// every op of the table is checked here or listed by autodiff as having no gradient.
#include "GradCheck.h"

#include "passes/Autodiff.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::gradcheck {
namespace {

using ir::Graph;
using ir::Ints;
using ir::OpKind;
using ir::Shape;
using ir::Value;

Value* sliceColumns(Graph& g, Value* v, int64_t begin, int64_t end) {
  return node(g, OpKind::Slice, {v},
              {{"starts", Ints{0, begin}}, {"ends", Ints{v->type.shape[0], end}}, {"steps", Ints{1, 1}}});
}

// One LSTM step with hidden size H: gates = x Wx + h Wh + b, split into i, f, g, o.
std::pair<Value*, Value*> lstmStep(Graph& g, Value* x, Value* h, Value* c, Value* wx, Value* wh, Value* b) {
  int64_t hidden = c->type.shape[1];
  Value* gates = node(g, OpKind::Add, {node(g, OpKind::MatMul, {x, wx}), node(g, OpKind::MatMul, {h, wh})});
  gates = node(g, OpKind::Add, {gates, b});
  Value* i = node(g, OpKind::Sigmoid, {sliceColumns(g, gates, 0, hidden)});
  Value* f = node(g, OpKind::Sigmoid, {sliceColumns(g, gates, hidden, 2 * hidden)});
  Value* cand = node(g, OpKind::Tanh, {sliceColumns(g, gates, 2 * hidden, 3 * hidden)});
  Value* o = node(g, OpKind::Sigmoid, {sliceColumns(g, gates, 3 * hidden, 4 * hidden)});
  Value* cNext = node(g, OpKind::Add, {node(g, OpKind::Mul, {f, c}), node(g, OpKind::Mul, {i, cand})});
  Value* hNext = node(g, OpKind::Mul, {o, node(g, OpKind::Tanh, {cNext})});
  return {hNext, cNext};
}

TEST(GradCheckComposed, LstmCellUnrolledTwoSteps) {
  Rng rng(90);
  // x1, x2 [2,3]; h0, c0 [2,3]; Wx, Wh [3,12]; b [12]. Small weights keep the gates unsaturated.
  std::vector<Arg> args = {arg(rng.uniform({2, 3})),         arg(rng.uniform({2, 3})),
                           arg(rng.uniform({2, 3}, -.5, .5)), arg(rng.uniform({2, 3}, -.5, .5)),
                           arg(rng.uniform({3, 12}, -.6, .6)), arg(rng.uniform({3, 12}, -.6, .6)),
                           arg(rng.uniform({12}, -.3, .3))};
  checkGradients("lstm cell, 2 steps, shared weights", std::move(args), [](Graph& g, std::span<Value* const> in) {
    auto [h1, c1] = lstmStep(g, in[0], in[2], in[3], in[4], in[5], in[6]);
    auto [h2, c2] = lstmStep(g, in[1], h1, c1, in[4], in[5], in[6]);
    return node(g, OpKind::Concat, {h2, c2}, {{"axis", int64_t{1}}});
  });
}

TEST(GradCheckComposed, ValueUsedManyTimes) {
  // y = x*x + exp(x) - x / sum(x, axis 1): four uses of x through different ops, all accumulated.
  Rng rng(91);
  checkGradients("x*x + exp(x) - x / reduce_sum(x, 1)", {arg(rng.positive({2, 3}, 0.5, 1.5))},
                 [](Graph& g, std::span<Value* const> in) {
                   Value* x = in[0];
                   Value* sq = node(g, OpKind::Mul, {x, x});
                   Value* ex = node(g, OpKind::Exp, {x});
                   Value* rows = node(g, OpKind::ReduceSum, {x}, {{"axes", Ints{1}}, {"keepdim", true}});
                   Value* ratio = node(g, OpKind::Div, {x, rows});
                   return node(g, OpKind::Sub, {node(g, OpKind::Add, {sq, ex}), ratio});
                 });
}

TEST(GradCheckComposed, MlpWithSoftmaxCrossEntropy) {
  // A two-layer perceptron as the frontend builds it: linear, gelu, linear, cross_entropy.
  Rng rng(92);
  std::vector<Arg> args = {arg(rng.uniform({3, 4})),        arg(rng.uniform({5, 4}, -.7, .7)),
                           arg(rng.uniform({5}, -.2, .2)),   arg(rng.uniform({3, 5}, -.7, .7)),
                           arg(i64({3}, {2, 0, 1}))};
  checkGradients("linear-gelu-linear-cross_entropy", std::move(args), [](Graph& g, std::span<Value* const> in) {
    Value* hidden = node(g, OpKind::Gelu, {node(g, OpKind::Linear, {in[0], in[1], in[2]})});
    Value* logits = node(g, OpKind::Linear, {hidden, in[3]});
    return node(g, OpKind::CrossEntropy, {logits, in[4]});
  });
}

TEST(GradCheckComposed, InputTheLossDoesNotUseGetsZero) {
  Rng rng(93);
  checkGradients("unused x1", {arg(rng.uniform({2, 2})), arg(rng.uniform({3}))},
                 [](Graph& g, std::span<Value* const> in) { return node(g, OpKind::Tanh, {in[0]}); });
}

TEST(GradCheckComposed, StopGradientBlocksTheGradient) {
  // Not a finite-difference check (the loss does depend on x numerically): loss = sum(sg(x) * y)
  // must give d/dx = 0 and d/dy = x.
  Graph g("stop_gradient");
  Value* x = g.addInput("x", {DType::f64, {2, 2}});
  Value* y = g.addInput("y", {DType::f64, {2, 2}});
  Value* prod = node(g, OpKind::Mul, {node(g, OpKind::StopGradient, {x}), y});
  Value* loss = node(g, OpKind::ReduceSum, {prod}, {{"axes", Ints{}}});
  std::vector<Value*> wrt = {x, y};
  passes::GradientResult r = passes::appendGradients(g, loss, wrt);
  ASSERT_EQ(r.grads.size(), 2u);
  g.addOutput("dx", r.grads[0]);
  g.addOutput("dy", r.grads[1]);
  HostTensor xv = f64({2, 2}, {1, -2, 3, 0.5});
  interp::TensorMap out = interp::runPrimitives(g, {{"x", xv}, {"y", f64({2, 2}, {4, 5, 6, 7})}}, {});
  EXPECT_EQ(out.at("dx").toDoubles(), std::vector<double>(4, 0.0)) << "stop_gradient: d/dx must be zero";
  EXPECT_EQ(out.at("dy").toDoubles(), xv.toDoubles()) << "stop_gradient: d/dy must be x";
}

// ---- the gradient-helper ops (gradients of gradients) -------------------------------------------

#define SKIP_WITHOUT_RULE(op)                                                                         \
  if (!hasGradientRule(op)) GTEST_SKIP() << ir::opName(op) << " is listed in opsWithoutGradient"

TEST(GradCheckHelperOps, SliceGrad) {
  SKIP_WITHOUT_RULE(OpKind::SliceGrad);
  Rng rng(100);
  checkOp("dy [2,2] into [5,3] starts [1,0] steps [2,2]", OpKind::SliceGrad, {arg(rng.uniform({2, 2}))},
          {{"shape", Ints{5, 3}}, {"starts", Ints{1, 0}}, {"steps", Ints{2, 2}}});
}

TEST(GradCheckHelperOps, ScatterAdd) {
  SKIP_WITHOUT_RULE(OpKind::ScatterAdd);
  Rng rng(101);
  checkOp("indices (1,3,1,0) updates [4,3] axis 0 dim_size 5", OpKind::ScatterAdd,
          {arg(i64({4}, {1, 3, 1, 0})), arg(rng.uniform({4, 3}))}, {{"axis", int64_t{0}}, {"dim_size", int64_t{5}}});
  checkOp("indices [2,2] updates [3,2,2] axis 1 dim_size 3", OpKind::ScatterAdd,
          {arg(i64({2, 2}, {2, 0, 2, 2})), arg(rng.uniform({3, 2, 2}))},
          {{"axis", int64_t{1}}, {"dim_size", int64_t{3}}});
}

const std::vector<ir::NamedAttr> kConvAttrs = {
    {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"dilation", Ints{1, 1}}, {"groups", int64_t{1}}};

TEST(GradCheckHelperOps, Conv2dGradInput) {
  SKIP_WITHOUT_RULE(OpKind::Conv2dGradInput);
  Rng rng(102);
  std::vector<ir::NamedAttr> attrs = kConvAttrs;
  attrs.push_back({"input_shape", Ints{1, 2, 5, 5}});
  checkOp("dy [1,2,3,3] w [2,2,3,3] stride 2 padding 1", OpKind::Conv2dGradInput,
          {arg(rng.uniform({1, 2, 3, 3})), arg(rng.uniform({2, 2, 3, 3}))}, attrs);
}

TEST(GradCheckHelperOps, Conv2dGradWeight) {
  SKIP_WITHOUT_RULE(OpKind::Conv2dGradWeight);
  Rng rng(103);
  std::vector<ir::NamedAttr> attrs = kConvAttrs;
  attrs.push_back({"weight_shape", Ints{2, 2, 3, 3}});
  checkOp("x [1,2,5,5] dy [1,2,3,3] stride 2 padding 1", OpKind::Conv2dGradWeight,
          {arg(rng.uniform({1, 2, 5, 5})), arg(rng.uniform({1, 2, 3, 3}))}, attrs);
}

TEST(GradCheckHelperOps, MaxPool2dGrad) {
  SKIP_WITHOUT_RULE(OpKind::MaxPool2dGrad);
  Rng rng(104);
  checkOp("x [1,1,4,4] dy [1,1,3,3] kernel 2 stride 1", OpKind::MaxPool2dGrad,
          {arg(rng.distinct({1, 1, 4, 4})), arg(rng.uniform({1, 1, 3, 3}))},
          {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}});
}

TEST(GradCheckHelperOps, AvgPool2dGrad) {
  SKIP_WITHOUT_RULE(OpKind::AvgPool2dGrad);
  Rng rng(105);
  for (bool include : {true, false})
    checkOp(fmt::format("dy [1,2,3,3] into [1,2,5,5] kernel 3 stride 2 padding 1 count_include_pad {}", include),
            OpKind::AvgPool2dGrad, {arg(rng.uniform({1, 2, 3, 3}))},
            {{"input_shape", Ints{1, 2, 5, 5}},
             {"kernel", Ints{3, 3}},
             {"stride", Ints{2, 2}},
             {"padding", Ints{1, 1}},
             {"count_include_pad", include}});
}

// ---- coverage ----------------------------------------------------------------------------------

// The ops this suite checks with finite differences (stop_gradient has its own exact test).
// Keep in sync with the tests above: a new differentiable op fails GradCheckCoverage until a
// check for it is added here.
constexpr OpKind kChecked[] = {
    OpKind::Neg, OpKind::Abs, OpKind::Exp, OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt, OpKind::Reciprocal,
    OpKind::Tanh, OpKind::Sigmoid, OpKind::Sin, OpKind::Cos, OpKind::Erf, OpKind::Relu, OpKind::Floor,
    OpKind::Cast, OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min,
    OpKind::Select, OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::Reshape, OpKind::Permute,
    OpKind::Broadcast, OpKind::Slice, OpKind::Concat, OpKind::Pad, OpKind::Gather, OpKind::MatMul,
    OpKind::Conv2d, OpKind::MaxPool2d, OpKind::AvgPool2d, OpKind::StopGradient, OpKind::SliceGrad,
    OpKind::ScatterAdd, OpKind::Conv2dGradInput, OpKind::Conv2dGradWeight, OpKind::MaxPool2dGrad,
    OpKind::AvgPool2dGrad, OpKind::Linear, OpKind::Gelu, OpKind::Silu, OpKind::ReduceMean, OpKind::Softmax,
    OpKind::LogSoftmax, OpKind::CrossEntropy, OpKind::Mse, OpKind::BceWithLogits, OpKind::LayerNorm,
    OpKind::Dropout, OpKind::Embedding, OpKind::Attention,
};

TEST(GradCheckCoverage, EveryOpIsCheckedOrHasNoGradient) {
  for (const ir::OpInfo& info : ir::allOps()) {
    bool checked = std::find(std::begin(kChecked), std::end(kChecked), info.kind) != std::end(kChecked);
    EXPECT_TRUE(checked || !hasGradientRule(info.kind))
        << "op '" << info.name << "' has a gradient rule (it is not in opsWithoutGradient) but no gradient check";
  }
}

}  // namespace
}  // namespace kiln::gradcheck
