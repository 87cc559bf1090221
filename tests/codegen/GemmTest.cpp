// The generated GEMM of contraction kernels (codegen/cpu/Gemm.h) against the reference
// interpreter: one-node graphs (matmul with transposes and broadcast batches, conv2d with strides,
// padding, dilation and groups, both convolution gradients) over awkward sizes, f32, f16, bf16,
// f64, i32 and i64 operands, on the host's vector ISA and on plain x86-64 (SSE2), with pools of 1
// and 2 threads (same bits on both), on each of its paths (packed, split K, small M) and with
// several contractions sharing one module. A test epilogue copies every finished tile to an output array
// and counts how often each element is handed over (exactly once). AVX-512 code is compiled for
// Skylake-X, and its IR (AVX-512 blocking on 16-lane vectors) runs on the host.
//
// Tolerance: floats accumulate in f32 (f64 for f64) in another order than the interpreter's
// double sums, so |got − want| ≤ (K + 2) · u · Σ|a·b| (u the accumulator's unit roundoff), the
// classical bound of a K-term dot product; Σ|a·b| is the interpreter's result on |a| and |b|.
// Operands are rounded to their dtype first and the oracle runs in f64 on the same values, so the
// bound holds for f16 and bf16 too (their products are exact in f32). Integers are exact
// (wrapping in both).
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/GemmEmitter.h"
#include "codegen/cpu/Jit.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "kernels/Gemm.h"
#include "runtime/ThreadPool.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

namespace kiln::cpu {
namespace {

using rt::HostTensor;

/// One contraction: operand and result types and the node's attributes, with "{t}" for the dtype.
struct Case {
  std::string a, b, op, attrs, result;

  std::string graph(DType t) const {
    auto typed = [&](const std::string& s) { return fmt::format(fmt::runtime(s), fmt::arg("t", dtypeName(t))); };
    return fmt::format(
        "graph @g {{\n  input %a : {}\n  input %b : {}\n  %r = {}(%a, %b) {} : {}\n  output %r = %r\n}}\n", typed(a),
        typed(b), op, attrs.empty() ? "" : "{" + attrs + "}", typed(result));
  }
};

Case matmul(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false) {
  return {ta ? fmt::format("{{t}}[{},{}]", k, m) : fmt::format("{{t}}[{},{}]", m, k),
          tb ? fmt::format("{{t}}[{},{}]", n, k) : fmt::format("{{t}}[{},{}]", k, n), "matmul",
          fmt::format("transpose_a={}, transpose_b={}", ta, tb), fmt::format("{{t}}[{},{}]", m, n)};
}

/// conv2d over x[n,c,h,w] and w[o,c/groups,kh,kw], or one of its gradients.
struct Conv {
  int64_t n, c, h, w, o, kh, kw, groups, sh, sw, ph, pw, dh, dw;

  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  std::string x() const { return fmt::format("{{t}}[{},{},{},{}]", n, c, h, w); }
  std::string wt() const { return fmt::format("{{t}}[{},{},{},{}]", o, c / groups, kh, kw); }
  std::string y() const { return fmt::format("{{t}}[{},{},{},{}]", n, o, oh(), ow()); }
  std::string attrs() const {
    return fmt::format("stride=[{},{}], padding=[{},{}], dilation=[{},{}], groups={}", sh, sw, ph, pw, dh, dw, groups);
  }
  Case forward() const { return {x(), wt(), "conv2d", attrs(), y()}; }
  Case gradInput() const {
    return {y(), wt(), "conv2d_grad_input", fmt::format("input_shape=[{},{},{},{}], {}", n, c, h, w, attrs()), x()};
  }
  Case gradWeight() const {
    return {x(), y(), "conv2d_grad_weight",
            fmt::format("weight_shape=[{},{},{},{}], {}", o, c / groups, kh, kw, attrs()), wt()};
  }
};

const Conv kConvs[] = {
    {2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // 3x3 "same"
    {2, 4, 11, 9, 6, 3, 2, 2, 2, 1, 1, 2, 1, 2},    // groups, stride, padding, dilation
    {1, 6, 8, 10, 3, 2, 3, 3, 3, 2, 0, 1, 2, 1},    // three groups, stride 3
    {3, 5, 6, 6, 7, 1, 1, 1, 2, 2, 0, 0, 1, 1},     // 1x1, stride 2
    {3, 4, 9, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // 90-pixel images: weight-gradient k runs of 8 break
    {4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1}, // large enough to run on two threads
    {3, 8, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // weight gradient: rows of 14 meet in runs of 196
    {2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 2, 2, 1, 1},     // padding 2: rows of 7 step back 1 between runs
};

/// The oracle's dtype: f64 for floats (exact on the rounded operands), i64 for integers.
DType oracleType(DType t) { return isFloat(t) ? DType::f64 : DType::i64; }

HostTensor retyped(const HostTensor& t, DType to) {
  HostTensor out(to, t.shape());
  if (isFloat(t.dtype()))
    for (int64_t i = 0; i < t.numel(); ++i) out.set(i, t.at(i));
  else
    for (int64_t i = 0; i < t.numel(); ++i)
      out.as<int64_t>()[i] = t.dtype() == DType::i32 ? t.as<int32_t>()[i] : t.as<int64_t>()[i];
  return out;
}

/// Random operands of `type`: floats in [-1, 1] rounded to the dtype, i32 in [-100, 100], i64
/// up to ±2^40 (products and sums wrap).
HostTensor randomOperand(const ir::TensorType& type, std::mt19937_64& rng) {
  HostTensor t(type.dtype, type.shape);
  std::uniform_real_distribution<double> real(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (type.dtype) {
      case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(rng() % 201) - 100; break;
      case DType::i64:
        t.as<int64_t>()[i] = static_cast<int64_t>(rng() % (int64_t{1} << 41)) - (int64_t{1} << 40);
        break;
      default: t.set(i, real(rng));
    }
  }
  return t;
}

/// void epilogue(void** bufs, const ACC* tile, i64 ldt, i64 b, i64 m0, i64 m1, i64 n0, i64 n1):
/// out[(b·M + m)·N + n] = tile[(m − m0)·ldt + n − n0] and ++count[…], where out and count are
/// bufs[nbuf + 1] and bufs[nbuf + 2] (after the scratch) and M, N are the result-level sizes.
llvm::Function* testEpilogue(llvm::Module& m, const std::string& name, size_t nbuf, AccType acc, int64_t resultM,
                             int64_t resultN) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = b.getPtrTy();
  llvm::Type* elt = acc == AccType::F32 ? b.getFloatTy() : acc == AccType::F64 ? b.getDoubleTy() : i64;
  auto* f =
      llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64, i64, i64, i64, i64, i64}, false),
                             llvm::Function::InternalLinkage, name, m);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  b.SetInsertPoint(entry);
  llvm::Value* out = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, f->getArg(0), nbuf + 1));
  llvm::Value* count = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, f->getArg(0), nbuf + 2));
  llvm::Value *tile = f->getArg(1), *ldt = f->getArg(2), *batch = f->getArg(3);
  llvm::Value *m0 = f->getArg(4), *m1 = f->getArg(5), *n0 = f->getArg(6), *n1 = f->getArg(7);
  // for (m = m0; m < m1; ++m) for (n = n0; n < n1; ++n); blocks are never empty.
  auto* rows = llvm::BasicBlock::Create(ctx, "rows", f);
  auto* cols = llvm::BasicBlock::Create(ctx, "cols", f);
  auto* rowEnd = llvm::BasicBlock::Create(ctx, "rows.next", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  b.CreateBr(rows);
  b.SetInsertPoint(rows);
  llvm::PHINode* row = b.CreatePHI(i64, 2);
  row->addIncoming(m0, entry);
  b.CreateBr(cols);
  b.SetInsertPoint(cols);
  llvm::PHINode* col = b.CreatePHI(i64, 2);
  col->addIncoming(n0, rows);
  llvm::Value* from = b.CreateAdd(b.CreateMul(b.CreateSub(row, m0), ldt), b.CreateSub(col, n0));
  llvm::Value* to =
      b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(batch, b.getInt64(resultM)), row), b.getInt64(resultN)), col);
  b.CreateStore(b.CreateLoad(elt, b.CreateGEP(elt, tile, from)), b.CreateGEP(elt, out, to));
  llvm::Value* counter = b.CreateGEP(b.getInt32Ty(), count, to);
  b.CreateStore(b.CreateAdd(b.CreateLoad(b.getInt32Ty(), counter), b.getInt32(1)), counter);
  llvm::Value* nextCol = b.CreateAdd(col, b.getInt64(1));
  col->addIncoming(nextCol, cols);
  b.CreateCondBr(b.CreateICmpSLT(nextCol, n1), cols, rowEnd);
  b.SetInsertPoint(rowEnd);
  llvm::Value* nextRow = b.CreateAdd(row, b.getInt64(1));
  row->addIncoming(nextRow, rowEnd);
  b.CreateCondBr(b.CreateICmpSLT(nextRow, m1), rows, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return f;
}

