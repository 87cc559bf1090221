// The CUDA op kernels (codegen/cuda/RenderOps.cpp) and contractions (RenderGemm.cpp,
// GemmKernel.cpp) without a GPU: every op kernel kind and every contraction form — matmul with
// transposes and batches, conv2d with stride, padding, dilation and groups, both convolution
// gradients (strided grad_input has quotient terms), f32, f64, integer, bf16 and f16 operands,
// odd sizes, every tile — rendered and compiled by NVRTC for sm_80 and sm_90 (a failure prints the
// numbered source and NVRTC's log); and the structure the renderer chooses: cuBLASLt steps and
// their folded epilogues, scratch plus an epilogue launch where cuBLASLt cannot fold it, one
// generated launch for convolutions, split-K for weight gradients, tensor cores (mma.sync) for
// bf16/f16, tiles that follow the problem's shape. What the kernels compute is checked against the
// interpreter on the host emulator (CudaEmulatedTest.cpp) and on a GPU (label gpu).
#include "codegen/cuda/GemmTile.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Render.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "kernels/Kernel.h"
#include "passes/Pipeline.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

using namespace kiln;
using ir::OpKind;

namespace {

/// A graph of one `op` node on inputs x0, x1, … of `types`, with output y.
ir::Graph single(OpKind op, const std::vector<ir::TensorType>& types, const std::vector<ir::NamedAttr>& attrs) {
  ir::Graph g("op");
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < types.size(); ++i) operands.push_back(g.addInput("x" + std::to_string(i), types[i]));
  g.addOutput("y", g.addNode(op, operands, attrs));
  return g;
}

/// The kernels of a .kir text after the default pipeline (fusion included).
std::vector<kernels::Kernel> compiled(const std::string& text, passes::Precision p = passes::Precision::F32) {
  ir::Graph g = ir::parseGraph(text, "test.kir");
  passes::PassContext ctx;
  ctx.precision = p;
  ctx.warn = [](const std::string&) {};
  passes::compileGraph(g, ctx);
  return kernels::lowerGraph(g);
}

/// The only contraction kernel of `ks`.
const kernels::Kernel& contraction(const std::vector<kernels::Kernel>& ks) {
  const kernels::Kernel* found = nullptr;
  for (const kernels::Kernel& k : ks)
    if (k.hasContraction) {
      EXPECT_EQ(found, nullptr) << "two contraction kernels";
      found = &k;
    }
  if (!found) throw Error("no contraction kernel");
  return *found;
}

std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::string line, out;
  for (int n = 1; std::getline(in, line); ++n) out += fmt::format("{:5} | {}\n", n, line);
  return out;
}

/// Kernels rendered into one program (unique names), compiled for both architectures at the end.
class Program {
 public:
  /// Renders k (renamed PREFIX_name) with `options`; returns it.
  const cuda::RenderedKernel& add(kernels::Kernel k, const std::string& prefix, const cuda::RenderOptions& options = {}) {
    k.name = fmt::format("{}_{}", prefix, k.name);
    try {
      kernels_.push_back(cuda::renderKernel(k, options));
    } catch (const Error& e) {
      ADD_FAILURE() << k.name << ": " << e.what() << "\n" << kernels::printKernel(k);
      kernels_.push_back({});
    }
    checkSteps(k, kernels_.back());
    return kernels_.back();
  }

  /// Every kernel of a one-node graph.
  void addGraph(const ir::Graph& g, const std::string& prefix, const cuda::RenderOptions& options = {}) {
    for (const kernels::Kernel& k : kernels::lowerGraph(g)) add(k, prefix, options);
  }

  /// NVRTC compiles the program for `archs`; returns the PTX of the last.
  std::string compile(const std::string& what, std::vector<const char*> archs = {"sm_80", "sm_90"}) const {
    std::string source = cuda::programSource(kernels_);
    std::string ptx;
    for (const char* arch : archs) {
      try {
        ptx = cuda::compileCuda(source, what + ".cu", arch).ptx;
      } catch (const Error& e) {
        ADD_FAILURE() << what << " for " << arch << ": " << e.what() << "\n--- source ---\n" << numbered(source);
      }
    }
    return ptx;
  }

