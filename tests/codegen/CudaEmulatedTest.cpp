// What the CUDA op kernels and contractions compute, without a GPU: graphs rendered by the CUDA
// backend (codegen/cuda/RenderOps.cpp, RenderGemm.cpp, GemmKernel.cpp) run on the host emulator
// (CudaEmulation.h: real threads per block and barriers, ldmatrix/mma.sync from the PTX fragment
// layouts, cuBLASLt steps as a host GEMM) and are compared with the interpreter — every op kernel
// kind, every contraction form through cuBLASLt (folded epilogues, scratch plus an epilogue
// launch) and through the generated GEMM, split-K, and every tile on problems with tails in M, N
// and K. Bit-exact where the op is (copies, argmax, max pooling, uniform draws), within a
// tolerance per dtype for sums (accumulated in f32 in another order than the interpreter's f64).
#include "codegen/cuda/GemmTile.h"
#include "codegen/cuda/Render.h"
#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "passes/Pipeline.h"
#include "tests/codegen/CudaEmulation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

ir::TensorType tt(DType t, ir::Shape s) { return {t, std::move(s)}; }

}  // namespace

namespace {

/// Floats uniform in [-1, 1] (Ties: small integers with NaN, -0.0 and +0.0 mixed in); integers in
/// [0, limit).
rt::HostTensor randomTensor(const ir::TensorType& type, std::mt19937_64& rng, bool ties, int64_t limit) {
  rt::HostTensor t(type.dtype, type.shape);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::uniform_int_distribution<int> small(-3, 3), pick(0, 15);
  std::uniform_int_distribution<int64_t> index(0, std::max<int64_t>(limit - 1, 0));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!isFloat(type.dtype)) {
      t.set(i, type.dtype == DType::boolean ? pick(rng) % 2 : static_cast<double>(index(rng)));
    } else if (!ties) {
      t.set(i, uniform(rng));
    } else {
      int p = pick(rng);
      t.set(i, p == 0 ? NAN : p == 1 ? -0.0 : p == 2 ? 0.0 : small(rng));
    }
  }
  return t;
}

/// One graph checked on the emulator: its inputs, and the tolerance of its outputs (0: bit-exact,
/// else |got - want| <= tol · (1 + |want|)).
struct Check {
  size_t graph;
  std::string what;
  interp::TensorMap inputs;
  double tol;
};

class EmulatedSuite {
 public:
  EmulatedSuite() : rng_(20240611) {}

  /// Adds `g` rendered by `render`; inputs drawn as randomTensor(…, ties, limit).
  void add(ir::Graph g, const std::string& what, double tol, cudatest::EmulatedGraphs::Renderer render,
           bool ties = false, int64_t limit = 4, const interp::TensorMap& fixed = {}) {
    interp::TensorMap in = fixed;
    for (const ir::Value* v : g.inputs())
      if (!in.count(v->name)) in.emplace(v->name, randomTensor(v->type, rng_, ties, limit));
    size_t i = graphs_.add(std::move(g), std::move(render));
    checks_.push_back({i, what, std::move(in), tol});
  }

  /// Compiles everything and compares every graph with the interpreter.
  void run() {
    graphs_.compile();
    for (const Check& c : checks_) {
      SCOPED_TRACE(c.what);
      interp::TensorMap want = interp::run(graphs_.graph(c.graph), c.inputs);
      interp::TensorMap got = graphs_.run(c.graph, c.inputs);
      for (const auto& [name, w] : want) compare(got.at(name), w, c, name);
    }
  }

 private:
  void compare(const rt::HostTensor& got, const rt::HostTensor& want, const Check& c, const std::string& name) {
    ASSERT_EQ(got.numel(), want.numel());
    int reported = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      double g = got.at(i), w = want.at(i);
      bool ok = c.tol == 0 ? (std::isnan(w) ? std::isnan(g) : g == w && std::signbit(g) == std::signbit(w))
                           : (std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= c.tol * (1 + std::abs(w)));
      if (!ok && reported++ < 5) {
        std::string code;
        for (const cuda::RenderedKernel& r : graphs_.rendered(c.graph)) code += r.code;
        ADD_FAILURE() << c.what << ": output " << name << " element " << i << " is " << g << ", want " << w
                      << (reported == 1 ? "\n" + code : "");
      }
    }
  }

  std::mt19937_64 rng_;
  cudatest::EmulatedGraphs graphs_;
  std::vector<Check> checks_;
};