/// A Jit for LLVM CPU `cpu` (empty: the host) that can call the thread pool.
std::unique_ptr<Jit> makeJit(const std::string& cpu) {
  JitOptions options;
  options.cpu = cpu;
  auto jit = std::make_unique<Jit>(options);
  jit->defineSymbol("kiln_parallel_for", reinterpret_cast<const void*>(&kiln_parallel_for));
  return jit;
}

Jit& hostJit() {
  static std::unique_ptr<Jit> jit = makeJit("");
  return *jit;
}

Jit& sse2Jit() {
  static std::unique_ptr<Jit> jit = makeJit("x86-64");
  return *jit;
}

/// The kernel of a case in a dtype, lowered, emitted as function `name` with a test epilogue.
struct Compiled {
  ir::Graph graph;
  kernels::Kernel kernel;
  kernels::GemmForm form;
  std::string name;
  std::shared_ptr<const CompiledModule> module;
};

/// Cases `cs` in dtype `t`, emitted for `isa` into one module as functions gemm0, gemm1, … (so
/// they share the module's GEMM functions) and compiled by `jit` as cpu::Program compiles.
std::vector<Compiled> compileAll(Jit& jit, const std::vector<Case>& cs, DType t, const VectorIsa& isa,
                                 std::string* ir = nullptr) {
  std::vector<Compiled> out;
  auto m = std::make_unique<llvm::Module>("gemm_test", jit.context());
  for (const Case& c : cs) {
    Compiled k{ir::parseGraph(c.graph(t), "gemm_test.kir"), {}, {}, fmt::format("gemm{}", out.size()), nullptr};
    std::vector<kernels::Kernel> ks = kernels::lowerGraph(k.graph);
    KILN_ASSERT(ks.size() == 1 && ks[0].hasContraction, "one contraction kernel expected");
    k.kernel = std::move(ks[0]);
    k.form = kernels::gemmForm(k.kernel);
    llvm::Function* epilogue = testEpilogue(*m, k.name + ".test_epilogue", k.kernel.buffers.size(),
                                            accTypeOf(k.kernel), k.form.groups * k.form.m, k.form.n);
    emitContraction(*m, k.name, k.kernel, epilogue, isa);
    out.push_back(std::move(k));
  }
  if (ir) {
    llvm::raw_string_ostream os(*ir);
    m->print(os, nullptr);
  }
  CompileOptions options;
  options.pipeline = CompileOptions::Pipeline::Light;
  std::shared_ptr<const CompiledModule> module = jit.compile(std::move(m), options);
  for (Compiled& k : out) k.module = module;
  return out;
}

