// Gradient checks of the elementwise ops: every float unary op on inputs inside its smooth domain,
// cast, the binary ops under every kind of broadcasting (size-1 dimensions, added leading
// dimensions, scalars on either side) and select with a fixed condition.
#include "GradCheck.h"

#include <gtest/gtest.h>

namespace kiln::gradcheck {
namespace {

using ir::OpKind;
using ir::Shape;

const std::vector<Shape> kUnaryShapes = {{}, {5}, {2, 1, 3}, {3, 4}};

TEST(GradCheckUnary, SmoothOpsOnTheWholeLine) {
  Rng rng(1);
  for (OpKind op : {OpKind::Neg, OpKind::Exp, OpKind::Tanh, OpKind::Sigmoid, OpKind::Sin, OpKind::Cos, OpKind::Erf})
    for (const Shape& s : kUnaryShapes) checkOp(ir::shapeStr(s), op, {arg(rng.uniform(s, -2, 2))});
}

TEST(GradCheckUnary, PositiveDomainOps) {
  Rng rng(2);
  for (OpKind op : {OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt})
    for (const Shape& s : kUnaryShapes) checkOp(ir::shapeStr(s) + " positive", op, {arg(rng.positive(s, 0.3, 3))});
}

TEST(GradCheckUnary, ReciprocalAwayFromZero) {
  Rng rng(3);
  for (const Shape& s : kUnaryShapes)
    checkOp(ir::shapeStr(s) + " both signs", OpKind::Reciprocal, {arg(rng.awayFromZero(s, 0.4, 2))});
}

TEST(GradCheckUnary, KinkedOpsAwayFromTheKink) {
  Rng rng(4);
  for (OpKind op : {OpKind::Abs, OpKind::Relu})
    for (const Shape& s : kUnaryShapes) checkOp(ir::shapeStr(s) + " both signs", op, {arg(rng.awayFromZero(s))});
}

TEST(GradCheckUnary, FloorHasZeroGradientBetweenIntegers) {
  // Values k + [0.2, 0.8]: the finite difference never crosses an integer, so it is exactly 0.
  HostTensor x = f64({2, 3}, {-2.3, -0.7, 0.2, 0.5, 1.75, 3.4});
  checkOp("[2,3] off integers", OpKind::Floor, {arg(x)});
}

TEST(GradCheckUnary, CastF64ToF64IsIdentity) {
  Rng rng(5);
  checkOp("f64->f64 [2,3]", OpKind::Cast, {arg(rng.uniform({2, 3}))}, {{"dtype", DType::f64}});
  checkOp("f64->f64 scalar", OpKind::Cast, {arg(rng.uniform({}))}, {{"dtype", DType::f64}});
}

// Operand shape pairs covering each broadcasting situation.
struct ShapePair {
  Shape a, b;
};
const std::vector<ShapePair> kBroadcastPairs = {
    {{2, 3}, {2, 3}},        // same shape
    {{3, 1}, {4}},           // both sides expand, rank differs
    {{}, {2, 3}},            // scalar on the left
    {{2, 3}, {}},            // scalar on the right
    {{2, 1, 3}, {1, 4, 1}},  // size-1 dimensions on both sides, same rank
    {{1}, {3, 1, 2}},        // a one-element vector against rank 3
    {{4, 1}, {4, 5}},        // one side expands along the last dimension
    {{1, 1}, {1, 1}},        // all dimensions of size 1
};

std::string pairLabel(const ShapePair& p) { return ir::shapeStr(p.a) + " with " + ir::shapeStr(p.b); }

TEST(GradCheckBinary, AddSubMulBroadcasting) {
  Rng rng(10);
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul})
    for (const ShapePair& p : kBroadcastPairs)
      checkOp(pairLabel(p), op, {arg(rng.uniform(p.a, -2, 2)), arg(rng.uniform(p.b, -2, 2))});
}