  size_t size() const { return kernels_.size(); }
  void addRendered(cuda::RenderedKernel r) { kernels_.push_back(std::move(r)); }

 private:
  /// Launches name entries of the kernel's code with one argument per buffer or scratch area.
  static void checkSteps(const kernels::Kernel& k, const cuda::RenderedKernel& r) {
    for (const cuda::Step& s : r.steps) {
      if (s.kind != cuda::Step::Kind::Launch) continue;
      const cuda::Launch& l = s.launch;
      EXPECT_NE(r.code.find(fmt::format("void __launch_bounds__({}) {}(", l.block[0], l.entry)), std::string::npos)
          << k.name << ": entry " << l.entry << "\n" << r.code;
      EXPECT_EQ(l.entry.rfind(r.name, 0), 0u) << l.entry;
      for (cuda::BufferRef a : l.args)
        EXPECT_TRUE(a >= 0 && static_cast<size_t>(a) < k.buffers.size() + r.scratchBytes.size()) << k.name;
      EXPECT_GE(l.grid[0], 1);
    }
  }

  std::vector<cuda::RenderedKernel> kernels_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ir::TensorType tt(DType t, ir::Shape s) { return {t, std::move(s)}; }

}  // namespace

// ---- op kernels -------------------------------------------------------------------------------------

