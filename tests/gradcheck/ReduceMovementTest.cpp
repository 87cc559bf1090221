// Gradient checks of the reductions (every subset of axes, negative axes, keepdim on and off,
// size-1 dimensions) and the movement ops (reshape, permute, broadcast, slice with steps, concat of
// three operands, pad, gather with repeated indices along each axis).
#include "GradCheck.h"

#include <gtest/gtest.h>

namespace kiln::gradcheck {
namespace {

using ir::Ints;
using ir::OpKind;
using ir::Shape;

struct ReduceCase {
  Shape shape;
  Ints axes;
};
const std::vector<ReduceCase> kReduceCases = {
    {{2, 3, 4}, {}},         // empty axes: everything
    {{2, 3, 4}, {0}},        {{2, 3, 4}, {1}},     {{2, 3, 4}, {2}},
    {{2, 3, 4}, {0, 2}},     {{2, 3, 4}, {1, 2}},  {{2, 3, 4}, {0, 1, 2}},
    {{2, 3, 4}, {-1}},       // negative axis
    {{3, 1, 2}, {1}},        // reducing a size-1 dimension
    {{3, 1, 2}, {0, 1}},     {{5}, {0}},
};

std::string reduceLabel(const ReduceCase& c, bool keep) {
  return fmt::format("{} axes [{}] keepdim {}", ir::shapeStr(c.shape), fmt::join(c.axes, ","), keep);
}

TEST(GradCheckReduce, SumEveryAxesSubsetAndKeepdim) {
  Rng rng(30);
  for (const ReduceCase& c : kReduceCases)
    for (bool keep : {false, true})
      checkOp(reduceLabel(c, keep), OpKind::ReduceSum, {arg(rng.uniform(c.shape))},
              {{"axes", c.axes}, {"keepdim", keep}});
}

TEST(GradCheckReduce, MaxMinDistinctValues) {
  // Distinct values: each reduced group has a unique extremum, the only point where the gradient
  // goes.
  Rng rng(31);
  for (OpKind op : {OpKind::ReduceMax, OpKind::ReduceMin})
    for (const ReduceCase& c : kReduceCases)
      for (bool keep : {false, true})
        checkOp(reduceLabel(c, keep), op, {arg(rng.distinct(c.shape))}, {{"axes", c.axes}, {"keepdim", keep}});
}

TEST(GradCheckMovement, Reshape) {
  Rng rng(40);
  struct Case {
    Shape from, to;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, {6, 4}},
                                         {{2, 3, 4}, {24}},
                                         {{4, 6}, {2, 1, 3, 4}},
                                         {{1}, {}},
                                         {{}, {1, 1}},
                                         {{3, 1, 2}, {2, 3}}})
    checkOp(ir::shapeStr(c.from) + " to " + ir::shapeStr(c.to), OpKind::Reshape, {arg(rng.uniform(c.from))},
            {{"shape", c.to}});
}

TEST(GradCheckMovement, Permute) {
  Rng rng(41);
  struct Case {
    Shape shape;
    Ints perm;
  };
  for (const Case& c : std::vector<Case>{{{3, 4}, {1, 0}},
                                         {{2, 3, 4}, {2, 0, 1}},
                                         {{2, 3, 4}, {1, 2, 0}},
                                         {{2, 1, 3, 2}, {3, 1, 0, 2}},
                                         {{2, 3}, {0, 1}}})
    checkOp(fmt::format("{} perm [{}]", ir::shapeStr(c.shape), fmt::join(c.perm, ",")), OpKind::Permute,
            {arg(rng.uniform(c.shape))}, {{"perm", c.perm}});
}

TEST(GradCheckMovement, Broadcast) {
  Rng rng(42);
  struct Case {
    Shape from, to;
  };
  for (const Case& c : std::vector<Case>{{{3, 1}, {2, 3, 4}},
                                         {{1}, {2, 3}},
                                         {{}, {2, 2}},
                                         {{4}, {3, 4}},
                                         {{2, 1, 3}, {2, 4, 3}},
                                         {{2, 3}, {2, 3}}})
    checkOp(ir::shapeStr(c.from) + " to " + ir::shapeStr(c.to), OpKind::Broadcast, {arg(rng.uniform(c.from))},
            {{"shape", c.to}});
}