Compiled compile(Jit& jit, const Case& c, DType t, const VectorIsa& isa) {
  return std::move(compileAll(jit, {c}, t, isa).at(0));
}

/// The text of function `name`'s definition in module text `ir` (empty if it has none).
std::string definition(const std::string& ir, const std::string& name) {
  const size_t start = ir.find("define void @" + name + "(");
  if (start == std::string::npos) return "";
  return ir.substr(start, ir.find("\n}\n", start) - start);
}

/// Runs compiled kernel `k` (case `c` in dtype `t`) with pools of each of `threads` and compares
/// with the interpreter; the code is for `isa`.
HostTensor verify(const Compiled& k, const Case& c, DType t, std::initializer_list<int> threads, const VectorIsa& isa) {
  SCOPED_TRACE(c.graph(t));
  const ir::Graph& g = k.graph;
  std::mt19937_64 rng(7);
  interp::TensorMap in{{"a", randomOperand(g.inputs()[0]->type, rng)}, {"b", randomOperand(g.inputs()[1]->type, rng)}};

  // The oracle in f64 (i64) on the same values, and Σ|a·b| from the absolute values.
  const DType o = oracleType(t);
  ir::Graph oracle = ir::parseGraph(c.graph(o), "gemm_oracle.kir");
  interp::TensorMap oin{{"a", retyped(in.at("a"), o)}, {"b", retyped(in.at("b"), o)}};
  const HostTensor want = interp::run(oracle, oin).at("r");
  HostTensor scale;
  if (isFloat(t)) {
    for (auto& [name, v] : oin)
      for (int64_t i = 0; i < v.numel(); ++i) v.set(i, std::abs(v.at(i)));
    scale = interp::run(oracle, oin).at("r");
  }
  const AccType acc = accTypeOf(k.kernel);
  const double unit = acc == AccType::F32 ? 0x1p-24 : 0x1p-53;
  const double tolerance = static_cast<double>(k.form.k + 2) * unit;

  auto fn = k.module->fn<void(void**, void*)>(k.name);
  HostTensor first;  // the result of the first pool: every pool computes the same bits
  for (int n : threads) {
    SCOPED_TRACE(fmt::format("{} thread(s)", n));
    rt::ThreadPool pool(n);
    std::vector<void*> bufs;
    std::vector<HostTensor> owned;
    for (const kernels::Buffer& buf : k.kernel.buffers) {
      if (auto it = in.find(buf.name); it != in.end()) {
        bufs.push_back(it->second.data());
      } else {
        owned.emplace_back(buf.type.dtype, buf.type.shape);
        bufs.push_back(owned.back().data());
      }
    }
    const int64_t numel = want.numel();
    HostTensor scratch(DType::boolean, {std::max<int64_t>(contractionScratchBytes(k.kernel, isa, n), 1)});
    HostTensor out(acc == AccType::F32 ? DType::f32 : acc == AccType::F64 ? DType::f64 : DType::i64, {numel});
    HostTensor count(DType::i32, {numel});
    bufs.push_back(scratch.data());
    bufs.push_back(out.data());
    bufs.push_back(count.data());
    fn(bufs.data(), &pool);
    int bad = 0;
    for (int64_t i = 0; i < numel && bad < 5; ++i) {
      bool ok = count.as<int32_t>()[i] == 1;
      if (acc == AccType::I64)
        ok = ok && out.as<int64_t>()[i] == want.as<int64_t>()[i];
      else
        ok = ok && std::abs(out.at(i) - want.at(i)) <= tolerance * scale.at(i);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "element " << i << ": got " << out.at(i) << " (handed over " << count.as<int32_t>()[i]
                      << " times), want " << want.at(i);
      }
    }
    if (first.numel() == 0) first = out;
    EXPECT_TRUE(out.identical(first)) << "the result depends on the thread count";
  }
  return first;
}

/// Runs case `c` in dtype `t` through `jit` with pools of each of `threads` and compares with
/// the interpreter. The code is for `isa` (default: the Jit's own).
void check(Jit& jit, const Case& c, DType t, std::initializer_list<int> threads = {1, 2},
           std::optional<VectorIsa> isaOverride = std::nullopt) {
  const VectorIsa isa = isaOverride.value_or(isaOf(jit));
  verify(compile(jit, c, t, isa), c, t, threads, isa);
}

// Sizes from 1, 7, 33, 257 and 1000: one or many M blocks (144 rows) and N blocks (512
// columns), one or many K slices (256), edge panels everywhere, one thread or the pool. K = 0
// gives zeros, M = 0 nothing; M <= 8 takes the small-M path (more in SmallM).
TEST(Gemm, MatMulShapes) {
  const int64_t shapes[][3] = {{1, 1, 1},     {33, 7, 1000}, {257, 1000, 33}, {1000, 33, 257},
                               {3, 200, 9000}, {7, 33, 0},    {0, 7, 33}};
  for (const auto& s : shapes) check(hostJit(), matmul(s[0], s[1], s[2]), DType::f32);
}

TEST(Gemm, MatMulTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check(hostJit(), matmul(33, 257, 257, ta, tb), DType::f32);
}

TEST(Gemm, MatMulBroadcastBatch) {
  check(hostJit(), {"{t}[3,1,7,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,7,257]"}, DType::f32);
  check(hostJit(), {"{t}[33,7]", "{t}[2,257,33]", "matmul", "transpose_a=true, transpose_b=true", "{t}[2,7,257]"},
        DType::f32);
}

TEST(Gemm, Conv2d) {
  for (const Conv& c : {kConvs[0], kConvs[1], kConvs[4]}) check(hostJit(), c.forward(), DType::f32);
}