TEST(CudaOpKernels, EveryKindRendersOneLaunchAndCompiles) {
  Program p;
  int n = 0;
  auto add = [&](const ir::Graph& g) {
    std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
    ASSERT_EQ(ks.size(), 1u);
    ASSERT_EQ(ks[0].kind, ir::KernelKind::Op);
    const cuda::RenderedKernel& r = p.add(ks[0], fmt::format("op{}", n++));
    ASSERT_EQ(r.steps.size(), 1u) << r.code;
    EXPECT_EQ(r.steps[0].launch.args.size(), ks[0].buffers.size());
    EXPECT_LE(r.steps[0].launch.grid[0], 4096);
  };
  for (DType t : {DType::bf16, DType::boolean})
    add(single(OpKind::Concat, {tt(t, {2, 3, 5}), tt(t, {2, 1, 5}), tt(t, {2, 4, 5})}, {{"axis", int64_t{1}}}));
  add(single(OpKind::Concat, {tt(DType::f16, {7}), tt(DType::f16, {0}), tt(DType::f16, {9})}, {{"axis", int64_t{0}}}));
  add(single(OpKind::Gather, {tt(DType::f32, {10, 7}), tt(DType::i32, {4, 3})}, {{"axis", int64_t{0}}}));
  add(single(OpKind::Gather, {tt(DType::f16, {3, 10, 7}), tt(DType::i64, {5})}, {{"axis", int64_t{1}}}));
  for (DType t : {DType::bf16, DType::i32})
    add(single(OpKind::ScatterAdd, {tt(DType::i64, {6, 5}), tt(t, {6, 5, 9})},
               {{"axis", int64_t{0}}, {"dim_size", int64_t{11}}}));
  add(single(OpKind::ScatterAdd, {tt(DType::i32, {700}), tt(DType::f32, {3, 700, 33})},
             {{"axis", int64_t{1}}, {"dim_size", int64_t{50}}}));
  for (DType t : {DType::f16, DType::boolean})
    add(single(OpKind::OneHot, {tt(DType::i32, {5, 3})}, {{"num_classes", int64_t{10}}, {"dtype", t}}));
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
    for (DType t : {DType::f16, DType::i32}) {
      add(single(op, {tt(t, {4, 9, 5})}, {{"axis", int64_t{1}}}));
      add(single(op, {tt(t, {33, 1000})}, {{"axis", int64_t{-1}}}));  // a warp per row
    }
  for (DType t : {DType::bf16, DType::i32})
    add(single(OpKind::SliceGrad, {tt(t, {2, 3, 4})},
               {{"shape", ir::Shape{5, 7, 4}}, {"starts", ir::Ints{1, 0, 0}}, {"steps", ir::Ints{2, 3, 1}}}));
  for (const std::string dist : {"uniform", "normal"})
    for (DType t : {DType::bf16, DType::f64}) {
      std::vector<ir::NamedAttr> attrs = {{"shape", ir::Shape{7, 13}}, {"dtype", t}, {"dist", dist},
                                          {"seed", int64_t{1234567890123}}, {"offset", int64_t{3}}};
      add(single(OpKind::Random, {tt(DType::i64, {})}, attrs));  // without a step it is a loop kernel
    }
  struct Pool {
    ir::Shape x;
    ir::Ints kernel, stride, padding;
  };
  // Overlapping windows (f32), windows that do not overlap (bf16), rectangular ones with padding (f64).
  for (const auto& [pool, t] : {std::pair{Pool{{2, 3, 9, 7}, {3, 3}, {1, 1}, {1, 1}}, DType::f32},
                                std::pair{Pool{{1, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0}}, DType::bf16},
                                std::pair{Pool{{2, 1, 11, 6}, {3, 2}, {2, 3}, {1, 0}}, DType::f64}}) {
    std::vector<ir::NamedAttr> attrs = {{"kernel", pool.kernel}, {"stride", pool.stride}, {"padding", pool.padding}};
    ir::Graph fwd = single(OpKind::MaxPool2d, {tt(t, pool.x)}, attrs);
    add(fwd);
    add(single(OpKind::MaxPool2dGrad, {tt(t, pool.x), fwd.outputs()[0].value->type}, attrs));
    for (bool includePad : {true, false}) {
      std::vector<ir::NamedAttr> avg = attrs;
      avg.push_back({"count_include_pad", includePad});
      ir::Graph avgFwd = single(OpKind::AvgPool2d, {tt(t, pool.x)}, avg);
      add(avgFwd);
      avg.push_back({"input_shape", pool.x});
      add(single(OpKind::AvgPool2dGrad, {avgFwd.outputs()[0].value->type}, avg));
    }
  }
  std::string ptx = p.compile("op_kernels");
  EXPECT_TRUE(contains(ptx, "bar.sync")) << "scatter_add stages its indices behind barriers";
  EXPECT_TRUE(contains(ptx, "shfl.sync.down")) << "argmax along long rows combines lanes with shuffles";
}

TEST(CudaOpKernels, ScatterAddIsDeterministic) {
  ir::Graph g = single(OpKind::ScatterAdd, {tt(DType::i32, {64}), tt(DType::f32, {64, 16})},
                       {{"axis", int64_t{0}}, {"dim_size", int64_t{10}}});
  cuda::RenderedKernel r = cuda::renderKernel(kernels::lowerGraph(g).at(0));
  EXPECT_FALSE(contains(r.code, "atomic")) << r.code;
  EXPECT_TRUE(r.scratchBytes.empty());
}

// ---- contractions: structure ------------------------------------------------------------------------

