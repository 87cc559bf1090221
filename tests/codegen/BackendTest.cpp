// The LLVM CPU backend against the reference interpreter: every elementwise primitive and
// reduction on awkward shapes and all dtypes, fused patterns, random graphs, and every zoo
// model's inference graph, programs and their compiles, on pools of 1 and 2 threads (training
// steps: BackendTrainingTest.cpp).
//
// The backend computes f32 in f32 (the interpreter in f64), sums in another order and uses
// VecMath's approximations, so values agree within tolerances scaled to each dtype; integer,
// bool and movement results agree exactly.
#include "BackendTestSupport.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "codegen/cpu/Program.h"
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/Decompose.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/ThreadPool.h"
#include "support/FloatMode.h"
#include "support/PeakLoops.h"
#include "tests/runtime/TestFiles.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kiln;
using namespace kiln::cputest;

namespace {

/// The .kir text of a shorthand "graph @g(%x: T, …) {\n  nodes…\n  return %a, …\n}": the inputs
/// become `input` lines and the returned values outputs of the same name.
std::string expand(const std::string& shorthand) {
  size_t open = shorthand.find('('), close = shorthand.find(')');
  std::string text = shorthand.substr(0, open) + " {\n";
  std::string params = shorthand.substr(open + 1, close - open - 1);
  for (size_t at = 0; at < params.size();) {
    size_t end = params.find(", ", at);
    if (end == std::string::npos) end = params.size();
    std::string p = params.substr(at, end - at);
    size_t colon = p.find(':');
    text += "  input " + p.substr(0, colon) + " :" + p.substr(colon + 1) + "\n";
    at = end + 2;
  }
  std::string body = shorthand.substr(shorthand.find('\n', close) + 1);
  size_t ret = body.find("  return ");
  text += body.substr(0, ret);
  std::string outs = body.substr(ret + 9, body.find('\n', ret) - ret - 9);
  for (size_t at = 0; at < outs.size();) {
    size_t end = outs.find(", ", at);
    if (end == std::string::npos) end = outs.size();
    std::string v = outs.substr(at, end - at);
    text += "  output " + v + " = " + v + "\n";
    at = end + 2;
  }
  return text + "}\n";
}

/// A one-op (or few-op) graph in shorthand .kir text run on the backend and the interpreter.
/// The graph in `shorthand` on `threads` against the interpreter; `scaleFactor` as expectClose's
/// (1 where long dot products dominate: TensorClose.h).
void checkText(const std::string& shorthand, const std::string& what, int threads, double scaleFactor = 1e-2) {
  ir::Graph g = ir::parseGraph(expand(shorthand), what + ".kir");
  interp::TensorMap in = kiln::testing::randomInputs(g, 11);
  interp::TensorMap want = interp::run(g, in);
  std::unique_ptr<cpu::Program> p = compileFor(g, threads);
  expectClose(want, p->run(in), fmt::format("{} ({} threads)", what, threads), scaleFactor);
}

std::string shapeText(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

}  // namespace

TEST(CpuBackend, ElementwiseOpsOnAwkwardShapes) {
  const char* unaryFloat[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
                              "sigmoid", "sin", "cos", "erf", "relu", "floor"};
  const char* binaryFloat[] = {"add", "sub", "mul", "div", "pow", "max", "min"};
  const char* compare[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  // One graph per shape and dtype with every op as an output (fused into one kernel).
  for (int threads : {1, 2})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {33}, {257}, {1000}, {3, 1000}, {33, 7, 5}})
      for (const char* dt : {"f32", "f16", "bf16", "f64"}) {
        std::string t = fmt::format("{}{}", dt, shapeText(shape));
        std::string body, outputs;
        auto add = [&](const std::string& name, const std::string& node) {
          body += fmt::format("  %{} = {}\n", name, node);
          outputs += (outputs.empty() ? "%" : ", %") + name;
        };
        for (const char* op : unaryFloat) add(op, fmt::format("{}(%x) : {}", op, t));
        for (const char* op : binaryFloat) add(op, fmt::format("{}(%x, %z) : {}", op, t));
        for (const char* op : compare) add(op, fmt::format("{}(%x, %z) : bool{}", op, shapeText(shape)));
        checkText(fmt::format("graph @g(%x: {0}, %z: {0}) {{\n{1}  return {2}\n}}\n", t, body, outputs),
                  "elementwise " + t, threads);
      }
}