cuda::RenderedKernel renderDefault(const kernels::Kernel& k) { return cuda::renderKernel(k); }
cuda::RenderedKernel renderGenerated(const kernels::Kernel& k) {
  cuda::RenderOptions o;
  o.blasLt = false;
  return cuda::renderKernel(k, o);
}

/// A graph of inputs only after the default pipeline.
ir::Graph pipelined(const std::string& text, passes::Precision p = passes::Precision::F32) {
  ir::Graph g = ir::parseGraph(text, "emulated.kir");
  passes::PassContext ctx;
  ctx.precision = p;
  ctx.warn = [](const std::string&) {};
  passes::compileGraph(g, ctx);
  return g;
}

/// Tolerance of a result of `t` from K-term dot products of values in [-1, 1].
double gemmTol(DType t, int64_t k) {
  switch (t) {
    case DType::bf16: return 1.6e-2;
    case DType::f16: return 2e-3;
    case DType::f64: return 1e-12 * static_cast<double>(k + 2);
    case DType::f32: return 1.2e-7 * static_cast<double>(k + 2);
    default: return 0;
  }
}

bool emulation(std::string* why) { return cudatest::emulationAvailable(why); }

}  // namespace

TEST(CudaEmulated, OpKernelsMatchTheInterpreter) {
  std::string why;
  if (!emulation(&why)) GTEST_SKIP() << why;
  EmulatedSuite s;
  auto op = [&](OpKind kind, std::vector<ir::TensorType> types, std::vector<ir::NamedAttr> attrs, double tol,
                bool ties = false, int64_t limit = 4, const interp::TensorMap& fixed = {}) {
    std::string what = fmt::format("{} on {}", ir::opName(kind), ir::shapeStr(types.at(0).shape));
    s.add(single(kind, types, attrs), what, tol, renderDefault, ties, limit, fixed);
  };
  op(OpKind::Concat, {tt(DType::f32, {2, 3, 5}), tt(DType::f32, {2, 1, 5}), tt(DType::f32, {2, 4, 5})}, {{"axis", int64_t{1}}}, 0);
  op(OpKind::Concat, {tt(DType::boolean, {3, 2}), tt(DType::boolean, {3, 7})}, {{"axis", int64_t{1}}}, 0);
  op(OpKind::Concat, {tt(DType::f16, {7}), tt(DType::f16, {0}), tt(DType::f16, {9})}, {{"axis", int64_t{0}}}, 0);
  op(OpKind::Gather, {tt(DType::f32, {10, 7}), tt(DType::i32, {4, 3})}, {{"axis", int64_t{0}}}, 0, false, 10);
  op(OpKind::Gather, {tt(DType::f16, {3, 10, 7}), tt(DType::i64, {5})}, {{"axis", int64_t{1}}}, 0, false, 10);
  for (DType t : {DType::f32, DType::bf16, DType::i32})
    op(OpKind::ScatterAdd, {tt(DType::i64, {6, 5}), tt(t, {6, 5, 9})}, {{"axis", int64_t{0}}, {"dim_size", int64_t{11}}},
       t == DType::bf16 ? 1e-2 : 1e-6, false, 11);
  // More indices than a block stages at once.
  op(OpKind::ScatterAdd, {tt(DType::i32, {700}), tt(DType::f32, {2, 700, 3})}, {{"axis", int64_t{1}}, {"dim_size", int64_t{50}}},
     1e-5, false, 50);
  for (DType t : {DType::f32, DType::boolean})
    op(OpKind::OneHot, {tt(DType::i32, {5, 3})}, {{"num_classes", int64_t{10}}, {"dtype", t}}, 0, false, 12);
  for (OpKind k : {OpKind::ArgMax, OpKind::ArgMin}) {
    op(k, {tt(DType::f32, {4, 9, 5})}, {{"axis", int64_t{1}}}, 0, true);
    op(k, {tt(DType::f32, {33, 100})}, {{"axis", int64_t{-1}}}, 0, true);  // a warp per row
    op(k, {tt(DType::i32, {9, 70})}, {{"axis", int64_t{1}}}, 0, false, 5);
    op(k, {tt(DType::bf16, {6, 3})}, {{"axis", int64_t{0}}}, 0, true);
  }
  op(OpKind::SliceGrad, {tt(DType::f32, {2, 3, 4})},
     {{"shape", ir::Shape{5, 7, 4}}, {"starts", ir::Ints{1, 0, 0}}, {"steps", ir::Ints{2, 3, 1}}}, 0);
  op(OpKind::SliceGrad, {tt(DType::i64, {3, 2})}, {{"shape", ir::Shape{3, 9}}, {"starts", ir::Ints{0, 4}}, {"steps", ir::Ints{1, 4}}}, 0);
  for (const std::string dist : {"uniform", "normal"})
    for (DType t : {DType::f32, DType::bf16}) {
      std::vector<ir::NamedAttr> attrs = {{"shape", ir::Shape{7, 13}}, {"dtype", t}, {"dist", dist},
                                          {"seed", int64_t{1234567890123}}, {"offset", int64_t{3}}};
      interp::TensorMap step = {{"x0", rt::HostTensor::fromDoubles(DType::i64, {}, {-7})}};
      op(OpKind::Random, {tt(DType::i64, {})}, attrs, dist == "normal" ? 1e-6 : 0, false, 4, step);
    }
  struct Pool {
    ir::Shape x;
    ir::Ints kernel, stride, padding;
  };
  const Pool pools[] = {{{2, 3, 9, 7}, {3, 3}, {1, 1}, {1, 1}}, {{1, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0}},
                        {{2, 1, 11, 6}, {3, 2}, {2, 3}, {1, 0}}};
  for (const Pool& p : pools)
    for (DType t : {DType::f32, DType::bf16}) {
      std::vector<ir::NamedAttr> attrs = {{"kernel", p.kernel}, {"stride", p.stride}, {"padding", p.padding}};
      ir::Graph fwd = single(OpKind::MaxPool2d, {tt(t, p.x)}, attrs);
      ir::TensorType y = fwd.outputs()[0].value->type;
      double sum = t == DType::bf16 ? 1e-2 : 1e-6;
      op(OpKind::MaxPool2d, {tt(t, p.x)}, attrs, 0, true);
      op(OpKind::MaxPool2dGrad, {tt(t, p.x), y}, attrs, sum, true);
      for (bool includePad : {true, false}) {
        std::vector<ir::NamedAttr> avg = attrs;
        avg.push_back({"count_include_pad", includePad});
        op(OpKind::AvgPool2d, {tt(t, p.x)}, avg, sum);
        avg.push_back({"input_shape", p.x});
        op(OpKind::AvgPool2dGrad, {y}, avg, sum);
      }
    }
  s.run();
}