namespace {

/// A linear layer x[m, k] · w[n, k]ᵀ + b[n] followed by `act` ("%y = OP(%h) : f32[{m},{n}]").
std::string linear(int m, int n, int k, const std::string& act) {
  std::string y = fmt::format(fmt::runtime(act), fmt::arg("m", m), fmt::arg("n", n));
  return fmt::format("graph @g {{\n  input %x : f32[{0},{2}]\n  param %w : f32[{1},{2}] = zeros\n"
                     "  param %b : f32[{1}] = zeros\n  %h = linear(%x, %w, %b) : f32[{0},{1}]\n  {3}\n"
                     "  output %y = %y\n}}\n",
                     m, n, k, y);
}

/// cuBLASLt for every product it can compute, small ones included (the default leaves products
/// under RenderOptions::kBlasMinMacs multiply-adds to the generated GEMM).
const cuda::RenderOptions kEveryProduct{.blasMinMacs = 0};

/// The buffer of kernel `k` holding the graph value named `name`.
int32_t bufferNamed(const kernels::Kernel& k, const std::string& name) {
  for (size_t i = 0; i < k.buffers.size(); ++i)
    if (k.buffers[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

}  // namespace

TEST(CudaContraction, LinearBiasReluIsOneBlasStep) {
  const auto ks = compiled(linear(37, 19, 23, "%y = relu(%h) : f32[{m},{n}]"));
  const kernels::Kernel& k = contraction(ks);
  cuda::RenderedKernel r = cuda::renderKernel(k, kEveryProduct);
  ASSERT_EQ(r.steps.size(), 1u) << r.code;
  ASSERT_EQ(r.steps[0].kind, cuda::Step::Kind::Blas);
  const cuda::BlasMatmul& b = r.steps[0].blas;
  EXPECT_EQ(b.epilogue, cuda::BlasMatmul::Epilogue::BiasRelu);
  EXPECT_EQ(b.bias, bufferNamed(k, "b"));
  EXPECT_EQ(b.d, bufferNamed(k, "y"));
  EXPECT_EQ(b.a, bufferNamed(k, "x"));
  EXPECT_EQ(b.b, bufferNamed(k, "w"));
  EXPECT_EQ(b.m, 37);
  EXPECT_EQ(b.n, 19);
  EXPECT_EQ(b.k, 23);
  EXPECT_FALSE(b.transA);
  EXPECT_TRUE(b.transB);  // w is [n, k]
  EXPECT_EQ(b.typeD, DType::f32);
  EXPECT_TRUE(r.scratchBytes.empty());
}

TEST(CudaContraction, SmallProductsTakeTheGeneratedGemmLargeOnesCublasLt) {
  // 37·19·23 multiply-adds: one generated launch with bias and ReLU fused.
  const auto small = compiled(linear(37, 19, 23, "%y = relu(%h) : f32[{m},{n}]"));
  cuda::RenderedKernel r = cuda::renderKernel(contraction(small));
  ASSERT_EQ(r.steps.size(), 1u) << r.code;
  EXPECT_EQ(r.steps[0].kind, cuda::Step::Kind::Launch);
  // 256·128·128 = kBlasMinMacs: cuBLASLt with its epilogue.
  static_assert(256 * 128 * 128 == cuda::RenderOptions::kBlasMinMacs);
  const auto large = compiled(linear(256, 128, 128, "%y = relu(%h) : f32[{m},{n}]"));
  r = cuda::renderKernel(contraction(large));
  ASSERT_EQ(r.steps.size(), 1u) << r.code;
  EXPECT_EQ(r.steps[0].kind, cuda::Step::Kind::Blas);
  // One multiply-add fewer than the threshold (a product of 256·128·127): generated.
  const auto under = compiled(linear(256, 128, 127, "%y = relu(%h) : f32[{m},{n}]"));
  EXPECT_EQ(cuda::renderKernel(contraction(under)).steps.at(0).kind, cuda::Step::Kind::Launch);
  // The threshold is an option: 0 sends every product cuBLASLt can compute there.
  EXPECT_EQ(cuda::renderKernel(contraction(small), kEveryProduct).steps.at(0).kind, cuda::Step::Kind::Blas);
}

TEST(CudaContraction, CublasEpiloguesFoldOnlyWhenTheyMatch) {
  using E = cuda::BlasMatmul::Epilogue;
  struct Case {
    std::string act;
    std::optional<E> folded;  // nothing: scratch and an epilogue launch
  };
  const Case cases[] = {
      {"%y = gelu(%h) {{approximate=\"tanh\"}} : f32[{m},{n}]", E::BiasGelu},
      {"%y = gelu(%h) : f32[{m},{n}]", std::nullopt},  // erf GELU: cuBLASLt has only the tanh form
      {"%y = sigmoid(%h) : f32[{m},{n}]", std::nullopt},
      {"%y = mul(%h, %h) : f32[{m},{n}]", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.act);
    const auto ks = compiled(linear(8, 16, 32, c.act));
    cuda::RenderedKernel r = cuda::renderKernel(contraction(ks), kEveryProduct);
    ASSERT_GE(r.steps.size(), 1u);
    ASSERT_EQ(r.steps[0].kind, cuda::Step::Kind::Blas);
    if (c.folded) {
      EXPECT_EQ(r.steps.size(), 1u);
      EXPECT_EQ(r.steps[0].blas.epilogue, *c.folded);
    } else {
      ASSERT_EQ(r.steps.size(), 2u) << r.code;
      EXPECT_EQ(r.steps[0].blas.epilogue, E::None);
      EXPECT_EQ(r.steps[0].blas.typeD, DType::f32);
      EXPECT_EQ(r.steps[0].blas.d, static_cast<int32_t>(contraction(ks).buffers.size()));  // scratch 0
      ASSERT_EQ(r.scratchBytes.size(), 1u);
      EXPECT_EQ(r.scratchBytes[0], 8 * 16 * 4);
      EXPECT_EQ(r.steps[1].kind, cuda::Step::Kind::Launch);
    }
  }
  // A plain matmul: cuBLASLt writes the result itself.
  const auto plain = compiled("graph @g {\n  input %a : f32[5,6]\n  input %b : f32[6,7]\n"
                              "  %y = matmul(%a, %b) : f32[5,7]\n  output %y = %y\n}\n");
  cuda::RenderedKernel r = cuda::renderKernel(contraction(plain), kEveryProduct);
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].blas.epilogue, E::None);
  EXPECT_FALSE(r.steps[0].blas.transA || r.steps[0].blas.transB);
}

TEST(CudaContraction, BatchedMatmulStrides) {
  auto blas = [](const std::string& a, const std::string& b, const std::string& attrs, const std::string& y) {
    const auto ks = compiled(fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  %y = matmul(%a, %b) {} : {}\n"
                                         "  output %y = %y\n}}\n", a, b, attrs, y));
    return cuda::renderKernel(contraction(ks), kEveryProduct);
  };
  // Batches of A against one B: one taller product.
  cuda::RenderedKernel merged = blas("f32[3,5,6]", "f32[6,7]", "", "f32[3,5,7]");
  ASSERT_EQ(merged.steps.size(), 1u);
  EXPECT_EQ(merged.steps[0].blas.m, 15);
  EXPECT_EQ(merged.steps[0].blas.batch, 1);
  // Two batch dimensions, both operands batched, B transposed.
  cuda::RenderedKernel strided = blas("f32[2,3,5,6]", "f32[2,3,7,6]", "{transpose_b=true}", "f32[2,3,5,7]");
  ASSERT_EQ(strided.steps.size(), 1u);
  const cuda::BlasMatmul& s = strided.steps[0].blas;
  EXPECT_EQ(s.batch, 6);
  EXPECT_EQ(s.strideA, 30);
  EXPECT_EQ(s.strideB, 42);
  EXPECT_EQ(s.strideD, 35);
  EXPECT_TRUE(s.transB);
  // One A against batches of B: stride 0 for A.
  cuda::RenderedKernel broadcastA = blas("f32[5,6]", "f32[4,6,7]", "", "f32[4,5,7]");
  ASSERT_EQ(broadcastA.steps.size(), 1u);
  EXPECT_EQ(broadcastA.steps[0].blas.strideA, 0);
  EXPECT_EQ(broadcastA.steps[0].blas.batch, 4);
  // Batches broadcast crosswise have no uniform stride: the generated GEMM.
  cuda::RenderedKernel cross = blas("f32[2,1,5,6]", "f32[1,3,6,7]", "", "f32[2,3,5,7]");
  ASSERT_EQ(cross.steps.size(), 1u);
  EXPECT_EQ(cross.steps[0].kind, cuda::Step::Kind::Launch);
  // f64 and integers: generated.
  for (const char* t : {"f64", "i32", "i64"}) {
    cuda::RenderedKernel r = blas(fmt::format("{}[5,6]", t), fmt::format("{}[6,7]", t), "", fmt::format("{}[5,7]", t));
    ASSERT_EQ(r.steps.size(), 1u);
    EXPECT_EQ(r.steps[0].kind, cuda::Step::Kind::Launch) << t;
  }
}