TEST(CpuBackend, NarrowingIntegerCastSaturates) {
  // i64 → i32 saturates (docs/IR.md), where i32 arithmetic wraps.
  ir::Graph g = ir::parseGraph(expand("graph @g(%x: i64[6]) {\n  %y = cast(%x) {dtype=i32} : i32[6]\n"
                                      "  %w = add(%y, %y) : i32[6]\n  return %y, %w\n}\n"),
                               "narrow.kir");
  rt::HostTensor x(DType::i64, {6});
  const double values[] = {5e9, -5e9, 2147483647, -2147483648.0, 2147483648.0, -7};
  for (int64_t i = 0; i < 6; ++i) x.set(i, values[i]);
  interp::TensorMap in{{"x", x}};
  interp::TensorMap want = interp::run(g, in);
  EXPECT_EQ(want.at("y").at(0), 2147483647);
  EXPECT_EQ(want.at("w").at(0), -2);  // 2 · (2^31 − 1) wraps
  for (int threads : {1, 2}) {
    interp::TensorMap got = compileFor(g, threads)->run(in);
    for (const char* name : {"y", "w"})
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(got.at(name).at(i), want.at(name).at(i)) << name << "[" << i << "]";
  }
}

TEST(CpuBackend, IntegerBoolAndCastOps) {
  for (int threads : {1, 2})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {257}, {5, 33}}) {
      std::string s = shapeText(shape);
      for (const char* it : {"i32", "i64"}) {
        for (const char* op : {"add", "sub", "mul", "div", "max", "min"})
          checkText(fmt::format("graph @g(%x: {0}{1}, %z: {0}{1}) {{\n  %y = {2}(%x, %z) : {0}{1}\n  return %y\n}}\n",
                                it, s, op),
                    fmt::format("{} {}{}", op, it, s), threads);
        for (const char* op : {"neg", "abs", "relu"})
          checkText(fmt::format("graph @g(%x: {0}{1}) {{\n  %y = {2}(%x) : {0}{1}\n  return %y\n}}\n", it, s, op),
                    fmt::format("{} {}{}", op, it, s), threads);
      }
      for (const char* from : {"f32", "f16", "bf16", "f64", "i32", "i64", "bool"})
        for (const char* to : {"f32", "f16", "bf16", "f64", "i32", "i64", "bool"})
          checkText(fmt::format("graph @g(%x: {0}{2}) {{\n  %y = cast(%x) {{dtype={1}}} : {1}{2}\n  return %y\n}}\n",
                                from, to, s),
                    fmt::format("cast {}→{} {}", from, to, s), threads);
      checkText(fmt::format("graph @g(%x: f32{0}, %z: f32{0}) {{\n  %a = lt(%x, %z) : bool{0}\n  %b = gt(%x, %z) : bool{0}\n"
                            "  %c = or(%a, %b) : bool{0}\n  %d = not(%c) : bool{0}\n  %e = and(%a, %d) : bool{0}\n"
                            "  %y = select(%c, %x, %z) : f32{0}\n  return %d, %e, %y\n}}\n",
                            s),
                "bool ops " + s, threads);
    }
}

TEST(CpuBackend, ReductionsOverEveryAxis) {
  for (int threads : {1, 2})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1000}, {7, 33}, {257, 3}, {5, 7, 9}, {2, 1000}})
      for (const char* op : {"reduce_sum", "reduce_max", "reduce_min"})
        for (const char* dt : {"f32", "f16", "f64", "i64"})
          for (size_t axis = 0; axis <= shape.size(); ++axis) {
            // axis == rank: all axes
            std::vector<int64_t> axes, out;
            for (size_t d = 0; d < shape.size(); ++d) {
              if (axis == shape.size() || d == axis) axes.push_back(static_cast<int64_t>(d));
              else out.push_back(shape[d]);
            }
            checkText(fmt::format("graph @g(%x: {0}{1}) {{\n  %y = {2}(%x) {{axes={3}}} : {0}{4}\n  return %y\n}}\n", dt,
                                  shapeText(shape), op, shapeText(axes), shapeText(out)),
                      fmt::format("{} {}{} axes {}", op, dt, shapeText(shape), shapeText(axes)), threads);
          }
}

