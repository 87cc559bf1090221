// What the GEMM tests (GemmTest.cpp, GemmPathTest.cpp) share: contractions as one-node graphs
// (matmul, conv2d and its gradients), their kernels emitted by the generated GEMM (codegen/cpu/Gemm.h)
// and compiled, and the check against the reference interpreter, with pools of 1 and 2 threads
// (same bits on both). A test epilogue copies every finished tile to an output array and counts how
// often each element is handed over (exactly once).
//
// Tolerance: floats accumulate in f32 (f64 for f64) in another order than the interpreter's
// double sums, so |got − want| ≤ (K + 2) · u · Σ|a·b| (u the accumulator's unit roundoff), the
// classical bound of a K-term dot product; Σ|a·b| is the interpreter's result on |a| and |b|.
// Operands are rounded to their dtype first and the oracle runs in f64 on the same values, so the
// bound holds for f16 and bf16 too (their products are exact in f32). Integers are exact
// (wrapping in both).
#pragma once

#include "codegen/cpu/GemmEmitter.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "ir/Graph.h"
#include "kernels/Gemm.h"
#include "kernels/Kernel.h"
#include "runtime/HostTensor.h"
#include "support/DType.h"

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu::gemmtest {

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

Case matmul(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false);

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

inline constexpr Conv kConvs[] = {
    {2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // 3x3 "same"
    {2, 4, 11, 9, 6, 3, 2, 2, 2, 1, 1, 2, 1, 2},    // groups, stride, padding, dilation
    {1, 6, 8, 10, 3, 2, 3, 3, 3, 2, 0, 1, 2, 1},    // three groups, stride 3
    {3, 5, 6, 6, 7, 1, 1, 1, 2, 2, 0, 0, 1, 1},     // 1x1, stride 2
    {3, 4, 9, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // 90-pixel images: weight-gradient k runs of 8 break
    {4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1}, // large enough to run on two threads
    {3, 8, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // weight gradient: rows of 14 meet in runs of 196
    {2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 2, 2, 1, 1},     // padding 2: rows of 7 step back 1 between runs
};

/// A Jit for LLVM CPU `cpu` (empty: the host) that can call the thread pool.
std::unique_ptr<Jit> makeJit(const std::string& cpu);

Jit& hostJit();

Jit& sse2Jit();

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
                                 std::string* ir = nullptr);

Compiled compile(Jit& jit, const Case& c, DType t, const VectorIsa& isa);

/// The text of function `name`'s definition in module text `ir` (empty if it has none).
std::string definition(const std::string& ir, const std::string& name);

/// Runs compiled kernel `k` (case `c` in dtype `t`) with pools of each of `threads` and compares
/// with the interpreter; the code is for `isa`.
rt::HostTensor verify(const Compiled& k, const Case& c, DType t, std::initializer_list<int> threads,
                      const VectorIsa& isa);

/// Runs case `c` in dtype `t` through `jit` with pools of each of `threads` and compares with
/// the interpreter. The code is for `isa` (default: the Jit's own).
void check(Jit& jit, const Case& c, DType t, std::initializer_list<int> threads = {1, 2},
           std::optional<VectorIsa> isaOverride = std::nullopt);

/// The GEMM form of case `c` in f32.
kernels::GemmForm formOf(const Case& c);

/// The blocking of case `c` in f32 for the host.
gemm::Blocking planOf(const Case& c);

}  // namespace kiln::cpu::gemmtest
