// The gradient helpers autodiff emits: hand-computed values, and adjoint identities
// <f(x), dy> == <x, f_grad(dy)> (for a linear f; max_pool2d is piecewise linear and positively
// homogeneous, so the identity holds for it too) checked in f64 on random tensors with odd sizes.
#include <cmath>
#include <random>

#include "InterpTestUtil.h"

namespace kiln::interp::testing {
namespace {

using ir::Ints;
using ir::NamedAttr;

/// Uniform values in [-1, 1) from a fixed seed.
HostTensor randomF64(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(ir::numElements(shape)));
  for (double& e : v) e = dist(gen);
  return f64(std::move(shape), v);
}

double dot(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.at(i) * b.at(i);
  return s;
}

void expectSameInner(double a, double b) {
  EXPECT_NE(a, 0.0);  // a zero product would make the identity vacuous
  EXPECT_LE(std::abs(a - b), 1e-12 * std::max(std::abs(a), std::abs(b))) << a << " vs " << b;
}

/// A graph over named inputs: node() appends ops, run() evaluates with runPrimitives.
struct GraphRun {
  ir::Graph g;
  TensorMap inputs;
  ir::Value* input(const std::string& name, const HostTensor& t) {
    inputs.insert_or_assign(name, t);
    return g.addInput(name, ir::TensorType{t.dtype(), t.shape()});
  }
  ir::Value* node(OpKind op, std::vector<ir::Value*> operands, std::vector<NamedAttr> attrs, SourceLoc loc = {}) {
    return g.addNode(op, std::move(operands), attrs, loc);
  }
  TensorMap run() { return runPrimitives(g, inputs, {}); }
};

// ---- stop_gradient, slice_grad, scatter_add ----------------------------------------------------

TEST(InterpStopGradient, IsTheIdentity) {
  expectValues(evalOp(OpKind::StopGradient, {f32({3}, {1.5, kNaN, -kInf})}), {1.5, kNaN, -kInf});
  EXPECT_EQ(ints(evalOp(OpKind::StopGradient, {i64({2}, {int64_t{1} << 60, -3})})),
            (std::vector<int64_t>{int64_t{1} << 60, -3}));
}

TEST(InterpSliceGrad, PlacesDyIntoZeros) {
  // dy [2, 3] taken from a [4, 6] tensor at rows 0, 2 and columns 1, 3, 5.
  HostTensor r = evalOp(OpKind::SliceGrad, {f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                        {{"shape", Ints{4, 6}}, {"starts", Ints{0, 1}}, {"steps", Ints{2, 2}}});
  expectType(r, DType::f32, {4, 6});
  expectValues(r, {0, 1, 0, 2, 0, 3,  //
                   0, 0, 0, 0, 0, 0,  //
                   0, 4, 0, 5, 0, 6,  //
                   0, 0, 0, 0, 0, 0});
}

TEST(InterpSliceGrad, IntegersStayExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  HostTensor r = evalOp(OpKind::SliceGrad, {i64({1}, {big})}, {{"shape", Ints{3}}, {"starts", Ints{2}}, {"steps", Ints{1}}});
  EXPECT_EQ(ints(r), (std::vector<int64_t>{0, 0, big}));
}

TEST(InterpSliceGrad, IsTheAdjointOfSlice) {
  GraphRun t;
  ir::Value* x = t.input("x", randomF64({3, 5, 7}, 1));
  ir::Value* dy = t.input("dy", randomF64({2, 2, 3}, 2));
  t.g.addOutput("y", t.node(OpKind::Slice, {x}, {{"starts", Ints{1, 0, 0}}, {"ends", Ints{3, 5, 7}}, {"steps", Ints{1, 3, 3}}}));
  t.g.addOutput("dx", t.node(OpKind::SliceGrad, {dy},
                             {{"shape", Ints{3, 5, 7}}, {"starts", Ints{1, 0, 0}}, {"steps", Ints{1, 3, 3}}}));
  TensorMap r = t.run();
  expectSameInner(dot(r.at("y"), t.inputs.at("dy")), dot(t.inputs.at("x"), r.at("dx")));
}

TEST(InterpScatterAdd, RepeatedIndicesAddUp) {
  HostTensor r = evalOp(OpKind::ScatterAdd, {i64({4}, {1, 1, 0, 1}), f32({4}, {1, 2, 4, 8})},
                        {{"axis", int64_t{0}}, {"dim_size", int64_t{3}}});
  expectType(r, DType::f32, {3});
  expectValues(r, {4, 11, 0});
}

TEST(InterpScatterAdd, InnerAxisAndTrailingDimensions) {
  // updates [1, 2, 2]: indices [2] along axis 1 of a [1, 3, 2] result.
  HostTensor r = evalOp(OpKind::ScatterAdd, {i32({2}, {2, 2}), f32({1, 2, 2}, {1, 2, 3, 4})},
                        {{"axis", int64_t{1}}, {"dim_size", int64_t{3}}});
  expectType(r, DType::f32, {1, 3, 2});
  expectValues(r, {0, 0, 0, 0, 4, 6});
}

TEST(InterpScatterAdd, IntegersWrap) {
  HostTensor r = evalOp(OpKind::ScatterAdd, {i64({2}, {0, 0}), i32({2}, {INT32_MAX, 1})},
                        {{"axis", int64_t{0}}, {"dim_size", int64_t{1}}});
  EXPECT_EQ(ints(r), (std::vector<int64_t>{INT32_MIN}));
}

TEST(InterpScatterAdd, IsTheAdjointOfGatherWithRepeatedIndices) {
  GraphRun t;
  ir::Value* x = t.input("x", randomF64({2, 5, 3}, 3));
  ir::Value* idx = t.input("idx", i64({2, 4}, {0, 4, 4, 1, 2, 0, 0, 0}));
  ir::Value* dy = t.input("dy", randomF64({2, 2, 4, 3}, 4));
  t.g.addOutput("y", t.node(OpKind::Gather, {x, idx}, {{"axis", int64_t{1}}}));
  t.g.addOutput("dx", t.node(OpKind::ScatterAdd, {idx, dy}, {{"axis", int64_t{1}}, {"dim_size", int64_t{5}}}));
  TensorMap r = t.run();
  expectType(r.at("dx"), DType::f64, {2, 5, 3});
  expectSameInner(dot(r.at("y"), t.inputs.at("dy")), dot(t.inputs.at("x"), r.at("dx")));
}

TEST(InterpScatterAdd, OutOfRangeIndexNamesTheOpTheIndexAndTheLocation) {
  GraphRun t;
  ir::Value* idx = t.input("idx", i64({2}, {1, 3}));
  ir::Value* upd = t.input("upd", f32({2}, {1, 2}));
  t.g.addOutput("out", t.node(OpKind::ScatterAdd, {idx, upd}, {{"axis", int64_t{0}}, {"dim_size", int64_t{3}}},
                              SourceLoc{"model.cpp", 21, 7}));
  std::string msg = errorOf([&] { t.run(); });
  EXPECT_NE(msg.find("model.cpp:21:7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scatter_add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 3)"), std::string::npos) << msg;
  t.inputs.insert_or_assign("idx", i64({2}, {0, -2}));
  msg = errorOf([&] { t.run(); });
  EXPECT_NE(msg.find("index -2"), std::string::npos) << msg;
}

// ---- conv2d_grad_input, conv2d_grad_weight -----------------------------------------------------

TEST(InterpConv2dGrad, HandComputedStrideOne) {
  // x = 1..9 as [1,1,3,3], w = [[1,2],[3,4]], dy = ones [1,1,2,2].
  HostTensor w = f32({1, 1, 2, 2}, {1, 2, 3, 4}), ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  // dx[p] sums the weights that touch p: the corners see one tap, the centre all four.
  HostTensor dx = evalOp(OpKind::Conv2dGradInput, {ones, w}, {{"input_shape", Ints{1, 1, 3, 3}}});
  expectType(dx, DType::f32, {1, 1, 3, 3});
  expectValues(dx, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  // A one-hot dy puts a copy of w at its window.
  expectValues(evalOp(OpKind::Conv2dGradInput, {f32({1, 1, 2, 2}, {0, 0, 0, 1}), w}, {{"input_shape", Ints{1, 1, 3, 3}}}),
               {0, 0, 0, 0, 1, 2, 0, 3, 4});
  // dw[i][j] sums the 2x2 block of x starting at (i, j).
  HostTensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor dw = evalOp(OpKind::Conv2dGradWeight, {x, ones}, {{"weight_shape", Ints{1, 1, 2, 2}}});
  expectType(dw, DType::f32, {1, 1, 2, 2});
  expectValues(dw, {12, 16, 24, 28});
}

TEST(InterpConv2dGrad, StrideAndPaddingSkipPositions) {
  // 1x1 kernel, stride 2, padding 1 on a 3x3 input: the 3x3 taps sit at rows and columns -1, 1, 3;
  // only (1,1) is inside, so only dy[1][1] = 5 reaches dx, and only x[1][1] = 5 reaches dw.
  std::vector<NamedAttr> attrs{{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
  std::vector<NamedAttr> in = attrs, wt = attrs;
  in.push_back({"input_shape", Ints{1, 1, 3, 3}});
  wt.push_back({"weight_shape", Ints{1, 1, 1, 1}});
  HostTensor dy = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectValues(evalOp(OpKind::Conv2dGradInput, {dy, f32({1, 1, 1, 1}, {10})}, in), {0, 0, 0, 0, 50, 0, 0, 0, 0});
  expectValues(evalOp(OpKind::Conv2dGradWeight, {f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), dy}, wt), {25});
}

TEST(InterpConv2dGrad, F16AccumulatesWideAndRoundsOnce) {
  // 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly; rounding after each add would stay at 1.
  const double u = 1.0 / 2048;
  HostTensor x = tensor(DType::f16, {1, 1, 1, 3}, {1, u, u}), dy = tensor(DType::f16, {1, 1, 1, 3}, {1, 1, 1});
  HostTensor dw = evalOp(OpKind::Conv2dGradWeight, {x, dy}, {{"weight_shape", Ints{1, 1, 1, 1}}});
  expectType(dw, DType::f16, {1, 1, 1, 1});
  expectValues(dw, {1.0009765625});
}

struct ConvCase {
  int64_t groups, outChannels;
};

class InterpConv2dAdjoint : public ::testing::TestWithParam<ConvCase> {};

TEST_P(InterpConv2dAdjoint, InnerProductsAgree) {
  const ConvCase c = GetParam();
  // batch 2, 3 channels, 7x9 input, 3x2 kernel, stride 2, padding 1, dilation 2.
  const Ints xShape{2, 3, 7, 9}, wShape{c.outChannels, 3 / c.groups, 3, 2};
  std::vector<NamedAttr> conv{{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"dilation", Ints{2, 2}},
                              {"groups", c.groups}};
  GraphRun t;
  ir::Value* x = t.input("x", randomF64(xShape, 10 + c.groups));
  ir::Value* w = t.input("w", randomF64(wShape, 20 + c.outChannels));
  // OH = (7 + 2 - 4 - 1)/2 + 1 = 3, OW = (9 + 2 - 2 - 1)/2 + 1 = 5.
  ir::Value* dy = t.input("dy", randomF64({2, c.outChannels, 3, 5}, 30));
  std::vector<NamedAttr> gradInput = conv, gradWeight = conv;
  gradInput.push_back({"input_shape", xShape});
  gradWeight.push_back({"weight_shape", wShape});
  t.g.addOutput("y", t.node(OpKind::Conv2d, {x, w}, conv));
  t.g.addOutput("dx", t.node(OpKind::Conv2dGradInput, {dy, w}, gradInput));
  t.g.addOutput("dw", t.node(OpKind::Conv2dGradWeight, {x, dy}, gradWeight));
  TensorMap r = t.run();
  expectType(r.at("y"), DType::f64, {2, c.outChannels, 3, 5});
  expectType(r.at("dx"), DType::f64, xShape);
  expectType(r.at("dw"), DType::f64, wShape);
  double forward = dot(r.at("y"), t.inputs.at("dy"));
  expectSameInner(forward, dot(t.inputs.at("x"), r.at("dx")));
  expectSameInner(forward, dot(t.inputs.at("w"), r.at("dw")));
}

INSTANTIATE_TEST_SUITE_P(Groups, InterpConv2dAdjoint,
                         ::testing::Values(ConvCase{1, 5}, ConvCase{3, 3}, ConvCase{3, 6}),
                         [](const auto& info) {
                           return "groups" + std::to_string(info.param.groups) + "_out" +
                                  std::to_string(info.param.outChannels);
                         });

// ---- max_pool2d_grad, avg_pool2d_grad -----------------------------------------------------------

std::vector<NamedAttr> window(Ints kernel, Ints stride, Ints padding = {0, 0}) {
  return {{"kernel", std::move(kernel)}, {"stride", std::move(stride)}, {"padding", std::move(padding)}};
}

TEST(InterpMaxPool2dGrad, TiesGoToTheFirstMaxAndOverlapsAddUp) {
  // Windows (kernel 2, stride 1): {1,5,5,2} → (0,1); {5,5,2,5} → (0,1); {5,2,0,5} → (1,0);
  // {2,5,5,3} → (1,2).
  HostTensor x = f32({1, 1, 3, 3}, {1, 5, 5, 5, 2, 5, 0, 5, 3});
  HostTensor dx = evalOp(OpKind::MaxPool2dGrad, {x, f32({1, 1, 2, 2}, {1, 2, 4, 8})}, window({2, 2}, {1, 1}));
  expectType(dx, DType::f32, {1, 1, 3, 3});
  expectValues(dx, {0, 3, 0, 4, 0, 8, 0, 0, 0});
}

TEST(InterpMaxPool2dGrad, FirstNaNIsTheMaximum) {
  HostTensor x = f32({1, 1, 2, 2}, {1, kNaN, kNaN, 3});
  expectValues(evalOp(OpKind::MaxPool2dGrad, {x, f32({1, 1, 1, 1}, {5})}, window({2, 2}, {1, 1})), {0, 5, 0, 0});
  // A NaN after a larger value still wins.
  HostTensor row = f32({1, 1, 1, 2}, {9, kNaN});
  expectValues(evalOp(OpKind::MaxPool2dGrad, {row, f32({1, 1, 1, 1}, {5})}, window({1, 2}, {1, 1})), {0, 5});
}

TEST(InterpMaxPool2dGrad, PaddingNeverWins) {
  // All -inf: the padding ties the input at -inf, yet each window's dy lands on its one real element.
  HostTensor x = f32({1, 1, 2, 2}, {-kInf, -kInf, -kInf, -kInf});
  HostTensor dx = evalOp(OpKind::MaxPool2dGrad, {x, f32({1, 1, 2, 2}, {1, 2, 3, 4})}, window({2, 2}, {2, 2}, {1, 1}));
  expectValues(dx, {1, 2, 3, 4});
}

TEST(InterpMaxPool2dGrad, IsTheAdjointOfMaxPoolAtX) {
  GraphRun t;
  ir::Value* x = t.input("x", randomF64({2, 3, 7, 9}, 5));
  // OH = (7 + 2 - 3)/2 + 1 = 4, OW = (9 + 2 - 2)/2 + 1 = 5.
  ir::Value* dy = t.input("dy", randomF64({2, 3, 4, 5}, 6));
  auto attrs = window({3, 2}, {2, 2}, {1, 1});
  t.g.addOutput("y", t.node(OpKind::MaxPool2d, {x}, attrs));
  t.g.addOutput("dx", t.node(OpKind::MaxPool2dGrad, {x, dy}, attrs));
  TensorMap r = t.run();
  expectSameInner(dot(r.at("y"), t.inputs.at("dy")), dot(t.inputs.at("x"), r.at("dx")));
}

TEST(InterpAvgPool2dGrad, CountIncludePadChangesTheDivisor) {
  // Kernel 2, stride 2, padding 1 on 3x3: windows hold {1}, {2,3}, {4,7}, {5,6,8,9}.
  auto attrs = window({2, 2}, {2, 2}, {1, 1});
  attrs.push_back({"input_shape", Ints{1, 1, 3, 3}});
  HostTensor ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  HostTensor with = evalOp(OpKind::AvgPool2dGrad, {ones}, attrs);
  expectType(with, DType::f32, {1, 1, 3, 3});
  expectValues(with, std::vector<double>(9, 0.25));
  attrs.push_back({"count_include_pad", false});
  expectValues(evalOp(OpKind::AvgPool2dGrad, {ones}, attrs), {1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.5, 0.25, 0.25});
}

TEST(InterpAvgPool2dGrad, OverlappingWindowsAddUp) {
  auto attrs = window({2, 2}, {1, 1});
  attrs.push_back({"input_shape", Ints{1, 1, 3, 3}});
  HostTensor dx = evalOp(OpKind::AvgPool2dGrad, {f32({1, 1, 2, 2}, {4, 4, 4, 4})}, attrs);
  expectValues(dx, {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

class InterpAvgPool2dAdjoint : public ::testing::TestWithParam<bool> {};

TEST_P(InterpAvgPool2dAdjoint, InnerProductsAgree) {
  GraphRun t;
  ir::Value* x = t.input("x", randomF64({2, 3, 7, 9}, 7));
  // Kernel 3x2, stride 2, padding 1: OH = 4, OW = 5; the last row of windows is clipped by the
  // input edge (rows 5..7 of 0..6).
  ir::Value* dy = t.input("dy", randomF64({2, 3, 4, 5}, 8));
  auto attrs = window({3, 2}, {2, 2}, {1, 1});
  attrs.push_back({"count_include_pad", GetParam()});
  auto gradAttrs = attrs;
  gradAttrs.push_back({"input_shape", Ints{2, 3, 7, 9}});
  t.g.addOutput("y", t.node(OpKind::AvgPool2d, {x}, attrs));
  t.g.addOutput("dx", t.node(OpKind::AvgPool2dGrad, {dy}, gradAttrs));
  TensorMap r = t.run();
  expectSameInner(dot(r.at("y"), t.inputs.at("dy")), dot(t.inputs.at("x"), r.at("dx")));
}

INSTANTIATE_TEST_SUITE_P(CountIncludePad, InterpAvgPool2dAdjoint, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "included" : "excluded"; });

}  // namespace
}  // namespace kiln::interp::testing