TEST(CpuBackend, FusedPatterns) {
  for (int threads : {1, 2}) {
    // softmax and log_softmax rows (reductions feeding reductions, outer and full stores); rows
    // shorter than a vector ([257, 10], [3, 40, 5], [100, 2]) run a vector of rows at a time
    for (const char* op : {"softmax", "log_softmax"})
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{7, 33}, {257, 10}, {3, 1000}, {3, 40, 5}, {100, 2}, {5, 3}})
        checkText(fmt::format("graph @g(%x: f32{0}) {{\n  %y = {1}(%x) {{axis=-1}} : f32{0}\n  return %y\n}}\n",
                              shapeText(shape), op),
                  fmt::format("{} {}", op, shapeText(shape)), threads);
    // layer norm with affine parameters; softmax over a leading axis
    checkText("graph @g(%x: f32[33,257], %w: f32[257], %b: f32[257]) {\n"
              "  %y = layer_norm(%x, %w, %b) {normalized_ndim=1} : f32[33,257]\n  return %y\n}\n",
              "layer_norm", threads);
    checkText("graph @g(%x: f32[33,7]) {\n  %y = softmax(%x) {axis=0} : f32[33,7]\n  return %y\n}\n",
              "softmax axis 0", threads);
    // broadcasts, permutes, slices, pads feeding elementwise ops
    checkText("graph @g(%x: f32[7,33], %b: f32[33]) {\n"
              "  %t = permute(%x) {perm=[1,0]} : f32[33,7]\n"
              "  %s = slice(%t) {starts=[1,0], ends=[33,7], steps=[2,1]} : f32[16,7]\n"
              "  %p = pad(%s) {low=[1,2], high=[0,1], value=0.5} : f32[17,10]\n"
              "  %e = exp(%p) : f32[17,10]\n"
              "  %y = add(%e, %p) : f32[17,10]\n  return %y\n}\n",
              "views", threads);
    checkText("graph @g(%x: f32[33,257], %b: f32[257]) {\n"
              "  %y = add(%x, %b) : f32[33,257]\n  %r = relu(%y) : f32[33,257]\n"
              "  %s = reduce_sum(%r) {axes=[0]} : f32[257]\n  return %r, %s\n}\n",
              "bias relu column sum", threads);
    checkText("graph @g(%x: f32[5,6,7,9]) {\n  %y = reduce_sum(%x) {axes=[0,2,3]} : f32[6]\n"
              "  %m = reduce_max(%x) {axes=[1,3], keepdim=true} : f32[5,1,7,1]\n  return %y, %m\n}\n",
              "conv-like reductions", threads);
    // Reductions over a dimension outside the kept one, in item blocks (13 channels: a block of 8
    // and one of 5): a per-channel mean feeding a centred sum of squares, the centred values stored
    // inside the reduced dimensions; and an integer max.
    checkText("graph @g(%x: f32[5,13,7,9]) {\n  %m = reduce_sum(%x) {axes=[0,2,3], keepdim=true} : f32[1,13,1,1]\n"
              "  %d = sub(%x, %m) : f32[5,13,7,9]\n  %s = mul(%d, %d) : f32[5,13,7,9]\n"
              "  %v = reduce_sum(%s) {axes=[0,2,3]} : f32[13]\n  return %d, %v\n}\n",
              "centred sum of squares per channel", threads);
    checkText("graph @g(%x: i64[3,17,2,33]) {\n  %y = reduce_max(%x) {axes=[0,2,3]} : i64[17]\n  return %y\n}\n",
              "integer max per channel", threads);
    checkText("graph @g(%x: f32[1000]) {\n  %i = iota() {shape=[1000], axis=0, dtype=f32} : f32[1000]\n"
              "  %r = random() {shape=[1000], dtype=f32, dist=\"uniform\", seed=5, offset=3} : f32[1000]\n"
              "  %n = random() {shape=[1000], dtype=f32, dist=\"normal\", seed=9, offset=0} : f32[1000]\n"
              "  %a = add(%x, %i) : f32[1000]\n  %b = mul(%a, %r) : f32[1000]\n  %y = add(%b, %n) : f32[1000]\n"
              "  return %y\n}\n",
              "iota and random", threads);
  }
}

