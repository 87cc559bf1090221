// Gradient checks of the composite ops, differentiated through their decompositions: linear,
// activations, reduce_mean, softmax/log_softmax, the losses, layer_norm, attention, embedding and
// dropout (a fixed seed and step make its mask a constant, so finite differences see the same mask).
#include "GradCheck.h"

#include <gtest/gtest.h>

namespace kiln::gradcheck {
namespace {

using ir::Ints;
using ir::OpKind;
using ir::Shape;

TEST(GradCheckComposite, LinearWithAndWithoutBias) {
  Rng rng(80);
  struct Case {
    Shape x, w;
  };
  for (const Case& c :
       std::vector<Case>{{{4, 3}, {2, 3}}, {{2, 3, 4}, {5, 4}}, {{3}, {2, 3}}, {{1, 2, 1, 3}, {4, 3}}}) {
    std::string label = ir::shapeStr(c.x) + " w " + ir::shapeStr(c.w);
    Shape b = {c.w[0]};
    checkOp(label + " no bias", OpKind::Linear, {arg(rng.uniform(c.x)), arg(rng.uniform(c.w))});
    checkOp(label + " bias", OpKind::Linear, {arg(rng.uniform(c.x)), arg(rng.uniform(c.w)), arg(rng.uniform(b))});
  }
}

TEST(GradCheckComposite, GeluBothFormsAndSilu) {
  Rng rng(81);
  for (const Shape& s : std::vector<Shape>{{}, {7}, {2, 3, 1}}) {
    for (const char* form : {"none", "tanh"})
      checkOp(fmt::format("{} approximate {}", ir::shapeStr(s), form), OpKind::Gelu, {arg(rng.uniform(s, -3, 3))},
              {{"approximate", std::string(form)}});
    checkOp(ir::shapeStr(s), OpKind::Silu, {arg(rng.uniform(s, -3, 3))});
  }
}

TEST(GradCheckComposite, ReduceMeanAxesAndKeepdim) {
  Rng rng(82);
  struct Case {
    Shape shape;
    Ints axes;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, {}}, {{2, 3, 4}, {1}}, {{2, 3, 4}, {0, 2}}, {{3, 1}, {-1}}})
    for (bool keep : {false, true})
      checkOp(fmt::format("{} axes [{}] keepdim {}", ir::shapeStr(c.shape), fmt::join(c.axes, ","), keep),
              OpKind::ReduceMean, {arg(rng.uniform(c.shape))}, {{"axes", c.axes}, {"keepdim", keep}});
}

TEST(GradCheckComposite, SoftmaxAndLogSoftmaxAlongEachAxis) {
  Rng rng(83);
  struct Case {
    Shape shape;
    int64_t axis;
  };
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
    for (const Case& c : std::vector<Case>{{{3, 4}, 0}, {{3, 4}, -1}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{5}, 0},
                                           {{3, 1}, -1}})  // a size-1 softmax axis: constant output
      checkOp(fmt::format("{} axis {}", ir::shapeStr(c.shape), c.axis), op, {arg(rng.uniform(c.shape, -2, 2))},
              {{"axis", c.axis}});
}

TEST(GradCheckComposite, CrossEntropyEachReduction) {
  Rng rng(84);
  for (const char* reduction : {"mean", "sum", "none"}) {
    checkOp(fmt::format("[4,5] i64 labels (1,0,4,1) reduction {}", reduction), OpKind::CrossEntropy,
            {arg(rng.uniform({4, 5}, -2, 2)), arg(i64({4}, {1, 0, 4, 1}))}, {{"reduction", std::string(reduction)}});
    checkOp(fmt::format("[3,2] i32 labels reduction {}", reduction), OpKind::CrossEntropy,
            {arg(rng.uniform({3, 2}, -2, 2)), arg(rng.indices({3}, 2, DType::i32))},
            {{"reduction", std::string(reduction)}});
  }
}

TEST(GradCheckComposite, CrossEntropyWithLabelSmoothing) {
  Rng rng(85);
  for (double e : {0.1, 1.0})
    checkOp(fmt::format("[4,5] label_smoothing {}", e), OpKind::CrossEntropy,
            {arg(rng.uniform({4, 5}, -2, 2)), arg(i64({4}, {1, 0, 4, 1}))}, {{"label_smoothing", e}});
}

TEST(GradCheckComposite, MseAndBceWithLogitsEachReduction) {
  Rng rng(85);
  for (const char* reduction : {"mean", "sum", "none"})
    for (const Shape& s : std::vector<Shape>{{3, 4}, {5}, {}}) {
      std::string label = fmt::format("{} reduction {}", ir::shapeStr(s), reduction);
      checkOp(label, OpKind::Mse, {arg(rng.uniform(s, -2, 2)), arg(rng.uniform(s, -2, 2))},
              {{"reduction", std::string(reduction)}});
      // Logits away from 0, where the stable form's max(x, 0) and |x| have their kinks; targets
      // in [0, 1] (soft labels, so their gradient is checked too).
      checkOp(label, OpKind::BceWithLogits, {arg(rng.awayFromZero(s, 0.1, 3)), arg(rng.uniform(s, 0, 1))},
              {{"reduction", std::string(reduction)}});
    }
}