TEST(Gemm, Conv2dGradWeight) {
  for (const Conv& c : {kConvs[0], kConvs[1], kConvs[3], kConvs[4], kConvs[6], kConvs[7]})
    check(hostJit(), c.gradWeight(), DType::f32);
}

TEST(Gemm, Conv2dGradInput) {
  for (const Conv& c : {kConvs[1], kConvs[2], kConvs[4]}) check(hostJit(), c.gradInput(), DType::f32);
}

/// The GEMM form of case `c` in f32.
kernels::GemmForm formOf(const Case& c) {
  ir::Graph g = ir::parseGraph(c.graph(DType::f32), "gemm_test.kir");
  return kernels::gemmForm(kernels::lowerGraph(g).at(0));
}

/// The blocking of case `c` in f32 for the host.
gemm::Blocking planOf(const Case& c) { return gemm::blockingFor(formOf(c), AccType::F32, isaOf(hostJit())); }

// A the same in every batch (a convolution's weights, a broadcast matrix) within one M block is
// packed over all of K once per thread and kept across items; an A that varies is packed per item.
TEST(Gemm, KeepsABatchInvariantAPacked) {
  const Case broadcast{"{t}[33,300]", "{t}[5,300,257]", "matmul", "", "{t}[5,33,257]"};
  const gemm::Blocking plan = planOf(broadcast);
  EXPECT_TRUE(plan.reuseA);
  EXPECT_GT(plan.kBlocks, 1) << "slices kept side by side";
  check(hostJit(), broadcast, DType::f32);
  const Conv& conv = kConvs[5];
  EXPECT_TRUE(planOf(conv.forward()).reuseA);
  EXPECT_TRUE(planOf(conv.gradInput()).reuseA);
  EXPECT_GT(planOf(conv.gradInput()).kBlocks, 1);
  check(hostJit(), conv.forward(), DType::f32);
  check(hostJit(), conv.gradInput(), DType::f32);
  EXPECT_FALSE(planOf(kConvs[1].forward()).reuseA) << "grouped: the weights differ per group";
  EXPECT_FALSE(planOf({"{t}[5,33,300]", "{t}[5,300,257]", "matmul", "", "{t}[5,33,257]"}).reuseA);
}

// A padded window's bounds repeat along k (channel, kh, kw) every kh·kw steps: their lane masks
// are computed once per panel and phase. K slices that start mid-period (136 = 15·9 + 1, 152 =
// 6·25 + 2), partial panels (143 and 90 pixels) and a 7×7 window (period 49, evaluated per row)
// check that each row takes its own phase.
TEST(Gemm, ConvWindowMasksRepeatAcrossKSlices) {
  const Conv convs[] = {
      {2, 30, 13, 11, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 12, 10, 9, 12, 5, 5, 1, 1, 1, 2, 2, 1, 1},
      {1, 6, 9, 10, 6, 7, 7, 1, 1, 1, 3, 3, 1, 1},
  };
  for (const Conv& c : convs) {
    for (const Case& k : {c.forward(), c.gradInput()}) {
      const gemm::Blocking plan = planOf(k);
      if (c.kh == 3) {
        EXPECT_NE(plan.kc % 9, 0) << k.op << ": a slice starts mid-period";
      }
      if (c.kh == 5) {
        EXPECT_NE(plan.kc % 25, 0) << k.op << ": a slice starts mid-period";
      }
      check(hostJit(), k, DType::f32);
    }
  }
  // AVX-512's plan (16 lanes, masked loads of 16-bit elements too), run on the host.
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  check(hostJit(), convs[0].gradInput(), DType::f32, {2}, avx512);
  check(hostJit(), convs[1].forward(), DType::bf16, {1}, avx512);
}

// A weight gradient's k (image, row, column) over 31 images of 27×27 has too many steps for a k
// table of all of K (22599 × 3 functionals); the table holds one image and adds the image's
// stride. One channel: the images lie back to back, and 729 = 91·8 + 1, so runs of eight k
// steps cross from one image into the next (their bounds are not one vector of the table).
TEST(Gemm, WeightGradientOverManyImages) {
  const Conv c{31, 1, 27, 27, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  check(hostJit(), c.gradWeight(), DType::f32);
}

TEST(Gemm, OperandTypes) {
  check(hostJit(), matmul(33, 257, 257), DType::f16);
  check(hostJit(), matmul(33, 257, 257, true, false), DType::bf16);
  check(hostJit(), matmul(33, 257, 257, false, true), DType::f64);
  check(hostJit(), matmul(33, 257, 257, true, true), DType::i32);
  check(hostJit(), matmul(33, 257, 257), DType::i64);
  check(hostJit(), kConvs[1].gradWeight(), DType::f16, {1});
}

// A module may link the shared routines prebuilt with kiln instead of defining them
// (VectorIsa::linkedGemm, PrebuiltGemm.h): it then defines none, and every path and operand type
// still computes the product (cpu_backend_tests compares whole programs bit for bit).
TEST(Gemm, PrebuiltRoutines) {
  VectorIsa isa = isaOf(hostJit());
  isa.linkedGemm = hostJit().prebuiltGemm();
  if (!isa.linkedGemm) GTEST_SKIP() << "kiln has no prebuilt GEMM routines for this CPU";
  const std::vector<Case> cases{matmul(300, 200, 150, true, false), matmul(100, 128, 784, false, true),
                                matmul(5, 33, 70, false, true), matmul(3, 33, 70, true, false),
                                matmul(13, 64, 64, false, true), kConvs[0].gradWeight()};
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64}) {
    std::string ir;
    std::vector<Case> typed = cases;
    if (!isFloat(t)) typed.pop_back();  // convolutions take float operands
    std::vector<Compiled> kernels = compileAll(hostJit(), typed, t, isa, &ir);
    EXPECT_EQ(ir.find("define internal void @kiln.gemm."), std::string::npos) << dtypeName(t);
    EXPECT_NE(ir.find("declare void @kiln.gemm."), std::string::npos) << dtypeName(t);
    for (size_t i = 0; i < kernels.size(); ++i) verify(kernels[i], typed[i], t, {1, 2}, isa);
  }
}