// Matmul operands read through views of memory (kernels::Contraction): the fuse pass folds the
// reshapes, permutes, slices and broadcasts into the contraction kernel instead of copying.
TEST(CpuBackend, MatMulOperandsThroughViews) {
  for (int threads : {1, 2})
    for (const char* t : {"f32", "bf16", "f64"}) {
      // Attention heads: a [B·T, 3·H·D] projection split into q, k and v by a reshape, a permute
      // and slices; q·kᵀ, then the scores times v.
      checkText(fmt::format("graph @g(%x: {0}[30,24], %s: {0}[6,2,5,5]) {{\n"
                            "  %r = reshape(%x) {{shape=[6,5,3,2,4]}} : {0}[6,5,3,2,4]\n"
                            "  %p = permute(%r) {{perm=[2,0,3,1,4]}} : {0}[3,6,2,5,4]\n"
                            "  %q1 = slice(%p) {{starts=[0,0,0,0,0], ends=[1,6,2,5,4], steps=[1,1,1,1,1]}} : {0}[1,6,2,5,4]\n"
                            "  %k1 = slice(%p) {{starts=[1,0,0,0,0], ends=[2,6,2,5,4], steps=[1,1,1,1,1]}} : {0}[1,6,2,5,4]\n"
                            "  %v1 = slice(%p) {{starts=[2,0,0,0,0], ends=[3,6,2,5,4], steps=[1,1,1,1,1]}} : {0}[1,6,2,5,4]\n"
                            "  %q = reshape(%q1) {{shape=[6,2,5,4]}} : {0}[6,2,5,4]\n"
                            "  %k = reshape(%k1) {{shape=[6,2,5,4]}} : {0}[6,2,5,4]\n"
                            "  %v = reshape(%v1) {{shape=[6,2,5,4]}} : {0}[6,2,5,4]\n"
                            "  %a = matmul(%q, %k) {{transpose_b=true}} : {0}[6,2,5,5]\n"
                            "  %o = matmul(%s, %v) : {0}[6,2,5,4]\n"
                            "  %g = matmul(%s, %q) {{transpose_a=true}} : {0}[6,2,5,4]\n"
                            "  return %a, %o, %g\n}}\n",
                            t),
                fmt::format("{} attention heads through views", t), threads);
      // A layer over [B, T, D] as one product of a reshaped input; strided rows; a broadcast B.
      checkText(fmt::format("graph @g(%x: {0}[3,7,33], %w: {0}[19,33], %y: {0}[40,33], %b: {0}[33,19]) {{\n"
                            "  %f = reshape(%x) {{shape=[21,33]}} : {0}[21,33]\n"
                            "  %h = matmul(%f, %w) {{transpose_b=true}} : {0}[21,19]\n"
                            "  %e = slice(%y) {{starts=[1,0], ends=[40,33], steps=[2,1]}} : {0}[20,33]\n"
                            "  %l = matmul(%e, %b) : {0}[20,19]\n"
                            "  %c = broadcast(%b) {{shape=[3,33,19]}} : {0}[3,33,19]\n"
                            "  %n = matmul(%x, %c) : {0}[3,7,19]\n"
                            "  %u = permute(%y) {{perm=[1,0]}} : {0}[33,40]\n"
                            "  %z = matmul(%u, %y) : {0}[33,33]\n"
                            "  return %h, %l, %n, %z\n}}\n",
                            t),
                fmt::format("{} reshaped, strided, broadcast and permuted operands", t), threads);
      // The same views on the packed path, where an A with its k contiguous is read in place:
      // rows lda apart from the view's first element (every other row; a slice of columns).
      checkText(fmt::format("graph @g(%x: {0}[3,50,301], %w: {0}[190,301], %y: {0}[401,303], %b: {0}[300,190]) {{\n"
                            "  %f = reshape(%x) {{shape=[150,301]}} : {0}[150,301]\n"
                            "  %h = matmul(%f, %w) {{transpose_b=true}} : {0}[150,190]\n"
                            "  %e = slice(%y) {{starts=[1,2], ends=[401,302], steps=[2,1]}} : {0}[200,300]\n"
                            "  %l = matmul(%e, %b) : {0}[200,190]\n"
                            "  return %h, %l\n}}\n",
                            t),
                fmt::format("{} views read in place", t), threads, 1.0);
    }
}

// Pads of leading dimensions (whole rows of padding: a branch per row) and of the last one (lanes
// masked), alone and summed as canonicalize makes the gradients of slices of one tensor.
TEST(CpuBackend, PaddedRowsAndColumns) {
  for (int threads : {1, 2})
    for (const char* t : {"f32", "bf16", "f64", "i32"})
      checkText(fmt::format("graph @g(%a: {0}[2,5,33], %b: {0}[1,5,33], %c: {0}[4,5,30]) {{\n"
                            "  %pa = pad(%a) {{low=[0,0,0], high=[2,0,0], value=0}} : {0}[4,5,33]\n"
                            "  %pb = pad(%b) {{low=[3,0,0], high=[0,0,0], value=0}} : {0}[4,5,33]\n"
                            "  %pc = pad(%c) {{low=[0,0,1], high=[0,0,2], value=0}} : {0}[4,5,33]\n"
                            "  %s = add(%pa, %pb) : {0}[4,5,33]\n"
                            "  %y = add(%s, %pc) : {0}[4,5,33]\n"
                            "  %r = pad(%b) {{low=[1,2,0], high=[1,0,0], value=1.5}} : {0}[3,7,33]\n"
                            "  return %y, %r\n}}\n",
                            t),
                fmt::format("{} padded rows and columns", t), threads);
}