TEST(GradCheckComposite, LayerNormOneAndTwoNormalizedDims) {
  Rng rng(86);
  struct Case {
    Shape x;
    int64_t ndim;
  };
  for (const Case& c : std::vector<Case>{{{3, 4}, 1}, {{2, 3, 4}, 2}, {{2, 1, 5}, 1}, {{2, 3, 2}, 1}}) {
    Shape norm(c.x.end() - c.ndim, c.x.end());
    std::string label = fmt::format("x {} normalized_ndim {}", ir::shapeStr(c.x), c.ndim);
    std::vector<ir::NamedAttr> attrs = {{"normalized_ndim", c.ndim}};
    checkOp(label + " no affine", OpKind::LayerNorm, {arg(rng.uniform(c.x, -2, 2))}, attrs);
    checkOp(label + " weight", OpKind::LayerNorm, {arg(rng.uniform(c.x, -2, 2)), arg(rng.uniform(norm))}, attrs);
    checkOp(label + " weight and bias", OpKind::LayerNorm,
            {arg(rng.uniform(c.x, -2, 2)), arg(rng.uniform(norm)), arg(rng.uniform(norm))}, attrs);
  }
  // A large eps changes the gradient (the variance term no longer cancels): checked once.
  checkOp("x [3,4] eps 0.5", OpKind::LayerNorm, {arg(rng.uniform({3, 4}, -2, 2))}, {{"eps", 0.5}});
}

TEST(GradCheckComposite, AttentionCausalAndScaled) {
  Rng rng(87);
  struct Case {
    Shape q, k, v;
  };
  for (const Case& c : std::vector<Case>{{{3, 4}, {5, 4}, {5, 2}},
                                         {{2, 4, 3}, {2, 4, 3}, {2, 4, 2}},
                                         {{1, 2, 3, 2}, {1, 2, 3, 2}, {1, 2, 3, 3}},
                                         {{2, 4, 2}, {2, 3, 2}, {2, 3, 2}}})
    for (bool causal : {false, true})
      for (double scale : {0.0, 0.7}) {
        if (causal && c.q[c.q.size() - 2] != c.k[c.k.size() - 2]) continue;  // causal needs L == S
        std::string label = fmt::format("q {} k {} v {} causal {} scale {}", ir::shapeStr(c.q), ir::shapeStr(c.k),
                                        ir::shapeStr(c.v), causal, scale);
        checkOp(label, OpKind::Attention,
                {arg(rng.uniform(c.q, -1.5, 1.5)), arg(rng.uniform(c.k, -1.5, 1.5)), arg(rng.uniform(c.v))},
                {{"causal", causal}, {"scale", scale}});
      }
}

TEST(GradCheckComposite, EmbeddingRepeatedIds) {
  Rng rng(88);
  checkOp("ids [5] (1,3,1,0,1) weight [4,3]", OpKind::Embedding,
          {arg(i64({5}, {1, 3, 1, 0, 1})), arg(rng.uniform({4, 3}))});
  checkOp("ids [2,3] weight [5,2]", OpKind::Embedding,
          {arg(i64({2, 3}, {4, 4, 0, 2, 4, 0})), arg(rng.uniform({5, 2}))});
  checkOp("i32 ids [3] weight [6,4] (row never used)", OpKind::Embedding,
          {arg(rng.indices({3}, 3, DType::i32)), arg(rng.uniform({6, 4}))});
}

TEST(GradCheckComposite, DropoutFixedSeed) {
  // The mask comes from random(seed, offset): a constant of the graph, identical in the forward
  // runs of the finite differences and in the backward pass.
  Rng rng(89);
  checkOp("[4,5] p 0.3 seed 7", OpKind::Dropout, {arg(rng.uniform({4, 5}))}, {{"p", 0.3}, {"seed", int64_t{7}}});
  checkOp("[2,3,4] p 0.5 seed 11 offset 40", OpKind::Dropout, {arg(rng.uniform({2, 3, 4}))},
          {{"p", 0.5}, {"seed", int64_t{11}}, {"offset", int64_t{40}}});
  checkOp("[3] p 0 seed 1", OpKind::Dropout, {arg(rng.uniform({3}))}, {{"p", 0.0}, {"seed", int64_t{1}}});
  // A training step's counter as the step operand (an integer input: no gradient of its own).
  checkOp("[4,5] p 0.3 seed 7 step 3", OpKind::Dropout, {arg(rng.uniform({4, 5})), arg(i64({}, {3}))},
          {{"p", 0.3}, {"seed", int64_t{7}}});
}

}  // namespace
}  // namespace kiln::gradcheck
