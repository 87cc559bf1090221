// The GEMM form of contraction kernels (kernels/Gemm.h): evaluating a form with a plain triple loop
// over its index maps, in double, gives what the reference interpreter computes for the node —
// matmuls with every transpose combination and broadcast batches, convolutions with strides,
// padding, dilation and groups, and both convolution gradients (strided conv2d_grad_input has
// quotient terms).
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "kernels/Gemm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::kernels {
namespace {

/// Splits flat index `flat` into coordinates of `dims` (row-major) appended to `out`.
void unravel(int64_t flat, const std::vector<int64_t>& dims, std::vector<int64_t>& out) {
  const size_t at = out.size();
  out.resize(at + dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    out[at + d] = flat % dims[d];
    flat /= dims[d];
  }
}

/// The result of `form` over `a` and `b` (the kernel's operand tensors), row-major [batch, m, n].
std::vector<double> evaluateForm(const GemmForm& f, const rt::HostTensor& a, const rt::HostTensor& b) {
  std::vector<double> out(static_cast<size_t>(f.batch * f.m * f.n));
  std::vector<int64_t> ca, cb;
  for (int64_t bi = 0; bi < f.batch; ++bi)
    for (int64_t m = 0; m < f.m; ++m)
      for (int64_t n = 0; n < f.n; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < f.k; ++k) {
          ca.clear(), cb.clear();
          unravel(bi, f.batchDims, ca), unravel(m, f.mDims, ca), unravel(k, f.kDims, ca);
          unravel(bi, f.batchDims, cb), unravel(k, f.kDims, cb), unravel(n, f.nDims, cb);
          std::optional<int64_t> ia = gemmElementIndex(f.a, ca), ib = gemmElementIndex(f.b, cb);
          if (ia && ib) sum += a.at(*ia) * b.at(*ib);
        }
        out[static_cast<size_t>((bi * f.m + m) * f.n + n)] = sum;
      }
  return out;
}

rt::HostTensor randomTensor(const ir::TensorType& t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (double& x : v) x = u(rng);
  return rt::HostTensor::fromDoubles(t.dtype, t.shape, v);
}

/// Parses a graph of one contraction `%r = OP(%a, %b)` over f64 inputs, lowers it, and compares
/// the form's triple loop with the interpreter. Returns the form for further checks.
GemmForm checkForm(const std::string& aType, const std::string& bType, const std::string& node) {
  const std::string text = fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  {}\n  output %r = %r\n}}\n",
                                       aType, bType, node);
  SCOPED_TRACE(node);
  ir::Graph g = ir::parseGraph(text, "gemm_form.kir");
  std::vector<Kernel> ks = lowerGraph(g);
  EXPECT_EQ(ks.size(), 1u);
  const Kernel& k = ks.at(0);
  GemmForm f = gemmForm(k);
  // The result-level view [batch / groups, groups · m, n] splits the result's dimensions.
  const ir::Shape& rs = k.contraction.result.shape;
  if (static_cast<size_t>(f.resultBatchDims + f.resultMDims + f.resultNDims) != rs.size()) {
    ADD_FAILURE() << "the result split does not cover " << ir::shapeStr(rs);
    return f;
  }
  auto span = [&](int from, int count) {
    return ir::numElements(ir::Shape(rs.begin() + from, rs.begin() + from + count));
  };
  EXPECT_EQ(span(0, f.resultBatchDims) * f.groups, f.batch);
  EXPECT_EQ(span(f.resultBatchDims, f.resultMDims), f.groups * f.m);
  EXPECT_EQ(span(f.resultBatchDims + f.resultMDims, f.resultNDims), f.n);
  std::mt19937 rng(42);
  interp::TensorMap in;
  in["a"] = randomTensor(g.inputs()[0]->type, rng);
  in["b"] = randomTensor(g.inputs()[1]->type, rng);
  const rt::HostTensor want = interp::run(g, in).at("r");
  const rt::HostTensor& fa = in.at(k.buffers[f.a.buffer].name);
  const rt::HostTensor& fb = in.at(k.buffers[f.b.buffer].name);
  std::vector<double> got = evaluateForm(f, fa, fb);
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got[static_cast<size_t>(i)], want.at(i), 1e-12) << "element " << i;
  return f;
}