// Lanes a few elements apart (a permuted [37, S] operand read along its 37 rows) load the lanes'
// span as one wide vector and shuffle, its elements past the last lane masked off (the buffer may
// end there); S = 5 gathers. Every dtype, 1 and 2 threads, against the interpreter.
TEST(CpuBackend, StridedLanes) {
  for (int threads : {1, 2})
    for (const char* t : {"f32", "bf16", "f64", "i32"})
      for (int stride : {2, 3, 4, 5})
        checkText(fmt::format("graph @g(%x: {0}[37,{1}], %z: {0}[{1},37]) {{\n"
                              "  %p = permute(%x) {{perm=[1,0]}} : {0}[{1},37]\n"
                              "  %y = add(%p, %z) : {0}[{1},37]\n"
                              "  return %y\n}}\n",
                              t, stride),
                  fmt::format("{} lanes {} apart", t, stride), threads);
}

TEST(CpuBackend, RandomGraphs) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    ir::Graph g = kiln::testing::randomGraph(seed);
    interp::TensorMap in = kiln::testing::randomInputs(g, seed);
    interp::TensorMap want = interp::run(g, in);
    std::unique_ptr<cpu::Program> p = compileFor(g, 1 + static_cast<int>(seed % 2));
    expectClose(want, p->run(in), fmt::format("random graph {}", seed), 1e-2);
    if (HasFailure()) {
      ADD_FAILURE() << ir::printGraph(g);
      return;
    }
  }
}

TEST(CpuBackend, ZooModelsInference) {
  for (const std::string& name : zooModelNames())
    for (int64_t batch : {1, 3}) {
      ZooOptions o;
      o.batch = batch;
      o.withLoss = false;
      ir::Graph g = buildZooModel(name, o);
      interp::TensorMap in = modelInputs(g);
      interp::TensorMap params = interp::initializeParams(g);
      interp::TensorMap want = interp::run(g, in, params);
      std::unique_ptr<cpu::Program> p = compileFor(g, 2);
      expectClose(want, p->run(in), fmt::format("{} inference b{}", name, batch));
    }
}

/// Two programs of one graph compute the same bits: outputs of two steps, then the parameters.
void expectSameBits(cpu::Program& a, cpu::Program& b, const interp::TensorMap& in, const std::string& what) {
  for (int step = 0; step < 2; ++step) {
    interp::TensorMap wa = a.run(in), wb = b.run(in);
    for (const auto& [key, t] : wa)
      EXPECT_EQ(std::memcmp(t.data(), wb.at(key).data(), t.bytes()), 0) << what << " step " << step << " " << key;
  }
  interp::TensorMap pa = a.params(), pb = b.params();
  for (const auto& [key, t] : pa) EXPECT_EQ(std::memcmp(t.data(), pb.at(key).data(), t.bytes()), 0) << what << " " << key;
}

// A large module is split and its parts compiled on threads of their own (codegen/cpu/ModuleSplit.h);
// the code of every function must be what compiling the module whole gives: same results, bit for bit.
TEST(CpuBackend, ParallelCompileEqualsWholeCompile) {
  cpu::JitOptions whole, split;
  whole.compileThreads = 1;
  split.compileThreads = 4;
  cpu::Jit wholeJit(whole), splitJit(split);
  for (const char* name : {"mnist_mlp", "cnn", "transformer"}) {
    const ir::Graph g = adamStep(name, 3);
    interp::TensorMap in = modelInputs(g);
    std::unique_ptr<cpu::Program> a = compileWith(g, wholeJit);
    std::unique_ptr<cpu::Program> b = compileWith(g, splitJit);
    EXPECT_EQ(a->stats().compileParts, 1) << name;
    EXPECT_GT(b->stats().compileParts, 1) << name;
    expectSameBits(*a, *b, in, name);
  }
}

