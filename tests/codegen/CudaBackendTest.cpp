// The CUDA backend against the reference interpreter (label gpu; every test skips without a
// device): every elementwise primitive on awkward shapes in f32, f16, bf16 and f64; integer and
// bool ops and every cast; reductions over every axis (a 10000-row column sum and a 10000-wide row
// sum among them); softmax, log-softmax, layer norm and fused views; matmul in every transposition
// with and without a fused bias + ReLU, through cuBLASLt and through the generated GEMM;
// convolutions and both their gradients with strides, padding, dilation and groups; pooling and
// its gradients; gather, scatter_add, one_hot, concat, argmax/argmin, slice_grad and random draws;
// and random graphs.
//
// NVRTC compiles each program once (a few hundred milliseconds), so the cases of one kind share one
// graph — one output per case, named after it ("exp_f16_33x7x5") — and one program. Tolerances:
// CudaTestSupport.h.
#include "CudaTestSupport.h"
#include "RandomGraphs.h"

#include "ir/Printer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

namespace kiln::testing {
namespace {

using ir::Ints;

constexpr DType kFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

std::string at(DType t, const ir::Shape& s) { return fmt::format("{}_{}", dtypeName(t), shapeTag(s)); }

/// "a1", "am1" for axis -1: value names take letters, digits, '_' and '.'.
std::string axisTag(int64_t axis) { return axis < 0 ? fmt::format("am{}", -axis) : fmt::format("a{}", axis); }

TEST_F(CudaBackendTest, ElementwiseOpsOnAwkwardShapes) {
  const char* unary[] = {"neg",  "abs",     "exp", "log", "sqrt", "rsqrt", "reciprocal",
                         "tanh", "sigmoid", "sin", "cos", "erf",  "relu",  "floor"};
  const char* binary[] = {"add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"};
  const ir::Shape shapes[] = {{1}, {7}, {33}, {257}, {1000}, {3, 1000}, {33, 7, 5}};
  for (DType t : kFloats) {
    ir::Graph g(fmt::format("elementwise_{}", dtypeName(t)));
    for (const ir::Shape& s : shapes) {
      ir::Value* x = g.addInput("x_" + at(t, s), {t, s});
      ir::Value* z = g.addInput("z_" + at(t, s), {t, s});
      for (const char* op : unary) g.addOutput(fmt::format("{}_{}", op, at(t, s)), node(g, op, {x}));
      for (const char* op : binary) g.addOutput(fmt::format("{}_{}", op, at(t, s)), node(g, op, {x, z}));
      // A broadcast operand: one value per last-dimension position.
      ir::Value* row = g.addInput("row_" + at(t, s), {t, {s.back()}});
      g.addOutput("mul_row_" + at(t, s), node(g, "mul", {x, row}));
    }
    checkAgainstInterpreter(g, randomInputs(g, 11), g.name());
  }
}

TEST_F(CudaBackendTest, IntegerBoolAndCastOps) {
  for (const ir::Shape& s : {ir::Shape{1}, ir::Shape{7}, ir::Shape{257}, ir::Shape{5, 33}}) {
    ir::Graph g("integer_bool_cast_" + shapeTag(s));
    for (DType t : {DType::i32, DType::i64}) {
      ir::Value* x = g.addInput("x_" + at(t, s), {t, s});
      ir::Value* z = g.addInput("z_" + at(t, s), {t, s});
      // Inputs are in [0, 4): division by zero (0 by the ops' definition) comes up too.
      for (const char* op : {"add", "sub", "mul", "div", "max", "min"})
        g.addOutput(fmt::format("{}_{}", op, at(t, s)), node(g, op, {x, z}));
      for (const char* op : {"neg", "abs", "relu"}) g.addOutput(fmt::format("{}_{}", op, at(t, s)), node(g, op, {x}));
    }
    for (DType from : kAllDTypes) {
      ir::Value* c = g.addInput("c_" + at(from, s), {from, s});
      for (DType to : kAllDTypes)
        g.addOutput(fmt::format("cast_{}_to_{}", at(from, s), dtypeName(to)), node(g, "cast", {c}, {{"dtype", to}}));
    }
    // f64 values cast to f16 and bf16 round once (not through f32 twice).
    ir::Value* fine = g.addInput("fine_f64_" + shapeTag(s), {DType::f64, s});
    ir::Value* scaled = node(
        g, "mul",
        {fine,
         node(g, "constant", {}, {{"shape", Ints{}}, {"dtype", DType::f64}, {"value", ir::Floats{1.0009765625 / 3}}})});
    for (DType to : {DType::f16, DType::bf16, DType::f32})
      g.addOutput(fmt::format("cast_fine_{}_to_{}", shapeTag(s), dtypeName(to)),
                  node(g, "cast", {scaled}, {{"dtype", to}}));
    ir::Value* x = g.addInput("bx_" + shapeTag(s), {DType::f32, s});
    ir::Value* z = g.addInput("bz_" + shapeTag(s), {DType::f32, s});
    ir::Value* a = node(g, "lt", {x, z});
    ir::Value* c = node(g, "or", {a, node(g, "gt", {x, z})});
    ir::Value* d = node(g, "not", {c});
    g.addOutput("not_" + shapeTag(s), d);
    g.addOutput("and_" + shapeTag(s), node(g, "and", {a, d}));
    g.addOutput("select_" + shapeTag(s), node(g, "select", {c, x, z}));
    checkAgainstInterpreter(g, randomInputs(g, 13), g.name(), exactly());
  }
}

TEST_F(CudaBackendTest, ReductionsOverEveryAxis) {
  const ir::Shape shapes[] = {{1000}, {7, 33}, {257, 3}, {5, 7, 9}, {2, 1000}, {10000, 7}, {7, 10000}};
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64}) {
    ir::Graph g(fmt::format("reductions_{}", dtypeName(t)));
    for (const ir::Shape& s : shapes) {
      ir::Value* x = g.addInput("x_" + at(t, s), {t, s});
      for (size_t axis = 0; axis <= s.size(); ++axis) {  // axis == rank: every axis
        Ints axes;
        for (size_t d = 0; d < s.size(); ++d)
          if (axis == s.size() || d == axis) axes.push_back(static_cast<int64_t>(d));
        for (const char* op : {"reduce_sum", "reduce_max", "reduce_min"})
          g.addOutput(fmt::format("{}_{}_{}", op, at(t, s), axis == s.size() ? "all" : fmt::format("a{}", axis)),
                      node(g, op, {x}, {{"axes", axes}}));
      }
      // keepdim over two axes of a rank-3 tensor: the conv-like bias-gradient form.
      if (s.size() == 3)
        g.addOutput("reduce_sum_keepdim_" + at(t, s),
                    node(g, "reduce_sum", {x}, {{"axes", Ints{0, 2}}, {"keepdim", true}}));
    }
    checkAgainstInterpreter(g, randomInputs(g, 17), g.name());
  }
}