TEST(GemmForm, MatMulTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::string aType = ta ? "f64[5,3]" : "f64[3,5]", bType = tb ? "f64[4,5]" : "f64[5,4]";
      GemmForm f = checkForm(aType, bType,
                             fmt::format("%r = matmul(%a, %b) {{transpose_a={}, transpose_b={}}} : f64[3,4]", ta, tb));
      EXPECT_EQ(f.m, 3);
      EXPECT_EQ(f.n, 4);
      EXPECT_EQ(f.k, 5);
      EXPECT_TRUE(f.a.map.bounds.empty() && f.b.map.bounds.empty() && f.affine);
    }
}

TEST(GemmForm, MatMulBroadcastBatch) {
  GemmForm f = checkForm("f64[2,1,3,5]", "f64[4,5,6]", "%r = matmul(%a, %b) : f64[2,4,3,6]");
  EXPECT_EQ(f.batchDims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(f.a.map.index.coeff[1], 0);  // a broadcasts along the second batch dimension
  EXPECT_EQ(f.b.map.index.coeff[0], 0);  // b has no first batch dimension
  checkForm("f64[3,5]", "f64[2,5,6]", "%r = matmul(%a, %b) {transpose_b=false} : f64[2,3,6]");
  checkForm("f64[2,5,3]", "f64[1,6,5]", "%r = matmul(%a, %b) {transpose_a=true, transpose_b=true} : f64[2,3,6]");
}

/// The sizes of a convolution test case: x[n,c,h,w], w[o,c/groups,kh,kw].
struct Conv {
  int64_t n, c, h, w, o, kh, kw, groups;
  int64_t sh, sw, ph, pw, dh, dw;

  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  std::string x() const { return fmt::format("f64[{},{},{},{}]", n, c, h, w); }
  std::string wt() const { return fmt::format("f64[{},{},{},{}]", o, c / groups, kh, kw); }
  std::string y() const { return fmt::format("f64[{},{},{},{}]", n, o, oh(), ow()); }
  std::string attrs() const {
    return fmt::format("stride=[{},{}], padding=[{},{}], dilation=[{},{}], groups={}", sh, sw, ph, pw, dh, dw, groups);
  }
};

const Conv kConvs[] = {
    {2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // same-size 3x3
    {2, 4, 7, 9, 6, 3, 2, 2, 2, 1, 1, 2, 1, 2},  // groups, stride, padding, dilation
    {1, 6, 8, 7, 3, 2, 3, 3, 3, 2, 0, 1, 2, 1},  // depthwise-like groups, stride 3
    {3, 2, 5, 5, 2, 1, 1, 1, 2, 2, 0, 0, 1, 1},  // 1x1, stride 2
};

TEST(GemmForm, Conv2d) {
  for (const Conv& c : kConvs) {
    GemmForm f = checkForm(c.x(), c.wt(), fmt::format("%r = conv2d(%a, %b) {{{}}} : {}", c.attrs(), c.y()));
    EXPECT_EQ(f.batchDims, (std::vector<int64_t>{c.n, c.groups}));
    EXPECT_EQ(f.k, c.c / c.groups * c.kh * c.kw);
    EXPECT_EQ(f.b.map.bounds.size(), static_cast<size_t>((c.ph > 0) + (c.pw > 0)));
  }
}

TEST(GemmForm, Conv2dGradWeight) {
  for (const Conv& c : kConvs) {
    GemmForm f = checkForm(c.x(), c.y(),
                           fmt::format("%r = conv2d_grad_weight(%a, %b) {{weight_shape=[{},{},{},{}], {}}} : {}", c.o,
                                       c.c / c.groups, c.kh, c.kw, c.attrs(), c.wt()));
    EXPECT_EQ(f.k, c.n * c.oh() * c.ow());
    EXPECT_TRUE(f.affine);
  }
}

TEST(GemmForm, Conv2dGradInput) {
  for (const Conv& c : kConvs) {
    GemmForm f = checkForm(c.y(), c.wt(),
                           fmt::format("%r = conv2d_grad_input(%a, %b) {{input_shape=[{},{},{},{}], {}}} : {}", c.n,
                                       c.c, c.h, c.w, c.attrs(), c.x()));
    EXPECT_EQ(f.affine, c.sh == 1 && c.sw == 1);
    EXPECT_EQ(f.b.quotients.size(), static_cast<size_t>((c.sh > 1) + (c.sw > 1)));
  }
}

}  // namespace
}  // namespace kiln::kernels