// The shared GEMM routines prebuilt with kiln (codegen/cpu/PrebuiltGemm.h) are the routines a
// module would define itself, compiled once: every zoo model's training step, at a batch of the
// small path and one of the L1 and packed paths, links all of its routines (the build's set covers
// them) and computes what the program that compiles them computes, bit for bit — on the host's
// level and on x86-64 (SSE2). A Jit for Skylake-X takes the AVX-512 level, and its programs link
// (every symbol resolved), though this CPU may not run them.
TEST(CpuBackend, PrebuiltGemmRoutinesAreTheCompiledOnes) {
  cpu::JitOptions compiledOptions;
  compiledOptions.prebuiltGemm = false;
  cpu::Jit compiledJit(compiledOptions);
  if (!cpu::Jit::host().prebuiltGemm()) GTEST_SKIP() << "kiln has no prebuilt GEMM routines for this CPU";
  cpu::JitOptions sse2;
  sse2.cpu = "x86-64";
  cpu::Jit linkedSse2(sse2);
  sse2.prebuiltGemm = false;
  cpu::Jit compiledSse2(sse2);
  EXPECT_EQ(linkedSse2.prebuiltGemmCpu(), "x86-64");
  EXPECT_EQ(compiledSse2.prebuiltGemm(), nullptr);
  struct Pair {
    cpu::Jit* linked;
    cpu::Jit* compiled;
  };
  cpu::Jit& host = cpu::Jit::host();
  for (Pair jits : {Pair{&host, &compiledJit}, Pair{&linkedSse2, &compiledSse2}})
    for (const std::string& name : zooModelNames())
      for (int64_t batch : {3, 64}) {
        if (jits.linked == &linkedSse2 && (batch != 64 || (name != "mnist_mlp" && name != "cnn"))) continue;
        const ir::Graph g = adamStep(name, batch);
        interp::TensorMap in = modelInputs(g);
        std::unique_ptr<cpu::Program> a = compileWith(g, *jits.linked);
        std::unique_ptr<cpu::Program> b = compileWith(g, *jits.compiled);
        const std::string what = fmt::format("{} b{} on {}", name, batch, jits.linked->cpu());
        EXPECT_GT(a->stats().gemmRoutinesLinked, 0) << what;
        EXPECT_EQ(a->stats().gemmRoutinesCompiled, 0) << what << ": routines the prebuilt set lacks";
        EXPECT_EQ(b->stats().gemmRoutinesLinked, 0) << what;
        // A linked driver brings the routines it calls along: the compiled module defines those too.
        EXPECT_GE(b->stats().gemmRoutinesCompiled, a->stats().gemmRoutinesLinked) << what;
        expectSameBits(*a, *b, in, what);
      }
  cpu::JitOptions avx512;
  avx512.cpu = "skylake-avx512";
  cpu::Jit skx(avx512);
  EXPECT_EQ(skx.prebuiltGemmCpu(), "x86-64-v4");
  const ir::Graph g = adamStep("cnn", 32);
  cpu::ProgramOptions po;
  po.jit = &skx;
  std::unique_ptr<cpu::Program> p = cpu::Program::compile(g, po);
  EXPECT_GT(p->stats().gemmRoutinesLinked, 0);
  EXPECT_EQ(p->stats().gemmRoutinesCompiled, 0);
  // A CPU with AVX512-BF16 and AMX takes the sapphirerapids level, whose routines include the bf16
  // k-pair path on tiles.
  cpu::JitOptions bf16;
  bf16.cpu = "sapphirerapids";
  cpu::Jit spr(bf16);
  EXPECT_EQ(spr.prebuiltGemmCpu(), "sapphirerapids");
  po.jit = &spr;
  for (const char* name : {"mnist_mlp", "cnn"}) {
    ZooOptions o;
    o.batch = 64;
    ir::Graph step = buildZooModel(name, o);
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
    to.precision = passes::Precision::BF16;
    passes::buildTrainingStep(step, to);
    std::unique_ptr<cpu::Program> q = cpu::Program::compile(passes::compiledCopy(step), po);
    EXPECT_GT(q->stats().bf16PairContractions, 0) << name;
    EXPECT_EQ(q->stats().amxContractions, q->stats().bf16PairContractions) << name;
    EXPECT_GT(q->stats().gemmRoutinesLinked, 0) << name;
    EXPECT_EQ(q->stats().gemmRoutinesCompiled, 0) << name;
  }
}

// A Jit with a disk cache (JitOptions::cacheDir; Jit::host() under KILN_CACHE_DIR) loads a
// program another Jit compiled — its parts' objects, linked against the prebuilt GEMM routines —
// and computes the same bits.
TEST(CpuBackend, ProgramsComeBackFromTheDiskCache) {
  kiln::rt::test::ScratchDir dir;
  cpu::JitOptions options;
  options.cacheDir = (dir.path() / "cpu").string();
  for (const char* name : {"mnist_mlp", "cnn"}) {
    const ir::Graph g = adamStep(name, 32);
    const interp::TensorMap in = modelInputs(g);
    cpu::Jit first(options), second(options);
    std::unique_ptr<cpu::Program> a = compileWith(g, first);
    std::unique_ptr<cpu::Program> b = compileWith(g, second);
    EXPECT_FALSE(a->stats().diskHit) << name;
    EXPECT_TRUE(b->stats().diskHit) << name;
    EXPECT_EQ(second.stats().compiles, 0) << name;
    EXPECT_EQ(a->stats().compileParts, b->stats().compileParts) << name;
    expectSameBits(*a, *b, in, name);
  }
}