TEST(CudaContraction, AmpLinearReadsTheProductFromScratch) {
  // The bf16 product is cast to f32 before the bias: not cuBLASLt's bf16 epilogue.
  const auto ks = compiled(linear(32, 64, 128, "%y = relu(%h) : f32[{m},{n}]"), passes::Precision::BF16);
  const kernels::Kernel& k = contraction(ks);
  EXPECT_EQ(k.contraction.result.dtype, DType::bf16);
  cuda::RenderedKernel r = cuda::renderKernel(k, kEveryProduct);
  ASSERT_EQ(r.steps.size(), 2u) << r.code;
  EXPECT_EQ(r.steps[0].blas.typeA, DType::bf16);
  EXPECT_EQ(r.steps[0].blas.typeD, DType::f32);
  EXPECT_EQ(r.steps[1].launch.args.size(), k.buffers.size() + 1);
  EXPECT_TRUE(contains(r.code, "kiln_round_bf16(acc)")) << "Acc is the product rounded to bf16\n" << r.code;
  Program p;
  p.add(k, "amp");
  p.compile("amp_linear");
}

TEST(CudaContraction, ConvIsOneGeneratedLaunch) {
  const auto ks = compiled(R"(graph @c {
  input %x : f32[2,3,9,7]
  param %w : f32[5,3,3,3] = zeros
  param %b : f32[5] = zeros
  %y = conv2d(%x, %w) {stride=[1,1], padding=[1,1]} : f32[2,5,9,7]
  %bb = reshape(%b) {shape=[1,5,1,1]} : f32[1,5,1,1]
  %z = add(%y, %bb) : f32[2,5,9,7]
  %r = relu(%z) : f32[2,5,9,7]
  output %r = %r
}
)");
  const kernels::Kernel& k = contraction(ks);
  cuda::RenderedKernel r = cuda::renderKernel(k);
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].kind, cuda::Step::Kind::Launch);
  EXPECT_TRUE(contains(r.code, "generated GEMM")) << r.code;
  EXPECT_TRUE(contains(r.code, "kiln_relu")) << "the epilogue is fused\n" << r.code;
  Program p;
  p.add(k, "conv");
  p.compile("conv");
}