TEST(GradCheckMovement, SliceWithSteps) {
  Rng rng(43);
  struct Case {
    Shape shape;
    Ints starts, ends, steps;
  };
  for (const Case& c : std::vector<Case>{{{5, 6}, {1, 0}, {5, 6}, {2, 1}},
                                         {{5, 6}, {0, 1}, {5, 6}, {2, 2}},
                                         {{5, 6}, {1, 2}, {4, 5}, {1, 1}},
                                         {{4, 3, 5}, {0, 1, 1}, {4, 3, 4}, {2, 1, 2}},
                                         {{7}, {2}, {7}, {2}},
                                         {{3, 4}, {1, 0}, {2, 4}, {1, 3}}})
    checkOp(fmt::format("{} starts [{}] ends [{}] steps [{}]", ir::shapeStr(c.shape), fmt::join(c.starts, ","),
                        fmt::join(c.ends, ","), fmt::join(c.steps, ",")),
            OpKind::Slice, {arg(rng.uniform(c.shape))}, {{"starts", c.starts}, {"ends", c.ends}, {"steps", c.steps}});
}

TEST(GradCheckMovement, ConcatOfThree) {
  Rng rng(44);
  struct Case {
    Shape a, b, c;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{{{2, 3}, {1, 3}, {3, 3}, 0},
                                         {{2, 1}, {2, 3}, {2, 2}, 1},
                                         {{2, 1}, {2, 3}, {2, 2}, -1},
                                         {{2, 2, 3}, {2, 1, 3}, {2, 2, 3}, 1},
                                         {{3}, {1}, {2}, 0}})
    checkOp(fmt::format("{} {} {} axis {}", ir::shapeStr(c.a), ir::shapeStr(c.b), ir::shapeStr(c.c), c.axis),
            OpKind::Concat, {arg(rng.uniform(c.a)), arg(rng.uniform(c.b)), arg(rng.uniform(c.c))},
            {{"axis", c.axis}});
}

TEST(GradCheckMovement, ConcatOfOneValueTwice) {
  // concat(x, y, x): x's gradient is the sum of two slices of the output gradient.
  Rng rng(45);
  checkGradients("concat x, y, x axis 0", {arg(rng.uniform({2, 3})), arg(rng.uniform({1, 3}))},
                 [](ir::Graph& g, std::span<ir::Value* const> in) {
                   return node(g, OpKind::Concat, {in[0], in[1], in[0]}, {{"axis", int64_t{0}}});
                 });
}

TEST(GradCheckMovement, Pad) {
  Rng rng(46);
  struct Case {
    Shape shape;
    Ints low, high;
    double value;
  };
  for (const Case& c : std::vector<Case>{{{2, 3}, {1, 0}, {2, 1}, 0.0},
                                         {{2, 3}, {0, 2}, {0, 0}, 0.5},
                                         {{3}, {2}, {1}, -1.0},
                                         {{1, 2, 2}, {1, 1, 0}, {0, 1, 2}, 0.0}})
    checkOp(fmt::format("{} low [{}] high [{}] value {}", ir::shapeStr(c.shape), fmt::join(c.low, ","),
                        fmt::join(c.high, ","), c.value),
            OpKind::Pad, {arg(rng.uniform(c.shape))}, {{"low", c.low}, {"high", c.high}, {"value", c.value}});
}

TEST(GradCheckMovement, GatherRepeatedIndices) {
  // Repeated indices: the rows they pick accumulate several gradient contributions.
  Rng rng(47);
  checkOp("[5,3] axis 0 indices [4] (1,3,1,4)", OpKind::Gather,
          {arg(rng.uniform({5, 3})), arg(i64({4}, {1, 3, 1, 4}))}, {{"axis", int64_t{0}}});
  checkOp("[3,4] axis 1 indices [2,2] (0,2,2,2)", OpKind::Gather,
          {arg(rng.uniform({3, 4})), arg(i64({2, 2}, {0, 2, 2, 2}))}, {{"axis", int64_t{1}}});
  checkOp("[2,3,4] axis 2 scalar index 3", OpKind::Gather, {arg(rng.uniform({2, 3, 4})), arg(i64({}, {3}))},
          {{"axis", int64_t{2}}});
  checkOp("[4,2,3] axis 1 indices [5] (1,1,0,1,1)", OpKind::Gather,
          {arg(rng.uniform({4, 2, 3})), arg(i64({5}, {1, 1, 0, 1, 1}))}, {{"axis", int64_t{1}}});
  checkOp("[6,2] axis 0 i32 indices [3,2]", OpKind::Gather,
          {arg(rng.uniform({6, 2})), arg(rng.indices({3, 2}, 6, DType::i32))}, {{"axis", int64_t{0}}});
}

}  // namespace
}  // namespace kiln::gradcheck