// Program::run(inputs, outputs): an output the program owns trades storage with the caller's
// tensor (nothing allocated or copied), so two storages alternate across runs; an output that is
// an input, and an entry of the wrong shape, are written by copy; other entries are left alone.
// Every run's values are the interpreter's, for the inputs of that run.
TEST(CpuBackend, RunIntoOutputsReusesTheCallersTensors) {
  ir::Graph g = ir::parseGraph(expand("graph @g(%x: f32[33,7], %w: f32[7,5]) {\n"
                                      "  %y = matmul(%x, %w) : f32[33,5]\n"
                                      "  %s = reduce_sum(%y) {axes=[0]} : f32[5]\n"
                                      "  return %y, %s, %x\n}\n"),
                               "run_into.kir");
  std::unique_ptr<cpu::Program> p = compileFor(g, 2);
  interp::TensorMap out{{"s", rt::HostTensor(DType::f32, {4})}, {"other", rt::HostTensor(DType::f32, {2})}};
  std::vector<const void*> yData, xData;
  for (int run = 0; run < 4; ++run) {
    interp::TensorMap in = kiln::testing::randomInputs(g, 20 + run);
    p->run(in, out);
    expectClose(interp::run(g, in), interp::TensorMap{{"y", out.at("y")}, {"s", out.at("s")}, {"x", out.at("x")}},
                fmt::format("run {}", run));
    EXPECT_NE(out.at("x").data(), in.at("x").data()) << "an input output is a copy";
    yData.push_back(out.at("y").data());
    xData.push_back(out.at("x").data());
  }
  EXPECT_EQ(out.at("other").shape(), std::vector<int64_t>{2});
  // Run 0 allocated y; from then on the caller's y and the program's buffer trade places.
  EXPECT_NE(yData[1], yData[2]);
  EXPECT_EQ(yData[1], yData[3]);
  EXPECT_EQ(xData[1], xData[2]);  // copied into the same tensor
  // run(inputs) still returns tensors of the caller's own, unaffected by later runs.
  interp::TensorMap in = kiln::testing::randomInputs(g, 40);
  interp::TensorMap first = p->run(in);
  interp::TensorMap again = first;
  p->run(kiln::testing::randomInputs(g, 41));
  EXPECT_TRUE(first.at("y").identical(again.at("y")));
}

// Subnormal floats (support/FloatMode.h): the kernels, on the caller's thread and the pool's,
// flush them to zero by default — subnormal inputs read as zero (DAZ), subnormal results written
// as zero (FTZ) — and keep them as the interpreter does with Denormals::Keep. The caller's own
// floating-point mode is the same after a run.
TEST(CpuBackend, SubnormalsFlushedUnlessKept) {
  constexpr int64_t n = 1 << 17;  // two chunks of the pool's elementwise grain at least
  ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %x : f32[{0}]\n  input %s : f32[{0}]\n"
                                           "  %m = mul(%x, %s) : f32[{0}]\n  output %y = %m\n}}\n", n),
                               "subnormals.kir");
  std::vector<float> x(n), s(n);
  for (int64_t i = 0; i < n; ++i) {
    const bool result = i % 2 == 0;  // a subnormal result of normal operands, or a subnormal operand
    x[i] = result ? 1e-20f : 1e-40f;
    s[i] = result ? 1e-20f : 1e30f;
  }
  interp::TensorMap in{{"x", rt::HostTensor::fromVector(DType::f32, {n}, x)},
                       {"s", rt::HostTensor::fromVector(DType::f32, {n}, s)}};
  const rt::HostTensor want = interp::run(g, in).at("y");
  ASSERT_GT(want.as<float>()[0], 0.0f);
  ASSERT_GT(want.as<float>()[1], 0.0f);
  const uint32_t before = floatControl();
  for (Denormals mode : {Denormals::Flush, Denormals::Keep}) {
    cpu::ProgramOptions o;
    o.pool = &pool(2);
    o.denormals = mode;
    const rt::HostTensor got = cpu::Program::compile(g, o)->run(in).at("y");
    EXPECT_EQ(floatControl() & ~kFloatFlags, before & ~kFloatFlags);
    if (mode == Denormals::Keep) {
      EXPECT_TRUE(got.identical(want));
      continue;
    }
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) nonzero += got.as<float>()[i] != 0.0f;
    EXPECT_EQ(nonzero, 0) << "flushed on every thread";
  }
  EXPECT_EQ(cpu::ProgramOptions{}.denormals, denormalsFromEnvironment());
}

