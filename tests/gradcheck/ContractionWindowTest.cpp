// Gradient checks of matmul (batch dimensions that broadcast both ways, transpose flags), conv2d
// (stride, padding, dilation, groups, asymmetric settings) and the pooling windows (overlapping and
// padded windows; distinct values so a max is never tied).
#include "GradCheck.h"

#include <gtest/gtest.h>

namespace kiln::gradcheck {
namespace {

using ir::Ints;
using ir::OpKind;
using ir::Shape;

TEST(GradCheckMatMul, BatchBroadcasting) {
  Rng rng(50);
  struct Case {
    Shape a, b;
  };
  for (const Case& c : std::vector<Case>{{{3, 4}, {4, 2}},
                                         {{2, 1, 3, 4}, {5, 4, 2}},  // batch [2,1] with [5]
                                         {{2, 3, 4}, {4, 5}},        // rank 3 with a matrix
                                         {{3, 4}, {2, 4, 5}},        // a matrix with rank 3
                                         {{1, 3, 4}, {2, 4, 2}},     // batch 1 against 2
                                         {{2, 1, 2, 3}, {1, 3, 3, 2}},
                                         {{1, 4}, {4, 1}},           // M = N = 1
                                         {{3, 1}, {1, 5}}})          // K = 1
    checkOp(ir::shapeStr(c.a) + " x " + ir::shapeStr(c.b), OpKind::MatMul,
            {arg(rng.uniform(c.a)), arg(rng.uniform(c.b))});
}

// Every combination of the transpose flags, with batch dimensions that broadcast both ways, so a
// rule that transposes the wrong adjoint (or forgets a flag) fails on the non-square operands.
TEST(GradCheckMatMul, TransposeFlags) {
  Rng rng(52);
  struct Case {
    Shape a, b;  // as stored: [.., K, M] when transpose_a, [.., N, K] when transpose_b
    bool ta, tb;
  };
  for (const Case& c : std::vector<Case>{{{4, 3}, {4, 2}, true, false},
                                         {{3, 4}, {2, 4}, false, true},
                                         {{4, 3}, {2, 4}, true, true},
                                         {{2, 1, 4, 3}, {5, 4, 2}, true, false},
                                         {{3, 4}, {2, 5, 4}, false, true},
                                         {{1, 4, 3}, {2, 2, 4}, true, true},
                                         {{2, 1, 3}, {1, 4, 1}, true, true}})  // K = 1, M = 3, N = 4
    checkOp(fmt::format("{} x {} transpose_a={} transpose_b={}", ir::shapeStr(c.a), ir::shapeStr(c.b), c.ta, c.tb),
            OpKind::MatMul, {arg(rng.uniform(c.a)), arg(rng.uniform(c.b))},
            {{"transpose_a", c.ta}, {"transpose_b", c.tb}});
}

// A flagged matmul of one value with itself (x xᵀ and xᵀ x): both adjoints land on the same value.
TEST(GradCheckMatMul, GramMatrices) {
  Rng rng(53);
  for (bool ta : {false, true})
    checkGradients(fmt::format("matmul(x, x, transpose_a={}, transpose_b={})", ta, !ta), {arg(rng.uniform({3, 2}))},
                   [ta](ir::Graph& g, std::span<ir::Value* const> in) {
                     return node(g, OpKind::MatMul, {in[0], in[0]}, {{"transpose_a", ta}, {"transpose_b", !ta}});
                   });
}

TEST(GradCheckMatMul, SquareOfOneMatrix) {
  Rng rng(51);
  checkGradients("matmul x x (one value as both operands)", {arg(rng.uniform({3, 3}))},
                 [](ir::Graph& g, std::span<ir::Value* const> in) { return node(g, OpKind::MatMul, {in[0], in[0]}); });
}

struct ConvCase {
  Shape x, w;
  Ints stride, padding, dilation;
  int64_t groups;
};

TEST(GradCheckConv2d, StridePaddingDilationGroups) {
  Rng rng(60);
  for (const ConvCase& c : std::vector<ConvCase>{
           {{1, 2, 4, 4}, {3, 2, 2, 2}, {1, 1}, {0, 0}, {1, 1}, 1},  // plain
           {{1, 2, 5, 5}, {2, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},  // stride 2, padding 1
           {{1, 2, 5, 5}, {2, 2, 2, 2}, {1, 1}, {0, 0}, {2, 2}, 1},  // dilation 2
           {{1, 2, 5, 5}, {2, 2, 2, 2}, {2, 2}, {1, 1}, {2, 2}, 1},  // all three
           {{1, 4, 3, 3}, {4, 2, 2, 2}, {1, 1}, {1, 1}, {1, 1}, 2},  // groups 2
           {{2, 2, 4, 3}, {2, 1, 2, 2}, {2, 1}, {1, 0}, {1, 2}, 2},  // groups 2, batch 2, asymmetric
           {{2, 1, 3, 4}, {3, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // 1x1 kernel
           {{1, 3, 5, 4}, {2, 3, 3, 1}, {1, 2}, {1, 0}, {2, 1}, 1},  // non-square kernel
       }) {
    std::string label = fmt::format("x {} w {} stride [{}] padding [{}] dilation [{}] groups {}", ir::shapeStr(c.x),
                                    ir::shapeStr(c.w), fmt::join(c.stride, ","), fmt::join(c.padding, ","),
                                    fmt::join(c.dilation, ","), c.groups);
    checkOp(label, OpKind::Conv2d, {arg(rng.uniform(c.x)), arg(rng.uniform(c.w))},
            {{"stride", c.stride}, {"padding", c.padding}, {"dilation", c.dilation}, {"groups", c.groups}});
  }
}

struct PoolCase {
  Shape x;
  Ints kernel, stride, padding;
};
const std::vector<PoolCase> kPoolCases = {
    {{1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}},  // disjoint windows
    {{1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}},  // overlapping, padding 1
    {{2, 1, 4, 5}, {2, 3}, {1, 2}, {1, 1}},  // non-square, padding 1, overlap along H
    {{1, 1, 3, 3}, {3, 3}, {1, 1}, {1, 1}},  // every window overlaps the padding
    {{1, 3, 4, 2}, {2, 2}, {1, 1}, {0, 1}},  // padding along W only
};

std::string poolLabel(const PoolCase& c) {
  return fmt::format("x {} kernel [{}] stride [{}] padding [{}]", ir::shapeStr(c.x), fmt::join(c.kernel, ","),
                     fmt::join(c.stride, ","), fmt::join(c.padding, ","));
}

TEST(GradCheckPool, MaxPoolDistinctValues) {
  // Distinct values (some negative, so a padded -inf never wins and a real element always does).
  Rng rng(70);
  for (const PoolCase& c : kPoolCases)
    checkOp(poolLabel(c), OpKind::MaxPool2d, {arg(rng.distinct(c.x))},
            {{"kernel", c.kernel}, {"stride", c.stride}, {"padding", c.padding}});
}

TEST(GradCheckPool, AvgPoolWithAndWithoutPaddingInTheCount) {
  Rng rng(71);
  for (const PoolCase& c : kPoolCases)
    for (bool include : {true, false})
      checkOp(fmt::format("{} count_include_pad {}", poolLabel(c), include), OpKind::AvgPool2d,
              {arg(rng.uniform(c.x))},
              {{"kernel", c.kernel}, {"stride", c.stride}, {"padding", c.padding}, {"count_include_pad", include}});
}

}  // namespace
}  // namespace kiln::gradcheck
