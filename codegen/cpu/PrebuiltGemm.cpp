#include "codegen/cpu/PrebuiltGemm.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/Render.h"
#include "ir/Parser.h"
#include "kernels/Kernel.h"
#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>

namespace kiln::cpu {
namespace {

/// One contraction node as a graph in the text format: operands a, b, the op with its attributes,
/// the result; "{t}" stands for the element type.
struct Contraction {
  std::string a, b, op, attrs, result;

  std::string graph(DType t) const {
    auto typed = [&](const std::string& s) { return fmt::format(fmt::runtime(s), fmt::arg("t", dtypeName(t))); };
    return fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  %r = {}(%a, %b) {{{}}} : {}\n  output %r = %r\n}}\n",
                       typed(a), typed(b), op, attrs, typed(result));
  }
};

Contraction matmul(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  return {ta ? fmt::format("{{t}}[{},{}]", k, m) : fmt::format("{{t}}[{},{}]", m, k),
          tb ? fmt::format("{{t}}[{},{}]", n, k) : fmt::format("{{t}}[{},{}]", k, n), "matmul",
          fmt::format("transpose_a={}, transpose_b={}", ta, tb), fmt::format("{{t}}[{},{}]", m, n)};
}

/// conv2d over x[n, c, h, w] and w[o, c, k, k] (stride 1, padding p) and its two gradients.
std::vector<Contraction> conv(int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k, int64_t p) {
  const int64_t out = hw + 2 * p - k + 1;
  const std::string x = fmt::format("{{t}}[{},{},{},{}]", n, c, hw, hw);
  const std::string w = fmt::format("{{t}}[{},{},{},{}]", o, c, k, k);
  const std::string y = fmt::format("{{t}}[{},{},{},{}]", n, o, out, out);
  const std::string attrs = fmt::format("stride=[1,1], padding=[{},{}], dilation=[1,1], groups=1", p, p);
  return {{x, w, "conv2d", attrs, y},
          {y, w, "conv2d_grad_input", fmt::format("input_shape=[{},{},{},{}], {}", n, c, hw, hw, attrs), x},
          {x, y, "conv2d_grad_weight", fmt::format("weight_shape=[{},{},{},{}], {}", o, c, k, k, attrs), w}};
}

/// Contractions that reach every shared routine on every level: each path (packed, split K, the
/// small path's dot and axpy forms for 1 to 8 rows, the products that fit L1), every operand
/// layout (transposes, broadcast batches, convolution windows of float operands) for dtype `t`.
std::vector<Contraction> coveringSet(DType t) {
  std::vector<Contraction> set;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      set.push_back(matmul(300, 200, 150, ta, tb));  // packed
      set.push_back(matmul(100, 128, 784, ta, tb));  // split K in two parts (10-row tiles on AVX-512)
      set.push_back(matmul(64, 200, 150, ta, tb));   // packed, 8 × 48 tiles on AVX-512
      set.push_back(matmul(100, 200, 150, ta, tb));  // packed, 10-row tiles
      set.push_back(matmul(36, 200, 150, ta, tb));   // packed, 12-row tiles
      set.push_back(matmul(64, 128, 784, ta, tb));   // split K, 8-row tiles
      set.push_back(matmul(33, 130, 9001, ta, tb));  // K too deep to keep B packed
      set.push_back(matmul(64, 1000, 10, ta, tb));   // K under 16, B past L1: bf16 widened to f32, packed
      for (int64_t m = 1; m <= 8; ++m) set.push_back(matmul(m, 40, 50, ta, tb));  // small M
      for (int64_t m : {9, 13, 100}) set.push_back(matmul(m, 64, 64, ta, tb));     // in L1
      if (ta) {  // A's columns in place (AVX-512): packed, and split K
        set.push_back(matmul(784, 128, 100, ta, tb));
        set.push_back(matmul(40, 48, 9001, ta, tb));
      }
    }
  set.push_back({"{t}[2,17,300]", "{t}[300,130]", "matmul", "", "{t}[2,17,130]"});
  if (!isFloat(t)) return set;
  for (const Contraction& c : conv(4, 16, 20, 32, 3, 1)) set.push_back(c);
  for (const Contraction& c : conv(3, 5, 6, 7, 1, 0)) set.push_back(c);
  return set;
}

}  // namespace

std::string isaKey(const VectorIsa& isa) {
  return fmt::format("v{}{}{}{}{}{}", isa.f32Lanes, isa.fma ? ".fma" : "", isa.f16c ? ".f16c" : "",
                     isa.avx512 ? ".avx512" : "", isa.bf16Dot() ? ".bf16dot" : "", isa.amx ? ".amx" : "");
}

std::vector<std::string> prebuiltFeatureCandidates() {
  return {"sse2",   "sse3",   "ssse3",    "sse4.1",   "sse4.2",   "popcnt",   "cx16",     "sahf",
          "avx",    "avx2",   "fma",      "f16c",     "bmi",      "bmi2",     "lzcnt",    "movbe",
          "xsave",  "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512bf16", "avx512vnni",
          // Sapphire Rapids' other vector features, which LLVM may use in that level's code
          "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512ifma", "avx512fp16", "gfni",
          "vpclmulqdq", "vaes", "avxvnni", "amx-tile", "amx-bf16"};
}

PrebuiltBuild buildPrebuiltGemm(Jit& jit) {
  PrebuiltBuild out;
  const VectorIsa isa = isaOf(jit);  // linkedGemm null: the module defines every routine
  out.isaKey = isaKey(isa);
  for (const std::string& f : prebuiltFeatureCandidates())
    if (jit.hasFeature(f)) out.features.push_back(f);

  auto m = std::make_unique<llvm::Module>("kiln.gemm", jit.context());
  int kernelCount = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (const Contraction& c : coveringSet(t)) {
      const std::string text = c.graph(t);
      for (kernels::Kernel& k : kernels::lowerGraph(ir::parseGraph(text, "prebuilt.kir"))) {
        if (!k.hasContraction) continue;
        k.name = fmt::format("c{}", kernelCount++);
        renderKernel(*m, k, isa);
      }
    }
  // Keep the shared routines, made external; everything else (the kernels, their descriptors,
  // epilogues and map packings) goes.
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    if (f.getName().starts_with("kiln.gemm.")) {
      f.setLinkage(llvm::GlobalValue::ExternalLinkage);
      f.setDSOLocal(true);
      out.names.push_back(f.getName().str());
    } else {
      f.deleteBody();
    }
  }
  for (bool erased = true; erased;) {
    erased = false;
    for (llvm::GlobalVariable& g : llvm::make_early_inc_range(m->globals()))
      if (g.use_empty()) g.eraseFromParent(), erased = true;
    for (llvm::Function& f : llvm::make_early_inc_range(*m))
      if (f.isDeclaration() && f.use_empty()) f.eraseFromParent(), erased = true;
  }
  std::sort(out.names.begin(), out.names.end());
  KILN_CHECK(!out.names.empty(), "no shared GEMM routine rendered for {}", jit.cpu());
  CompileOptions options;
  options.pipeline = CompileOptions::Pipeline::Light;  // as cpu::Program compiles
  out.object = jit.emitObject(std::move(m), options);
  return out;
}

}  // namespace kiln::cpu