// A library (`kiln aot`, compileObject) never uses AMX tiles: its bf16 products take vdpbf16ps k
// pairs only where those outrun the FMAs on this CPU, and are converted to f32 otherwise — as on a
// Xeon with AMX whose vdpbf16ps does half the FMAs' flops (simplenet's bf16 inference library at
// batch 10000: 83.7 ms on pairs, 59 converted).
TEST(CpuBackend, LibraryBf16ProductsWithoutTiles) {
  ir::Graph g = ir::parseGraph("graph @g {\n  input %a : bf16[256,256]\n  input %b : bf16[256,256]\n"
                               "  %c = matmul(%a, %b) : bf16[256,256]\n  output %c = %c\n}\n",
                               "library_bf16.kir");
  const cpu::ProgramObject object = cpu::compileObject(g);
  EXPECT_EQ(object.stats.amxContractions, 0);
  const cpu::VectorIsa isa = cpu::isaOf(cpu::Jit::host());
  const bool pairs = isa.avx512 && isa.avx512bf16 && (isa.amx ? bf16DotOutrunsFma() : isa.bf16Dot());
  EXPECT_EQ(object.stats.bf16PairContractions, pairs ? 1 : 0);
}

// f32 → bf16 rounding: to nearest even, NaNs kept and quiet, overflow to infinity, in both modes
// and on every lane (257: whole vectors and a tail). Subnormals are kept with Denormals::Keep; a
// program that flushes takes vcvtneps2bf16 on a CPU with AVX512-BF16 (setNativeBf16Rounding),
// which writes them as zero, and keeps them elsewhere.
TEST(CpuBackend, Bf16RoundingToNearestEven) {
  constexpr int64_t n = 257;
  const uint32_t bits[] = {
      0x3F808000u,  // 1 + 2^-8: a tie, down to the even 1
      0x3F818000u,  // 1 + 3 · 2^-8: a tie, up to the even 1 + 2^-6
      0x3F808001u,  // just above the tie: up
      0xBF818000u,  // −(1 + 3 · 2^-8): a tie, up in magnitude to the even
      0x7F7FFFFFu,  // the largest float: to infinity
      0xFF7F8000u,  // a tie past bf16's largest: to −infinity
      0x7FA00001u,  // a signalling NaN: quiet, its payload's top bits kept
      0xFFC00000u,  // −NaN
      0x80000000u,  // −0
      0x00000001u,  // the smallest subnormal
      0x807FFFFFu,  // the largest negative subnormal: −(smallest normal) when kept
  };
  constexpr int64_t subnormalsFrom = 9;
  const uint16_t want[] = {0x3F80, 0x3F82, 0x3F81, 0xBF82, 0x7F80, 0xFF80, 0x7FE0, 0xFFC0, 0x8000, 0x0000, 0x8080};
  constexpr int64_t cases = sizeof(bits) / sizeof(bits[0]);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) std::memcpy(&x[static_cast<size_t>(i)], &bits[i % cases], 4);
  ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %x : f32[{0}]\n"
                                           "  %y = cast(%x) {{dtype=bf16}} : bf16[{0}]\n  output %y = %y\n}}\n", n),
                               "bf16round.kir");
  interp::TensorMap in{{"x", rt::HostTensor::fromVector(DType::f32, {n}, x)}};
  const cpu::VectorIsa isa = cpu::isaOf(cpu::Jit::host());
  const bool native = isa.avx512 && isa.avx512bf16;
  for (Denormals mode : {Denormals::Keep, Denormals::Flush}) {
    cpu::ProgramOptions o;
    o.pool = &pool(2);
    o.denormals = mode;
    const rt::HostTensor got = cpu::Program::compile(g, o)->run(in).at("y");
    ASSERT_EQ(got.dtype(), DType::bf16);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t y = 0;
      std::memcpy(&y, static_cast<const uint8_t*>(got.data()) + 2 * i, 2);
      const int64_t c = i % cases;
      const bool flushed = mode == Denormals::Flush && native && c >= subnormalsFrom;
      EXPECT_EQ(y, flushed ? want[c] & 0x8000 : want[c]) << fmt::format("{:08x} at {} ({})", bits[c], i, mode == Denormals::Keep ? "keep" : "flush");
    }
  }
}