TEST(CudaContraction, HalfPrecisionWithoutBlasLtUsesTensorCores) {
  for (const char* t : {"bf16", "f16"}) {
    const auto ks = compiled(fmt::format("graph @g {{\n  input %a : {0}[70,33]\n  input %b : {0}[33,45]\n"
                                         "  %y = matmul(%a, %b) : {0}[70,45]\n  output %y = %y\n}}\n", t));
    cuda::RenderOptions o;
    o.blasLt = false;
    cuda::RenderedKernel r = cuda::renderKernel(contraction(ks), o);
    ASSERT_EQ(r.steps.size(), 1u);
    EXPECT_EQ(r.steps[0].kind, cuda::Step::Kind::Launch);
    EXPECT_TRUE(contains(r.code, fmt::format("kiln_mma_{}(", t))) << r.code;
    Program p;
    p.add(contraction(ks), "half", o);
    std::string ptx = p.compile(fmt::format("mma_{}", t));
    EXPECT_TRUE(contains(ptx, fmt::format("mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32", t)));
    EXPECT_TRUE(contains(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
  }
}

TEST(CudaContraction, WeightGradientsSplitK) {
  // dW of a 3x3 convolution over a batch of 32 28x28 images: a 16 x 144 result summed over 25088
  // products, two tiles without splitting.
  const auto ks = compiled("graph @g {\n  input %x : f32[32,16,28,28]\n  input %dy : f32[32,16,28,28]\n"
                           "  %r = conv2d_grad_weight(%x, %dy) {weight_shape=[16,16,3,3], padding=[1,1]} : f32[16,16,3,3]\n"
                           "  output %r = %r\n}\n");
  const kernels::Kernel& k = contraction(ks);
  cuda::RenderedKernel r = cuda::renderKernel(k);
  ASSERT_EQ(r.steps.size(), 2u) << r.code;
  const cuda::Launch &gemm = r.steps[0].launch, &sum = r.steps[1].launch;
  ASSERT_EQ(r.scratchBytes.size(), 1u);
  int64_t splits = r.scratchBytes[0] / (16 * 144 * 4);
  EXPECT_GE(splits, 16);
  EXPECT_EQ(r.scratchBytes[0], splits * 16 * 144 * 4);
  EXPECT_GE(gemm.grid[0], 99) << "the splits fill the device";
  EXPECT_EQ(sum.entry, r.name + "_sum");
  EXPECT_EQ(sum.args.size(), k.buffers.size() + 1);
  Program p;
  p.add(k, "split");
  p.compile("split_k");
}

TEST(CudaContraction, TilesFollowTheProblem) {
  auto tileOf = [](int64_t batch, int64_t m, int64_t n, const char* t) {
    const auto ks = compiled(fmt::format("graph @g {{\n  input %a : {0}[{3},{1},64]\n  input %b : {0}[{3},64,{2}]\n"
                                         "  %y = matmul(%a, %b) : {0}[{3},{1},{2}]\n  output %y = %y\n}}\n", t, m, n, batch));
    cuda::RenderOptions o;
    o.blasLt = false;
    std::string code = cuda::renderKernel(contraction(ks), o).code;
    size_t at = code.find("tiles ");
    return at == std::string::npos ? code : code.substr(at + 6, code.find(',', at) - at - 6);
  };
  EXPECT_EQ(tileOf(1, 2048, 2048, "f32"), "128x128x16");
  EXPECT_EQ(tileOf(1, 1024, 1024, "f32"), "128x64x16");
  // K = 64 in one step where its one stage fits in shared memory (gemm::simtStep), not for the
  // largest tiles.
  EXPECT_EQ(tileOf(1, 512, 512, "f32"), "32x64x64");
  EXPECT_EQ(tileOf(1, 100, 100, "f32"), "32x32x64");
  // A convolution's few output channels (M) over many pixels (N): no rows of padding.
  EXPECT_EQ(tileOf(32, 32, 784, "f32"), "32x128x64");
  EXPECT_EQ(tileOf(32, 32, 784, "bf16"), "32x128x32");
  EXPECT_EQ(tileOf(1, 2048, 2048, "f64"), "64x64x16");
  EXPECT_EQ(tileOf(1, 2048, 2048, "bf16"), "128x128x32");
  EXPECT_EQ(tileOf(1, 30, 20, "bf16"), "32x32x32");
}

// ---- contractions: every form compiles --------------------------------------------------------------

TEST(CudaContraction, EveryFormCompiles) {
  Program p;
  int n = 0;
  auto add = [&](const std::string& a, const std::string& b, const std::string& node, bool blasLt) {
    std::string text = fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  {}\n  output %r = %r\n}}\n", a, b, node);
    cuda::RenderOptions o;
    o.blasLt = blasLt;
    p.addGraph(ir::parseGraph(text, "form.kir"), fmt::format("f{}", n++), o);
  };
  for (const char* t : {"f32", "bf16", "f16", "f64", "i32"}) {
    add(fmt::format("{}[37,23]", t), fmt::format("{}[23,19]", t), fmt::format("%r = matmul(%a, %b) : {}[37,19]", t), false);
    add(fmt::format("{}[23,37]", t), fmt::format("{}[19,23]", t),
        fmt::format("%r = matmul(%a, %b) {{transpose_a=true, transpose_b=true}} : {}[37,19]", t), false);
    add(fmt::format("{}[3,1,17,9]", t), fmt::format("{}[2,9,5]", t), fmt::format("%r = matmul(%a, %b) : {}[3,2,17,5]", t), false);
  }
  add("f32[2,3,9,7]", "f32[5,3,3,3]", "%r = conv2d(%a, %b) {stride=[1,1], padding=[1,1]} : f32[2,5,9,7]", true);
  // groups, stride, padding and dilation; bf16 on tensor cores
  for (const char* t : {"f32", "bf16"}) {
    add(fmt::format("{}[2,4,11,9]", t), fmt::format("{}[6,2,3,2]", t),
        fmt::format("%r = conv2d(%a, %b) {{stride=[2,1], padding=[1,2], dilation=[1,2], groups=2}} : {}[2,6,6,11]", t), true);
    // grad_input with stride 2: quotient terms
    add(fmt::format("{}[2,6,6,11]", t), fmt::format("{}[6,2,3,2]", t),
        fmt::format("%r = conv2d_grad_input(%a, %b) {{input_shape=[2,4,11,9], stride=[2,1], padding=[1,2], "
                    "dilation=[1,2], groups=2}} : {}[2,4,11,9]", t), true);
    add(fmt::format("{}[2,4,11,9]", t), fmt::format("{}[2,6,6,11]", t),
        fmt::format("%r = conv2d_grad_weight(%a, %b) {{weight_shape=[6,2,3,2], stride=[2,1], padding=[1,2], "
                    "dilation=[1,2], groups=2}} : {}[6,2,3,2]", t), true);
  }
  add("f16[1,3,8,10]", "f16[3,6,3,3]", "%r = conv2d_grad_input(%a, %b) {input_shape=[1,6,8,10], padding=[1,1], "
      "stride=[1,1]} : f16[1,6,8,10]", true);
  // K = 0: the epilogue sees zeros
  add("f32[4,0]", "f32[0,3]", "%r = matmul(%a, %b) : f32[4,3]", false);
  EXPECT_EQ(p.size(), static_cast<size_t>(n));
  p.compile("contractions");
}

TEST(CudaContraction, EveryTileCompiles) {
  // A convolution (bounds on both operands) with each tile the renderer may choose; the tiles'
  // code differs in sizes only, not in the instructions per architecture: sm_90.
  Program p;
  for (const char* t : {"f32", "bf16", "f64"})
    for (const cuda::gemm::Tile& tile : cuda::gemm::candidateTiles(*parseDType(t), 90)) {
      ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %a : {0}[2,8,12,12]\n  input %b : {0}[16,8,3,3]\n"
                                               "  %r = conv2d(%a, %b) {{padding=[1,1]}} : {0}[2,16,12,12]\n  output %r = %r\n}}\n", t),
                                   "tile.kir");
      kernels::Kernel k = kernels::lowerGraph(g).at(0);
      k.name = fmt::format("t{}_{}x{}_{}", t, tile.bm, tile.bn, k.name);
      cuda::RenderedKernel r = cuda::gemm::renderGeneratedGemm(k, tile);
      EXPECT_TRUE(contains(r.code, fmt::format("tiles {}x{}x{}", tile.bm, tile.bn, tile.bk))) << r.code;
      p.addRendered(std::move(r));
    }
  p.compile("tiles", {"sm_90"});
}