TEST(GradCheckBinary, DivBroadcastingDenominatorAwayFromZero) {
  Rng rng(11);
  for (const ShapePair& p : kBroadcastPairs)
    checkOp(pairLabel(p), OpKind::Div, {arg(rng.uniform(p.a, -2, 2)), arg(rng.awayFromZero(p.b, 0.5, 2))});
}

TEST(GradCheckBinary, PowPositiveBaseAnyExponent) {
  Rng rng(12);
  for (const ShapePair& p : kBroadcastPairs)
    checkOp(pairLabel(p), OpKind::Pow, {arg(rng.positive(p.a, 0.5, 2)), arg(rng.uniform(p.b, -1.5, 2.5))});
}

TEST(GradCheckBinary, MaxMinDistinctValuesBroadcasting) {
  // All values of both operands distinct: each output picks one side unambiguously.
  Rng rng(13);
  for (OpKind op : {OpKind::Max, OpKind::Min})
    for (const ShapePair& p : kBroadcastPairs) {
      std::vector<HostTensor> v = rng.distinct({p.a, p.b});
      checkOp(pairLabel(p) + " distinct", op, {arg(v[0]), arg(v[1])});
    }
}

TEST(GradCheckBinary, RandomBroadcastCompatibleShapes) {
  // Drawn shapes: a result shape of rank 0..3 (dims 1..3); each operand drops some leading
  // dimensions and turns some others into 1.
  Rng rng(15);
  auto operandShape = [&rng](const Shape& full) {
    Shape s(full.begin() + rng.below(static_cast<int64_t>(full.size()) + 1), full.end());
    for (int64_t& d : s)
      if (rng.next() < 0.4) d = 1;
    return s;
  };
  for (int draw = 0; draw < 12; ++draw) {
    Shape full;
    for (int64_t r = rng.below(4); r > 0; --r) full.push_back(1 + rng.below(3));
    ShapePair p{operandShape(full), operandShape(full)};
    std::string label = fmt::format("draw {}: {}", draw, pairLabel(p));
    checkOp(label, OpKind::Add, {arg(rng.uniform(p.a)), arg(rng.uniform(p.b))});
    checkOp(label, OpKind::Mul, {arg(rng.uniform(p.a)), arg(rng.uniform(p.b))});
    checkOp(label, OpKind::Div, {arg(rng.uniform(p.a)), arg(rng.awayFromZero(p.b, 0.5, 2))});
    std::vector<HostTensor> v = rng.distinct({p.a, p.b});
    checkOp(label + " distinct", OpKind::Max, {arg(v[0]), arg(v[1])});
  }
}

TEST(GradCheckBinary, SameValueOnBothSides) {
  // x op x: one value used twice by one node accumulates both contributions.
  Rng rng(14);
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
    HostTensor x = rng.awayFromZero({2, 3}, 0.5, 2);
    checkGradients(fmt::format("{} x with itself", ir::opName(op)), {arg(x)},
                   [op](ir::Graph& g, std::span<ir::Value* const> in) { return g.addNode(op, {in[0], in[0]}, {}); });
  }
}

TEST(GradCheckSelect, FixedConditionBroadcasting) {
  Rng rng(20);
  struct Case {
    Shape cond, a, b;
  };
  for (const Case& c : std::vector<Case>{{{2, 3}, {2, 3}, {2, 3}},
                                         {{2, 3}, {3}, {2, 1}},
                                         {{1, 3}, {2, 1}, {}},
                                         {{2, 1, 1}, {1, 3}, {2, 2, 3}}}) {
    std::string label = fmt::format("cond {} a {} b {}", ir::shapeStr(c.cond), ir::shapeStr(c.a), ir::shapeStr(c.b));
    checkOp(label, OpKind::Select, {arg(rng.mask(c.cond)), arg(rng.uniform(c.a)), arg(rng.uniform(c.b))});
  }
}

}  // namespace
}  // namespace kiln::gradcheck