TEST_F(CudaBackendTest, SoftmaxLayerNormAndFusedViews) {
  for (DType t : {DType::f32, DType::f16}) {
    ir::Graph g(fmt::format("fused_{}", dtypeName(t)));
    for (const ir::Shape& s : {ir::Shape{7, 33}, ir::Shape{257, 10}, ir::Shape{3, 1000}, ir::Shape{2, 3, 70}}) {
      ir::Value* x = g.addInput("x_" + at(t, s), {t, s});
      g.addOutput("softmax_" + at(t, s), node(g, "softmax", {x}, {{"axis", int64_t{-1}}}));
      g.addOutput("log_softmax_" + at(t, s), node(g, "log_softmax", {x}, {{"axis", int64_t{-1}}}));
      g.addOutput("softmax_axis0_" + at(t, s), node(g, "softmax", {x}, {{"axis", int64_t{0}}}));
    }
    for (const ir::Shape& s : {ir::Shape{33, 257}, ir::Shape{4, 5, 64}}) {
      ir::Value* x = g.addInput("ln_" + at(t, s), {t, s});
      ir::Value* w = g.addInput("ln_w_" + at(t, s), {t, {s.back()}});
      ir::Value* b = g.addInput("ln_b_" + at(t, s), {t, {s.back()}});
      g.addOutput("layer_norm_" + at(t, s), node(g, "layer_norm", {x, w, b}, {{"normalized_ndim", int64_t{1}}}));
    }
    // Permute, strided slice and pad feeding elementwise ops; a bias + ReLU with its column sum.
    ir::Value* v = g.addInput("views_x", {t, {7, 33}});
    ir::Value* p = node(g, "permute", {v}, {{"perm", Ints{1, 0}}});
    ir::Value* sl = node(g, "slice", {p}, {{"starts", Ints{1, 0}}, {"ends", Ints{33, 7}}, {"steps", Ints{2, 1}}});
    ir::Value* pad = node(g, "pad", {sl}, {{"low", Ints{1, 2}}, {"high", Ints{0, 1}}, {"value", 0.5}});
    g.addOutput("views", node(g, "add", {node(g, "exp", {pad}), pad}));
    ir::Value* h = g.addInput("bias_relu_x", {t, {33, 257}});
    ir::Value* bias = g.addInput("bias_relu_b", {t, {257}});
    ir::Value* r = node(g, "relu", {node(g, "add", {h, bias})});
    g.addOutput("bias_relu", r);
    g.addOutput("bias_relu_colsum", node(g, "reduce_sum", {r}, {{"axes", Ints{0}}}));
    checkAgainstInterpreter(g, randomInputs(g, 19), g.name());
  }
}

