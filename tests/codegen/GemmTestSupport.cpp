#include "tests/codegen/GemmTestSupport.h"

#include "codegen/cpu/Gemm.h"
#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/ThreadPool.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace kiln::cpu::gemmtest {

using rt::HostTensor;

namespace {

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
  return pointEpilogue(m, name, acc, resultM, resultN, {nbuf + 1, nbuf + 2},
                       [&](llvm::IRBuilderBase& b, const std::vector<llvm::Value*>& buffers, llvm::Value* element,
                           llvm::Value* index) {
    llvm::Type* elt = acc == AccType::F32 ? b.getFloatTy() : acc == AccType::F64 ? b.getDoubleTy() : b.getInt64Ty();
    b.CreateStore(b.CreateLoad(elt, element), b.CreateGEP(elt, buffers[0], index));
    llvm::Value* counter = b.CreateGEP(b.getInt32Ty(), buffers[1], index);
    b.CreateStore(b.CreateAdd(b.CreateLoad(b.getInt32Ty(), counter), b.getInt32(1)), counter);
  });
}

}  // namespace

Case matmul(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  return {ta ? fmt::format("{{t}}[{},{}]", k, m) : fmt::format("{{t}}[{},{}]", m, k),
          tb ? fmt::format("{{t}}[{},{}]", n, k) : fmt::format("{{t}}[{},{}]", k, n), "matmul",
          fmt::format("transpose_a={}, transpose_b={}", ta, tb), fmt::format("{{t}}[{},{}]", m, n)};
}

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

std::vector<Compiled> compileAll(Jit& jit, const std::vector<Case>& cs, DType t, const VectorIsa& isa,
                                 std::string* ir) {
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

std::string definition(const std::string& ir, const std::string& name) {
  const size_t start = ir.find("define void @" + name + "(");
  if (start == std::string::npos) return "";
  return ir.substr(start, ir.find("\n}\n", start) - start);
}

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
    // Blocks of whole register tiles of a plain product go straight into the result buffer
    // (desc::Direct), never through the epilogue: each element is handed over once, or is in the
    // result buffer and handed over never.
    const HostTensor* result = nullptr;
    for (size_t b = 0, o = 0; b < k.kernel.buffers.size(); ++b)
      if (!in.count(k.kernel.buffers[b].name)) {
        if (k.kernel.buffers[b].name == "r") result = &owned[o];
        ++o;
      }
    for (int64_t i = 0; i < numel && result; ++i)
      if (count.as<int32_t>()[i] == 0 && result->dtype() == out.dtype()) {
        std::memcpy(static_cast<char*>(out.data()) + i * dtypeSize(out.dtype()),
                    static_cast<const char*>(result->data()) + i * dtypeSize(out.dtype()), dtypeSize(out.dtype()));
        count.as<int32_t>()[i] = 1;
      }
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

void check(Jit& jit, const Case& c, DType t, std::initializer_list<int> threads, std::optional<VectorIsa> isaOverride) {
  const VectorIsa isa = isaOverride.value_or(isaOf(jit));
  verify(compile(jit, c, t, isa), c, t, threads, isa);
}

kernels::GemmForm formOf(const Case& c) {
  ir::Graph g = ir::parseGraph(c.graph(DType::f32), "gemm_test.kir");
  return kernels::gemmForm(kernels::lowerGraph(g).at(0));
}

gemm::Blocking planOf(const Case& c) { return gemm::blockingFor(formOf(c), AccType::F32, isaOf(hostJit())); }

}  // namespace kiln::cpu::gemmtest