// Plain x86-64: SSE2 vectors of 4 floats, no FMA, f16 converted with integer operations.
TEST(Gemm, Sse2) {
  EXPECT_EQ(isaOf(sse2Jit()).f32Lanes, 4);
  check(sse2Jit(), matmul(33, 257, 257, true, true), DType::f16, {2});
  check(sse2Jit(), matmul(33, 7, 300), DType::f64, {2});
  check(sse2Jit(), matmul(33, 7, 300, false, true), DType::i64, {2});
  check(sse2Jit(), kConvs[1].gradInput(), DType::bf16, {2});
}

// AVX-512 code cannot run on every machine: it is compiled (verified, optimized, assembled) for
// Skylake-X, and the same IR — its 12 × 32 tiles, 16-lane vectors, 16 × 16 transposes and masked
// 16-bit loads — runs on the host, where LLVM splits the wide vectors.
TEST(Gemm, Avx512) {
  auto jit = makeJit("skylake-avx512");
  const VectorIsa avx512 = isaOf(*jit);
  EXPECT_EQ(avx512.f32Lanes, 16);
  EXPECT_NO_THROW(compile(*jit, matmul(33, 257, 257, false, true), DType::f32, avx512));
  EXPECT_NO_THROW(compile(*jit, kConvs[1].forward(), DType::bf16, avx512));
  check(hostJit(), matmul(257, 1000, 33, false, true), DType::f32, {2}, avx512);
  check(hostJit(), kConvs[1].forward(), DType::f16, {1}, avx512);
  check(hostJit(), kConvs[2].gradInput(), DType::f64, {1}, avx512);
  check(hostJit(), matmul(7, 33, 300, true, false), DType::i64, {1}, avx512);
}

// bf16 operands on a CPU with vdpbf16ps (AVX512-BF16) are packed as k pairs, 32 bits each, and
// multiplied by the dot-product micro-kernel (GemmEmitter.h's usesBf16Pairs). The path runs here
// emulated (VectorIsa::emulateBf16Dot: the same packing, each vdpbf16ps as the two FMAs it
// computes) on the host's vectors, AVX-512's 16 lanes and SSE2's 4, over odd K (the last pair half zero),
// partial panels, every transpose (both packings of both operands), split K, a broadcast batch and
// a product that fits L1 (whose f32 path is the small one). Convolution windows and products of at
// most 8 rows keep converting to f32.
TEST(Gemm, Bf16PairsEmulated) {
  for (VectorIsa isa : {isaOf(hostJit()), isaOf(*makeJit("skylake-avx512")), isaOf(sse2Jit())}) {
    SCOPED_TRACE(fmt::format("{} lanes", isa.f32Lanes));
    isa.avx512bf16 = false;  // emulated even where this CPU has vdpbf16ps
    isa.emulateBf16Dot = true;
    std::string ir;
    const std::vector<Case> cases{matmul(33, 257, 257),
                                  matmul(257, 1000, 33, false, true),
                                  matmul(150, 45, 301, true, false),
                                  matmul(33, 130, 9001, true, true),
                                  matmul(100, 128, 784),
                                  {"{t}[3,1,20,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,20,257]"},
                                  matmul(64, 64, 32, false, true),  // fits L1: packed, not the small path
                                  kConvs[0].forward(),
                                  matmul(5, 33, 70, false, true)};
    std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::bf16, isa, &ir);
    EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32."), std::string::npos);
    EXPECT_NE(ir.find(".bf16dot.emulated("), std::string::npos) << "the pair micro-kernel";
    EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v" + std::to_string(isa.f32Lanes) + ".pairs.rows("), std::string::npos);
    EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v" + std::to_string(isa.f32Lanes) + ".pairs.k("), std::string::npos);
    EXPECT_EQ(planOf(cases[3]).path, gemm::Path::SplitK);
    for (size_t i = 0; i < kernels.size(); ++i) {
      const gemm::Blocking plan = gemm::blockingFor(kernels[i].form, AccType::F32, isa, DType::bf16);
      const bool pairs = gemm::usesBf16Pairs(kernels[i].form, plan, DType::bf16, isa);
      EXPECT_EQ(pairs, i < 7) << cases[i].graph(DType::bf16);
      verify(kernels[i], cases[i], DType::bf16, {1, 2}, isa);
    }
  }
}

// The native path: compiled for Sapphire Rapids (vdpbf16ps on zmm), and where this CPU has
// AVX512-BF16, run against the interpreter and bit for bit against the emulation (the same sums
// in the same order; random operands in [-1, 1] have no subnormal products).
TEST(Gemm, Bf16DotProducts) {
  const std::vector<Case> cases{matmul(33, 257, 257, true, false), matmul(257, 100, 33, false, true),
                                matmul(33, 130, 9001)};
  auto spr = makeJit("sapphirerapids");
  const VectorIsa native = isaOf(*spr);
  ASSERT_TRUE(native.avx512bf16);
  std::string ir;
  EXPECT_NO_THROW(compileAll(*spr, cases, DType::bf16, native, &ir));
  EXPECT_NE(ir.find("@llvm.x86.avx512bf16.dpbf16ps.512("), std::string::npos);
  EXPECT_NE(ir.find(".bf16dot("), std::string::npos);
  const VectorIsa host = isaOf(hostJit());
  if (!host.avx512bf16 || !host.avx512)
    GTEST_SKIP() << "this CPU has no AVX512-BF16: the native kernels were compiled, not run";
  VectorIsa emulated = host;
  emulated.avx512bf16 = false;
  emulated.emulateBf16Dot = true;
  std::vector<Compiled> got = compileAll(hostJit(), cases, DType::bf16, host);
  std::vector<Compiled> want = compileAll(hostJit(), cases, DType::bf16, emulated);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verify(got[i], cases[i], DType::bf16, {1, 2}, host)
                    .identical(verify(want[i], cases[i], DType::bf16, {1}, emulated)))
        << cases[i].graph(DType::bf16);
}