/// A matmul case: C[m, n] = op(A) · op(B), A stored [k, m] when transposed, B [n, k]; `batchA` and
/// `batchB` are leading (broadcast) dimensions.
struct Matmul {
  int64_t m, n, k;
  ir::Shape batchA, batchB;
};

TEST_F(CudaBackendTest, MatmulInEveryTranspositionWithAndWithoutEpilogue) {
  const Matmul cases[] = {{1, 1, 1, {}, {}},      {7, 33, 5, {}, {}}, {37, 19, 23, {}, {}},
                          {130, 67, 257, {}, {}}, {7, 9, 5, {3}, {}}, {6, 5, 4, {2, 3}, {3}}};
  for (DType t : kFloats)
    for (bool blasLt : {true, false}) {
      ir::Graph g(fmt::format("matmul_{}_{}", dtypeName(t), blasLt ? "blaslt" : "generated"));
      for (const Matmul& c : cases)
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            ir::Shape sa = c.batchA, sb = c.batchB;
            sa.insert(sa.end(), {ta ? c.k : c.m, ta ? c.m : c.k});
            sb.insert(sb.end(), {tb ? c.n : c.k, tb ? c.k : c.n});
            std::string batch = c.batchA.empty() && c.batchB.empty()
                                    ? ""
                                    : fmt::format("_batch_{}_{}", shapeTag(c.batchA), shapeTag(c.batchB));
            std::string name =
                fmt::format("{}_{}x{}x{}{}_{}{}", dtypeName(t), c.m, c.n, c.k, batch, ta ? "T" : "N", tb ? "T" : "N");
            const std::vector<ir::NamedAttr> attrs = {{"transpose_a", ta}, {"transpose_b", tb}};
            g.addOutput("mm_" + name,
                        node(g, "matmul", {g.addInput("a_" + name, {t, sa}), g.addInput("b_" + name, {t, sb})}, attrs));
            // Separate operands: the plain product must not be shared with the fused one.
            ir::Value* prod =
                node(g, "matmul", {g.addInput("ea_" + name, {t, sa}), g.addInput("eb_" + name, {t, sb})}, attrs);
            ir::Value* bias = g.addInput("bias_" + name, {t, {c.n}});
            g.addOutput("mm_bias_relu_" + name, node(g, "relu", {node(g, "add", {prod, bias})}));
          }
      CheckOptions o;
      o.scaleFactor = 1;
      o.program.blasLt = blasLt;
      o.program.blasMinMacs = 0;  // with blasLt, cuBLASLt for the small products too
      checkAgainstInterpreter(g, randomInputs(g, 23), g.name(), o);
    }
}

/// conv2d over x[n,c,h,w] and w[o,c/groups,kh,kw], and its gradients.
struct Conv {
  int64_t n, c, h, w, o, kh, kw, groups, sh, sw, ph, pw, dh, dw;

  std::vector<ir::NamedAttr> attrs() const {
    return {{"stride", Ints{sh, sw}}, {"padding", Ints{ph, pw}}, {"dilation", Ints{dh, dw}}, {"groups", groups}};
  }
  std::string tag() const {
    return fmt::format("{}x{}x{}x{}_o{}_k{}x{}_g{}_s{}x{}_p{}x{}_d{}x{}", n, c, h, w, o, kh, kw, groups, sh, sw, ph, pw,
                       dh, dw);
  }
};