TEST(CudaEmulated, ContractionsMatchTheInterpreter) {
  std::string why;
  if (!emulation(&why)) GTEST_SKIP() << why;
  EmulatedSuite s;
  auto graph = [](const std::string& a, const std::string& b, const std::string& node, const std::string& rest = "") {
    return fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  {}\n{}  output %r = %r\n}}\n", a, b, node, rest);
  };
  auto both = [&](const std::string& text, const std::string& what, double tol, passes::Precision p = passes::Precision::F32) {
    s.add(pipelined(text, p), what + " (cuBLASLt)", tol, renderDefault);
    s.add(pipelined(text, p), what + " (generated)", tol, renderGenerated);
  };
  // Convolutions are never cuBLASLt products: one rendering.
  auto conv = [&](const std::string& text, const std::string& what, double tol) {
    s.add(pipelined(text), what, tol, renderDefault);
  };
  // Linear layers: cuBLASLt with its epilogue folded, or through scratch; the generated GEMM.
  const char* linear = R"(graph @g {
  input %x : f32[37,23]
  input %w : f32[19,23]
  input %c : f32[19]
  %h = linear(%x, %w, %c) : f32[37,19]
  %r = ACT
  output %r = %r
}
)";
  for (const char* act : {"relu(%h) : f32[37,19]", "gelu(%h) {approximate=\"tanh\"} : f32[37,19]", "gelu(%h) : f32[37,19]",
                          "sigmoid(%h) : f32[37,19]"}) {
    std::string text = linear;
    text.replace(text.find("ACT"), 3, act);
    both(text, act, gemmTol(DType::f32, 23) + 1e-6);
  }
  {
    std::string amp = linear;
    amp.replace(amp.find("ACT"), 3, "relu(%h) : f32[37,19]");
    both(amp, "amp bf16 linear", 2e-2, passes::Precision::BF16);
  }
  for (const char* t : {"f32", "f64", "i32", "bf16", "f16"}) {
    DType dt = *parseDType(t);
    double tol = gemmTol(dt, 33);
    both(graph(fmt::format("{}[37,33]", t), fmt::format("{}[33,19]", t), fmt::format("%r = matmul(%a, %b) : {}[37,19]", t)),
         fmt::format("{} matmul", t), tol);
    if (dt == DType::f16) continue;  // the same code as bf16 but for the mma instruction
    both(graph(fmt::format("{}[33,70]", t), fmt::format("{}[45,33]", t),
               fmt::format("%r = matmul(%a, %b) {{transpose_a=true, transpose_b=true}} : {}[70,45]", t)),
         fmt::format("{} matmul transposed", t), tol);
    both(graph(fmt::format("{}[3,1,17,9]", t), fmt::format("{}[2,9,5]", t), fmt::format("%r = matmul(%a, %b) : {}[3,2,17,5]", t)),
         fmt::format("{} matmul broadcast batches", t), gemmTol(dt, 9));
  }
  both(graph("f32[2,3,5,6]", "f32[2,3,7,6]", "%r = matmul(%a, %b) {transpose_b=true} : f32[2,3,5,7]"), "strided batches",
       gemmTol(DType::f32, 6));
  both(graph("f32[3,5,6]", "f32[6,7]", "%r = matmul(%a, %b) : f32[3,5,7]"), "batches of A against one B", gemmTol(DType::f32, 6));
  both(graph("f32[5,6]", "f32[4,6,7]", "%r = matmul(%a, %b) : f32[4,5,7]"), "one A against batches of B", gemmTol(DType::f32, 6));
  both(graph("f32[4,0]", "f32[0,3]", "%r = matmul(%a, %b) : f32[4,3]"), "K = 0", 0);
  // Operands through views folded into the kernel (kernels::Contraction): attention heads sliced
  // out of a permuted projection (generated: not cuBLASLt's strides), a reshaped input (cuBLASLt).
  for (const char* t : {"f32", "bf16"})
    both(fmt::format(R"(graph @g {{
  input %x : {0}[30,24]
  input %w : {0}[3,7,8]
  input %m : {0}[8,5]
  %r = reshape(%x) {{shape=[6,5,3,2,4]}} : {0}[6,5,3,2,4]
  %p = permute(%r) {{perm=[2,0,3,1,4]}} : {0}[3,6,2,5,4]
  %q1 = slice(%p) {{starts=[0,0,0,0,0], ends=[1,6,2,5,4], steps=[1,1,1,1,1]}} : {0}[1,6,2,5,4]
  %k1 = slice(%p) {{starts=[1,0,0,0,0], ends=[2,6,2,5,4], steps=[1,1,1,1,1]}} : {0}[1,6,2,5,4]
  %q = reshape(%q1) {{shape=[6,2,5,4]}} : {0}[6,2,5,4]
  %k = reshape(%k1) {{shape=[6,2,5,4]}} : {0}[6,2,5,4]
  %s = matmul(%q, %k) {{transpose_b=true}} : {0}[6,2,5,5]
  %f = reshape(%w) {{shape=[21,8]}} : {0}[21,8]
  %h = matmul(%f, %m) : {0}[21,5]
  output %s = %s
  output %h = %h
}}
)", t), fmt::format("{} operands through views", t), gemmTol(*parseDType(t), 8));
  // Convolutions: implicit GEMM with padding, strides, dilation and groups; gradients.
  for (const char* t : {"f32", "bf16"}) {
    DType dt = *parseDType(t);
    conv(graph(fmt::format("{}[2,3,9,7]", t), fmt::format("{}[5,3,3,3]", t),
               fmt::format("%r = conv2d(%a, %b) {{padding=[1,1]}} : {}[2,5,9,7]", t)),
         fmt::format("{} conv2d 3x3", t), gemmTol(dt, 27));
    conv(graph(fmt::format("{}[2,4,11,9]", t), fmt::format("{}[6,2,3,2]", t),
               fmt::format("%r = conv2d(%a, %b) {{stride=[2,1], padding=[1,2], dilation=[1,2], groups=2}} : {}[2,6,6,11]", t)),
         fmt::format("{} conv2d grouped", t), gemmTol(dt, 12));
    conv(graph(fmt::format("{}[2,6,6,11]", t), fmt::format("{}[6,2,3,2]", t),
               fmt::format("%r = conv2d_grad_input(%a, %b) {{input_shape=[2,4,11,9], stride=[2,1], padding=[1,2], "
                           "dilation=[1,2], groups=2}} : {}[2,4,11,9]", t)),
         fmt::format("{} conv2d_grad_input strided", t), gemmTol(dt, 18));
    conv(graph(fmt::format("{}[2,4,3,3]", t), fmt::format("{}[4,3,3,3]", t),
               fmt::format("%r = conv2d_grad_input(%a, %b) {{input_shape=[2,3,9,8], stride=[3,2], padding=[1,0]}} : {}[2,3,9,8]", t)),
         fmt::format("{} conv2d_grad_input stride 3x2", t), gemmTol(dt, 36));
    conv(graph(fmt::format("{}[2,4,11,9]", t), fmt::format("{}[2,6,6,11]", t),
               fmt::format("%r = conv2d_grad_weight(%a, %b) {{weight_shape=[6,2,3,2], stride=[2,1], padding=[1,2], "
                           "dilation=[1,2], groups=2}} : {}[6,2,3,2]", t)),
         fmt::format("{} conv2d_grad_weight", t), gemmTol(dt, 132));
  }
  conv(R"(graph @c {
  input %x : f32[2,3,9,7]
  input %w : f32[5,3,3,3]
  input %c : f32[5]
  %y = conv2d(%x, %w) {padding=[1,1]} : f32[2,5,9,7]
  %cc = reshape(%c) {shape=[1,5,1,1]} : f32[1,5,1,1]
  %z = add(%y, %cc) : f32[2,5,9,7]
  %r = relu(%z) : f32[2,5,9,7]
  output %r = %r
}
)", "conv2d + bias + relu", gemmTol(DType::f32, 27));
  // Split-K: small results over long K.
  for (const char* t : {"f32", "bf16"})
    conv(graph(fmt::format("{}[8,4,16,16]", t), fmt::format("{}[8,8,16,16]", t),
               fmt::format("%r = conv2d_grad_weight(%a, %b) {{weight_shape=[8,4,3,3], padding=[1,1]}} : {}[8,4,3,3]", t)),
         fmt::format("{} conv2d_grad_weight split over K", t), gemmTol(*parseDType(t), 2048));
  s.add(pipelined(graph("i32[4,3000]", "i32[3000,5]", "%r = matmul(%a, %b) : i32[4,5]")), "i32 matmul split over K", 0,
        renderGenerated, false, 7);
  // Every tile, on problems with tails in M, N and K; the smaller SIMT tiles also with the wider K
  // steps of a short K (gemm::simtStep): K = 40 in two steps of 32 and in one of 64 (one stage).
  for (const char* t : {"f32", "f64", "bf16"}) {
    DType dt = *parseDType(t);
    std::vector<cuda::gemm::Tile> tiles = cuda::gemm::candidateTiles(dt, 90);
    for (const cuda::gemm::Tile& tile : cuda::gemm::candidateTiles(dt, 90))
      if (!tile.mma && tile.bm <= 64 && tile.bn <= 64)
        for (int bk : {32, 64}) {
          cuda::gemm::Tile wide = tile;
          wide.bk = bk;
          tiles.push_back(wide);
        }
    for (const cuda::gemm::Tile& tile : tiles) {
      std::string text = graph(fmt::format("{}[{},40]", t, tile.bm - 3), fmt::format("{}[40,{}]", t, tile.bn - 5),
                               fmt::format("%r = matmul(%a, %b) : {}[{},{}]", t, tile.bm - 3, tile.bn - 5));
      s.add(pipelined(text), fmt::format("{} tile {}x{}x{}", t, tile.bm, tile.bn, tile.bk), gemmTol(dt, 40),
            [tile](const kernels::Kernel& k) { return cuda::gemm::renderGeneratedGemm(k, tile); });
      std::string conv = graph(fmt::format("{}[1,4,9,10]", t), fmt::format("{}[6,4,3,3]", t),
                               fmt::format("%r = conv2d(%a, %b) {{padding=[1,1]}} : {}[1,6,9,10]", t));
      s.add(pipelined(conv), fmt::format("{} conv tile {}x{}x{}", t, tile.bm, tile.bn, tile.bk), gemmTol(dt, 36),
            [tile](const kernels::Kernel& k) { return cuda::gemm::renderGeneratedGemm(k, tile); });
    }
  }
  s.run();
}