// M <= 8 streams B unpacked (GemmSmall.cpp): every M from 1 to 8 with odd N and K in every
// transpose form (dot form where B's k is contiguous, axpy form where its n is; A in place or
// converted into rows), every operand dtype, a broadcast batch, and B large enough to be split
// across threads.
TEST(Gemm, SmallM) {
  std::string ir;
  compileAll(hostJit(), {matmul(8, 9, 9), matmul(9, 7, 9)}, DType::f32, isaOf(hostJit()), &ir);
  EXPECT_NE(definition(ir, "gemm0").find("@kiln.gemm.small.chunk."), std::string::npos) << ir;
  EXPECT_EQ(definition(ir, "gemm1").find("@kiln.gemm.small.chunk."), std::string::npos) << ir;
  for (int64_t m = 1; m <= 8; ++m)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(m, 131 + 2 * m, 29 + 2 * m, ta, tb), DType::f32, {1});
  const int64_t ms[] = {1, 3, 5, 8};
  for (DType t : {DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (int form = 0; form < 4; ++form) check(hostJit(), matmul(ms[form], 67, 45, form & 1, form & 2), t, {1});
  check(hostJit(), {"{t}[3,1,2,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,2,257]"}, DType::f32);
  check(hostJit(), matmul(2, 1001, 301), DType::f32);
  check(hostJit(), matmul(5, 1001, 301, true, true), DType::f32);
  check(sse2Jit(), matmul(3, 67, 45, false, true), DType::f16, {2});
}

// More than 8 rows take the small path when the product stays in L1 (GemmSmall.cpp): B of at
// most 32 KiB with at least 16 columns, one thread's worth of flops. A is read in place, transposed
// or not; B too when its n is contiguous, else it is converted into one panel of K rows first (by
// the strided packing, which every contraction of the module shares). Rows go in groups of 6 and
// one of the rest (13 = 2·6 + 1; 67 = 11·6 + 1; 66 = 11·6); a narrow N, too many rows and too big
// a B keep the packed path.
TEST(Gemm, SmallPathForProductsInL1) {
  auto path = [](const Case& c) { return planOf(c).path; };
  const Case small[] = {matmul(64, 32, 64),          matmul(13, 17, 33),
                        matmul(66, 40, 70),          matmul(100, 128, 10),
                        matmul(128, 64, 64),         matmul(9, 2000, 4),
                        matmul(64, 64, 32, false, true),  // B converted
                        matmul(64, 32, 64, true, false),  // A transposed, in place
                        matmul(13, 17, 33, true, true),   // both; N = 17: a partial panel of 24
                        matmul(67, 40, 70, false, true),  // K = 70: transposed blocks and a tail
                        matmul(67, 24, 9, true, true)};
  for (const Case& c : small) {
    EXPECT_EQ(path(c), gemm::Path::Small) << c.graph(DType::f32);
    check(hostJit(), c, DType::f32, {1, 2});
  }
  EXPECT_TRUE(gemm::smallConvertsB(formOf(matmul(64, 64, 32, false, true))));
  EXPECT_FALSE(gemm::smallConvertsB(formOf(matmul(64, 32, 64, true, false))));
  // Rows in groups of 6, the last overlapping the one before when M is no multiple (13: rows 0–5,
  // 6–11, 7–12; 100, 67, 9): one axpy kernel for all of them, no kernel for the rest.
  {
    std::string ir;
    compileAll(hostJit(),
               {matmul(100, 128, 10), matmul(67, 40, 70, false, true), matmul(13, 17, 33), matmul(9, 2000, 4)},
               DType::f32, isaOf(hostJit()), &ir);
    std::vector<std::string> kernels;  // @kiln.gemm.axpy.f32.vLANES.mROWS.vV
    const std::string define = "define internal void @kiln.gemm.axpy.";
    for (size_t at = ir.find(define); at != std::string::npos; at = ir.find(define, at + 1))
      kernels.push_back(ir.substr(at + define.size(), ir.find('(', at) - at - define.size()));
    ASSERT_EQ(kernels.size(), 1u) << ::testing::PrintToString(kernels);
    EXPECT_NE(kernels[0].find(".m6."), std::string::npos) << kernels[0];
    EXPECT_EQ(gemm::smallRowGroups(13), (std::vector<int>{6, 6}));
    EXPECT_EQ(gemm::smallRowGroups(12), (std::vector<int>{6}));
    EXPECT_EQ(gemm::smallRowGroups(7), (std::vector<int>{4, 3})) << "up to 8 rows: groups of at most 4";
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check(hostJit(), matmul(13, 17, 33, ta, tb), DType::f64, {1});
      // f16 and bf16: A converted into rows, B converted to f32 (kernels of their own).
      check(hostJit(), matmul(19, 33, 21, ta, tb), DType::f16, {1});
      check(hostJit(), matmul(19, 33, 21, ta, tb), DType::bf16, {1});
    }
  check(hostJit(), {"{t}[3,20,30]", "{t}[30,48]", "matmul", "", "{t}[3,20,48]"}, DType::f32);
  EXPECT_EQ(path({"{t}[3,20,30]", "{t}[30,48]", "matmul", "", "{t}[3,20,48]"}), gemm::Path::Small);
  check(hostJit(), {"{t}[3,30,20]", "{t}[3,48,30]", "matmul", "transpose_a=true, transpose_b=true", "{t}[3,20,48]"},
        DType::f32);
  // Other vector widths: AVX-512's 16 lanes (run on the host, LLVM splits the vectors), SSE2's 4.
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  check(hostJit(), matmul(67, 40, 70, true, true), DType::f32, {1}, avx512);
  check(sse2Jit(), matmul(67, 40, 70, true, true), DType::f32, {1});
  // The converted B's panel is as wide as its block, which the strided packing divides by at run
  // time; in a module with a packed contraction that shares the routine, both stay right.
  const std::vector<Case> shared{matmul(64, 64, 32, false, true), matmul(33, 257, 300, false, true)};
  const VectorIsa isa = isaOf(hostJit());
  std::vector<Compiled> kernels = compileAll(hostJit(), shared, DType::f32, isa);
  for (size_t i = 0; i < shared.size(); ++i) verify(kernels[i], shared[i], DType::f32, {1, 2}, isa);
  // A layer's 10 outputs (mnist_mlp's last, 100 × 128 · 128 × 10): one masked vector of columns.
  check(hostJit(), matmul(100, 10, 128), DType::f32, {1, 2});
  check(hostJit(), matmul(100, 10, 128, false, true), DType::f32, {1});
  check(sse2Jit(), matmul(100, 10, 128), DType::f32, {1});
  check(*makeJit("haswell"), matmul(100, 10, 128, true, true), DType::f32, {1});
  EXPECT_EQ(path(matmul(100, 10, 128)), gemm::Path::Small);
  const Case packed[] = {matmul(100, 7, 128), matmul(129, 32, 64), matmul(64, 96, 100),
                         matmul(64, 96, 100, false, true), matmul(128, 64, 128)};
  for (const Case& c : packed) EXPECT_EQ(path(c), gemm::Path::Packed) << c.graph(DType::f32);
}

// K too deep to keep B packed over all of K (from about 8200 with N of 128 and more on AVX2) is
// split into parts whose partial products are summed in a fixed order (Gemm.cpp): every transpose
// form, f64, a batch.
TEST(Gemm, SplitK) {
  std::string ir;
  compileAll(hostJit(), {matmul(33, 130, 9001)}, DType::f32, isaOf(hostJit()), &ir);
  EXPECT_NE(definition(ir, "gemm0").find("@kiln.gemm.split.reduce."), std::string::npos) << ir;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check(hostJit(), matmul(33, 130, 9001, ta, tb), DType::f32);
  check(hostJit(), matmul(20, 70, 9001, true, false), DType::f64);
  check(hostJit(), {"{t}[2,17,9001]", "{t}[9001,130]", "matmul", "", "{t}[2,17,130]"}, DType::f32);
  // B narrow enough to keep packed, but two threads would each pack all of it for their rows of
  // one M block (a first convolution's weight gradient): K is split instead.
  const Case narrow = matmul(33, 9, 50000, true, false);
  EXPECT_EQ(planOf(narrow).path, gemm::Path::SplitK);
  check(hostJit(), narrow, DType::f32);
  // A small batch's layer (mnist_mlp's first, 100 × 784 · 784 × 128): M is one block that two
  // threads would split, each packing all of B; K splits into two parts of two slices, and the
  // second phase has blocks for both threads.
  const Case layer = matmul(100, 128, 784);
  const gemm::Blocking plan = planOf(layer);
  EXPECT_EQ(plan.path, gemm::Path::SplitK);
  EXPECT_EQ(plan.splits, 2);
  EXPECT_GE(plan.reduceItems, 2);
  check(hostJit(), layer, DType::f32, {1, 2});
  check(hostJit(), matmul(100, 128, 784, true, true), DType::f32, {2});
  // Three K slices make no parts of two slices each: the packed path. The slice depth is the ISA's
  // (AVX-512's is shallower), so K is found for each ISA rather than fixed.
  for (const VectorIsa& isa : {isaOf(hostJit()), isaOf(*makeJit("skylake-avx512")), isaOf(sse2Jit())}) {
    auto plan = [&](int64_t k) { return gemm::blockingFor(formOf(matmul(100, 128, k)), AccType::F32, isa); };
    EXPECT_EQ(plan(784).path, gemm::Path::SplitK) << isa.f32Lanes << " lanes";
    EXPECT_EQ(plan(784).splits, 2) << isa.f32Lanes << " lanes";
    int64_t three = 300;
    while (three < 2000 && plan(three).kBlocks != 3) three += 20;
    ASSERT_EQ(plan(three).kBlocks, 3) << isa.f32Lanes << " lanes: no K of three slices below 2000";
    EXPECT_EQ(plan(three).path, gemm::Path::Packed) << isa.f32Lanes << " lanes, K " << three << ": three slices";
  }
}

// f32 products whose rows AVX-512's 12-row register tile would pad take tiles of 10 or 8 rows
// where that saves more than 3 % of the rows (Gemm.cpp's tileRows): mnist_mlp's batch of 100 and
// convolutions of 32 or 64 channels. The others, f64, and AVX2 keep their tiles; the products
// stay right on every path and transpose, on 1 and 2 threads.
TEST(Gemm, NarrowTileRows) {
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  auto rows = [&](const Case& c, AccType acc = AccType::F32) { return gemm::blockingFor(formOf(c), acc, avx512).mr; };
  EXPECT_EQ(rows(matmul(100, 128, 784)), 10);
  EXPECT_EQ(rows(matmul(100, 10, 1280)), 10);
  EXPECT_EQ(rows(matmul(64, 200, 150)), 8);
  EXPECT_EQ(rows(matmul(32, 9, 50000, true, false)), 8);
  EXPECT_EQ(rows(matmul(300, 200, 150)), 12);
  EXPECT_EQ(rows(matmul(10000, 512, 1000)), 12);
  EXPECT_EQ(rows(matmul(1024, 1024, 1024)), 12);
  EXPECT_EQ(rows(matmul(64, 200, 150), AccType::F64), 12);
  const VectorIsa avx2 = isaOf(*makeJit("haswell"));
  EXPECT_EQ(gemm::blockingFor(formOf(matmul(64, 200, 150)), AccType::F32, avx2).mr, 6);

  const VectorIsa host = isaOf(hostJit());
  for (int64_t m : {10, 16, 64, 100})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(m, 70, 300, ta, tb), DType::f32, {1, 2});
  check(hostJit(), matmul(64, 128, 784), DType::f32, {1, 2});  // split K
  // A tile height the rule never picks (kiln_gemm_tune --mr), with partial panels.
  VectorIsa forced = host;
  forced.gemmMr = host.avx512 ? 14 : 4;
  check(hostJit(), matmul(37, 70, 300), DType::f32, {1, 2}, forced);
  check(hostJit(), matmul(37, 70, 300, true, true), DType::f32, {2}, forced);
}