TEST_F(CudaBackendTest, ConvolutionsAndTheirGradients) {
  const Conv convs[] = {
      {2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // 3x3 "same"
      {2, 4, 11, 9, 6, 3, 2, 2, 2, 1, 1, 2, 1, 2},     // groups, stride, padding, dilation
      {1, 6, 8, 10, 3, 2, 3, 3, 3, 2, 0, 1, 2, 1},     // three groups, stride 3
      {3, 5, 6, 6, 7, 1, 1, 1, 2, 2, 0, 0, 1, 1},      // 1x1, stride 2
      {4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // the cnn's second layer, smaller
      {3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // the cnn's first layer: one input channel
  };
  struct Variant {
    DType t;
    bool blasLt;
  };
  for (Variant v : {Variant{DType::f32, true}, Variant{DType::f32, false}, Variant{DType::f16, true},
                    Variant{DType::bf16, true}, Variant{DType::f64, true}}) {
    ir::Graph g(fmt::format("conv_{}_{}", dtypeName(v.t), v.blasLt ? "blaslt" : "generated"));
    for (const Conv& c : convs) {
      const std::string name = fmt::format("{}_{}", dtypeName(v.t), c.tag());
      ir::Value* x = g.addInput("x_" + name, {v.t, {c.n, c.c, c.h, c.w}});
      ir::Value* w = g.addInput("w_" + name, {v.t, {c.o, c.c / c.groups, c.kh, c.kw}});
      ir::Value* y = node(g, "conv2d", {x, w}, c.attrs());
      g.addOutput("conv2d_" + name, y);
      std::vector<ir::NamedAttr> gi = c.attrs(), gw = c.attrs();
      gi.push_back({"input_shape", Ints{c.n, c.c, c.h, c.w}});
      gw.push_back({"weight_shape", Ints{c.o, c.c / c.groups, c.kh, c.kw}});
      ir::Value* dy = g.addInput("dy_" + name, y->type);
      g.addOutput("conv2d_grad_input_" + name, node(g, "conv2d_grad_input", {dy, w}, gi));
      g.addOutput("conv2d_grad_weight_" + name, node(g, "conv2d_grad_weight", {x, dy}, gw));
    }
    CheckOptions o;
    o.scaleFactor = 1;
    o.program.blasLt = v.blasLt;
    o.program.blasMinMacs = 0;
    checkAgainstInterpreter(g, randomInputs(g, 29), g.name(), o);
  }
}

/// A pooling configuration: input shape, kernel, stride, padding.
struct Pool {
  ir::Shape x;
  Ints kernel, stride, padding;

  std::vector<ir::NamedAttr> attrs() const { return {{"kernel", kernel}, {"stride", stride}, {"padding", padding}}; }
  std::string tag() const {
    return fmt::format("{}_k{}_s{}_p{}", shapeTag(x), shapeTag(kernel), shapeTag(stride), shapeTag(padding));
  }
};

TEST_F(CudaBackendTest, PoolingAndItsGradients) {
  const Pool pools[] = {
      {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0}},   {{1, 2, 33, 35}, {3, 3}, {2, 2}, {1, 1}},
      {{2, 1, 8, 40}, {3, 3}, {1, 1}, {1, 1}},  {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}},
      {{1, 2, 9, 20}, {2, 3}, {3, 1}, {1, 1}},  {{1, 1, 10, 50}, {2, 3}, {3, 4}, {1, 0}},
      {{4, 8, 28, 28}, {2, 2}, {2, 2}, {0, 0}},  // the cnn's pools
  };
  for (DType t : kFloats) {
    ir::Graph g(fmt::format("pooling_{}", dtypeName(t)));
    for (const Pool& p : pools) {
      const std::string name = fmt::format("{}_{}", dtypeName(t), p.tag());
      ir::Value* x = g.addInput("x_" + name, {t, p.x});
      ir::Value* y = node(g, "max_pool2d", {x}, p.attrs());
      g.addOutput("max_pool2d_" + name, y);
      g.addOutput("max_pool2d_grad_" + name,
                  node(g, "max_pool2d_grad", {x, g.addInput("dy_" + name, y->type)}, p.attrs()));
      for (bool includePad : {true, false}) {
        std::vector<ir::NamedAttr> attrs = p.attrs();
        attrs.push_back({"count_include_pad", includePad});
        const std::string suffix = name + (includePad ? "_include_pad" : "");
        g.addOutput("avg_pool2d_" + suffix, node(g, "avg_pool2d", {x}, attrs));
        attrs.push_back({"input_shape", p.x});
        g.addOutput("avg_pool2d_grad_" + suffix,
                    node(g, "avg_pool2d_grad", {g.addInput("ady_" + suffix, y->type)}, attrs));
      }
    }
    checkAgainstInterpreter(g, randomInputs(g, 31), g.name());
  }
}

TEST_F(CudaBackendTest, IndexAndMovementOpsAreExact) {
  ir::Graph g("index_ops");
  // Indices are drawn in [0, 4): every indexed dimension is at least 4, except where one_hot
  // meets an index out of range on purpose (a row of zeros).
  struct Gather {
    ir::Shape data, indices;
    int64_t axis;
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i64, DType::boolean})
    for (const Gather& c : {Gather{{10, 6}, {7}, 0}, Gather{{4, 9, 5}, {3, 4}, 1}, Gather{{5, 33}, {}, -1},
                            Gather{{50, 64}, {40, 30}, 0}}) {
      const std::string name =
          fmt::format("{}_{}_i{}_{}", dtypeName(t), shapeTag(c.data), shapeTag(c.indices), axisTag(c.axis));
      ir::Value* data = g.addInput("data_" + name, {t, c.data});
      ir::Value* idx = g.addInput("idx_" + name, {c.axis == 1 ? DType::i32 : DType::i64, c.indices});
      g.addOutput("gather_" + name, node(g, "gather", {data, idx}, {{"axis", c.axis}}));
    }
  for (auto [shape, classes, dt] : {std::tuple{ir::Shape{7}, int64_t{3}, DType::f32},
                                    {ir::Shape{3, 5}, 33, DType::f16},
                                    {ir::Shape{5000}, 30, DType::bf16},
                                    {ir::Shape{}, 4, DType::i64},
                                    {ir::Shape{2, 2}, 1, DType::boolean}}) {
    const std::string name = fmt::format("{}_{}_{}", shapeTag(shape), classes, dtypeName(dt));
    g.addOutput("one_hot_" + name, node(g, "one_hot", {g.addInput("oh_" + name, {DType::i64, shape})},
                                        {{"num_classes", classes}, {"dtype", dt}}));
  }
  for (DType t : {DType::f32, DType::bf16, DType::i64, DType::boolean}) {
    auto concat = [&](const std::string& tag, const std::vector<ir::Shape>& shapes, int64_t axis) {
      std::vector<ir::Value*> operands;
      for (size_t i = 0; i < shapes.size(); ++i)
        operands.push_back(g.addInput(fmt::format("cat{}_{}_{}", i, tag, dtypeName(t)), {t, shapes[i]}));
      g.addOutput(fmt::format("concat_{}_{}", tag, dtypeName(t)), node(g, "concat", operands, {{"axis", axis}}));
    };
    concat("rows", {{3, 5}, {4, 5}}, 0);
    concat("cols", {{3, 5}, {3, 1}, {3, 7}}, 1);
    concat("middle", {{2, 3, 4}, {2, 1, 4}, {2, 3, 4}}, -2);
    concat("wide", {{600, 64}, {600, 64}}, 1);
  }
  // f16 and bf16 inputs in [-2, 2] tie often: the first extreme wins.
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32})
    for (auto [shape, axis] : {std::pair{ir::Shape{3, 33}, int64_t{1}},
                               {ir::Shape{5, 4, 9}, 0},
                               {ir::Shape{300, 257}, -1},
                               {ir::Shape{257, 300}, 0}}) {
      const std::string name = fmt::format("{}_{}_{}", dtypeName(t), shapeTag(shape), axisTag(axis));
      ir::Value* x = g.addInput("arg_" + name, {t, shape});
      g.addOutput("argmax_" + name, node(g, "argmax", {x}, {{"axis", axis}}));
      g.addOutput("argmin_" + name, node(g, "argmin", {x}, {{"axis", axis}, {"keepdim", true}}));
    }
  struct SliceGrad {
    ir::Shape dy, shape;
    Ints starts, steps;
  };
  for (DType t : {DType::f32, DType::f16, DType::i32})
    for (const SliceGrad& c :
         {SliceGrad{{3, 2}, {7, 5}, {1, 0}, {2, 3}}, SliceGrad{{4}, {9}, {1}, {2}},
          SliceGrad{{2, 3, 5}, {4, 7, 33}, {1, 2, 20}, {2, 2, 1}}, SliceGrad{{300, 32}, {1200, 64}, {7, 1}, {2, 2}}}) {
      const std::string name = fmt::format("{}_{}_into_{}", dtypeName(t), shapeTag(c.dy), shapeTag(c.shape));
      g.addOutput("slice_grad_" + name, node(g, "slice_grad", {g.addInput("sg_" + name, {t, c.dy})},
                                             {{"shape", c.shape}, {"starts", c.starts}, {"steps", c.steps}}));
    }
  // Uniform draws are exact (24 random bits); the step operand selects the stream.
  ir::Value* step = g.addInput("step", {DType::i64, {}});
  for (DType t : kFloats)
    for (const ir::Shape& s : {ir::Shape{5000}, ir::Shape{7}, ir::Shape{33, 9}})
      g.addOutput("random_uniform_" + at(t, s),
                  node(g, "random", {step},
                       {{"shape", s}, {"dtype", t}, {"seed", int64_t{1234567890123}}, {"offset", int64_t{3}}}));
  checkAgainstInterpreter(g, randomInputs(g, 37), g.name(), exactly());
}