// A block's last panel short of columns runs the micro-kernel of as many vectors as its columns
// need, which leaves the tile's other columns alone: products whose N leaves 1, 4, 16 or 17 columns
// over whole panels, in every transpose form, over several K slices and split K, and convolutions
// of 14 × 14 images (196 = 6 · 32 + 4), on 1 and 2 threads, f32 and f64.
TEST(Gemm, NarrowLastPanel) {
  for (int64_t n : {1, 4, 16, 17, 36, 196}) {
    const Case c = matmul(37, n, 2000);
    EXPECT_NE(planOf(c).path, gemm::Path::Small) << n << " columns";
    EXPECT_GT(planOf(c).kBlocks, 1);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(37, n, 2000, ta, tb), DType::f32, {1, 2});
  }
  check(hostJit(), matmul(37, 36, 2000), DType::f64, {1, 2});
  const Case deep = matmul(64, 20, 20000, true, false);
  EXPECT_EQ(planOf(deep).path, gemm::Path::SplitK);
  check(hostJit(), deep, DType::f32, {1, 2});
  const Conv conv = kConvs[6];
  check(hostJit(), conv.forward(), DType::f32, {1, 2});
  check(hostJit(), conv.gradInput(), DType::f32, {1, 2});
}

// kiln_gemm_tune's limits (VectorIsa::gemmKc, gemmMb, gemmNb) bound the packed path's blocks, rounded
// to the register tile, and the product stays right under any of them.
TEST(Gemm, TuningLimits) {
  VectorIsa isa = isaOf(hostJit());
  const Case c = matmul(130, 300, 700);
  const gemm::Blocking own = gemm::blockingFor(formOf(c), AccType::F32, isa);
  isa.gemmKc = 100, isa.gemmMb = 20, isa.gemmNb = 40;
  const gemm::Blocking tuned = gemm::blockingFor(formOf(c), AccType::F32, isa);
  EXPECT_LE(tuned.kc, 100);
  EXPECT_EQ(tuned.kBlocks, 7);
  EXPECT_LE(tuned.mb, gemm::roundUp(20, tuned.mr));
  EXPECT_LE(tuned.nb, gemm::roundUp(40, tuned.nr));
  EXPECT_GT(own.kc, tuned.kc);
  check(hostJit(), c, DType::f32, {1, 2}, isa);
  check(hostJit(), matmul(130, 300, 700, true, true), DType::f32, {2}, isa);
}

// Contractions of one module share the micro-kernel, the packing routines of strided operands and
// the drivers: one definition each, found by name; each keeps its own descriptor.
TEST(Gemm, SharedFunctions) {
  const std::vector<Case> cases{matmul(33, 257, 300), matmul(65, 100, 70, true, false), matmul(33, 257, 300),
                                matmul(2, 90, 77, false, true)};
  const VectorIsa isa = isaOf(hostJit());
  std::string ir;
  std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::f32, isa, &ir);
  for (size_t i = 0; i < cases.size(); ++i) verify(kernels[i], cases[i], DType::f32, {1, 2}, isa);
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = ir.find(text); at != std::string::npos; at = ir.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("define internal void @kiln.gemm.ukernel."), 2u) << "the tile's and the last panel's narrow one";
  EXPECT_EQ(count("define internal void @kiln.gemm.item."), 1u);
  EXPECT_EQ(count("define internal void @kiln.gemm.chunk."), 1u);
  EXPECT_EQ(count("define internal void @kiln.gemm.pack."), 2u) << "k or rows contiguous, for A and B alike";
  EXPECT_EQ(count("define internal void @kiln.gemm.small.item."), 1u);
  EXPECT_EQ(count(".desc = internal constant"), 4u);
}

// A small GEMM stays on one thread and needs one scratch slot; a large one one per thread.
TEST(Gemm, ScratchAndThreads) {
  auto kernel = [](const Case& c) {
    ir::Graph g = ir::parseGraph(c.graph(DType::f32), "gemm_test.kir");
    return kernels::lowerGraph(g).at(0);
  };
  const kernels::Kernel small = kernel(matmul(64, 32, 64)), large = kernel(matmul(512, 512, 512));
  const VectorIsa isa = isaOf(hostJit());
  EXPECT_EQ(contractionScratchBytes(small, isa, 4), contractionScratchBytes(small, isa, 1));
  EXPECT_GT(contractionScratchBytes(large, isa, 2), contractionScratchBytes(large, isa, 1));
  EXPECT_EQ(contractionScratchBytes(kernel(matmul(0, 7, 33)), isa, 2), 0);
}

}  // namespace
}  // namespace kiln::cpu