TEST_F(CudaBackendTest, ScatterAddAndNormalDraws) {
  ir::Graph g("scatter_normal");
  struct Scatter {
    ir::Shape indices, updates;
    int64_t axis, dim;
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i64})
    for (const Scatter& c : {Scatter{{7}, {7, 5}, 0, 4}, Scatter{{2, 4}, {3, 2, 4, 33}, 1, 5},
                             Scatter{{257}, {257, 96}, 0, 50}, Scatter{{300}, {16, 300, 40}, 1, 20}}) {
      const std::string name =
          fmt::format("{}_{}_{}_{}", dtypeName(t), shapeTag(c.indices), shapeTag(c.updates), axisTag(c.axis));
      ir::Value* idx = g.addInput("idx_" + name, {c.axis == 1 ? DType::i32 : DType::i64, c.indices});
      ir::Value* upd = g.addInput("upd_" + name, {t, c.updates});
      g.addOutput("scatter_add_" + name, node(g, "scatter_add", {idx, upd}, {{"axis", c.axis}, {"dim_size", c.dim}}));
    }
  // Up to 75 terms per scattered element, summed in another order: relative to the largest sum.
  CheckOptions o;
  o.scaleFactor = 1;
  checkAgainstInterpreter(g, randomInputs(g, 41), g.name(), o);

  // Normal draws are f32 Box-Muller on every backend; log and cos may round differently (CUDA's
  // device functions against the host's libm), so they agree within 2 ulps of f32 — of the value
  // itself, also in an f64 output (a widened f32) — and within the dtype's rounding below f32.
  ir::Graph n("normal_draws");
  ir::Value* step = n.addInput("step", {DType::i64, {}});
  for (DType t : kFloats)
    for (const ir::Shape& s : {ir::Shape{5000}, ir::Shape{33, 9}})
      n.addOutput("random_normal_" + at(t, s),
                  node(n, "random", {step},
                       {{"shape", s}, {"dtype", t}, {"dist", std::string("normal")}, {"seed", int64_t{77}}}));
  const interp::TensorMap inputs = randomInputs(n, 43);
  const interp::TensorMap want = interp::run(n, inputs);
  const interp::TensorMap got = compileCuda(n)->run(inputs);
  for (const auto& [name, w] : want) {
    const rt::HostTensor& x = got.at(name);
    ASSERT_EQ(w.typeStr(), x.typeStr()) << name;
    const bool wide = w.dtype() == DType::f32 || w.dtype() == DType::f64;
    // f16's subnormals are evenly spaced: one of their ulps (2^-24) absolute.
    const double absolute = w.dtype() == DType::f16 ? 5.9604644775390625e-8 : 0;
    int differ = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double a = w.at(i), b = x.at(i);
      differ += a != b;
      if (wide) {
        const auto fa = static_cast<float>(a), fb = static_cast<float>(b);
        ASSERT_EQ(static_cast<double>(fa), a) << name << "[" << i << "]: not a widened f32";
        int32_t ia, ib;
        std::memcpy(&ia, &fa, 4);
        std::memcpy(&ib, &fb, 4);
        ASSERT_TRUE((ia < 0) == (ib < 0) && std::abs(ia - ib) <= 2)
            << name << "[" << i << "]: want " << a << ", got " << b << " (more than 2 ulps of f32 apart)";
      } else {
        ASSERT_LE(std::abs(a - b), tolerance(w.dtype()) * std::abs(a) + absolute)
            << name << "[" << i << "]: want " << a << ", got " << b;
      }
    }
    EXPECT_LE(differ, w.numel() / 20) << name << ": most draws must be bit-identical";
  }
}

TEST_F(CudaBackendTest, RandomGraphs) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    ir::Graph g = randomGraph(seed);
    checkAgainstInterpreter(g, randomInputs(g, seed), fmt::format("random graph {}", seed));
    if (HasFailure()) {
      ADD_FAILURE() << "the first failing random graph:\n" << ir::printGraph(g);
      return;
    }
  }
}

}  // namespace
}  // namespace kiln::testing
