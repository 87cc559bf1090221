// Loop, reduction and multi kernels as CUDA C++ (RenderParts.h renderNestKernel).
//
// Every nest is first simplified (kernels/Simplify.h: size-1 dimensions dropped, contiguous
// neighbours merged), then:
//
//   loop       one element per thread, grid-stride over the flat index of the simplified domain;
//              coordinates by div/mod by constant sizes, so neighbouring threads touch neighbouring
//              elements of every contiguous operand (coalesced).
//   multi      one launch for every part: the grid's blocks are split among the parts in proportion
//              to their sizes, each part grid-strides over its own elements with its blocks
//              (multi-tensor apply).
//   reduction  the strategy depends on the sizes (reductionPlan): outer = the number of kept
//              points, count = reduced points per outer point, and whether the innermost
//              dimension is reduced ("row": contiguous along the reduction) or kept ("column").
//                serial    a thread per outer point — few reduced points (count <= 32), or so
//                          many outer points that threads alone fill the device (a column
//                          reduction stays coalesced: neighbouring threads, neighbouring columns);
//                warp      a warp per row (count <= 1024): lanes stride the row, shuffles combine;
//                block     a block of 256 per row: warps' partials meet in shared memory;
//                column    32 columns × 8 row groups per block: warps read 32 neighbouring
//                          columns (coalesced), the 8 partials meet in shared memory;
//                split     few outer points and very many reduced ones (a bias gradient over a
//                          batch of 10000, a full sum of a large tensor): each reduction runs as
//                          a partial launch over S chunks of the reduced points (row: a block
//                          per chunk; column: a column tile per chunk) into scratch, then a final
//                          launch combining the S partials of each outer point in order; the outer
//                          stores run in the last final launch, the full stores in one more launch
//                          over the domain.
//              Reductions run in order (a body may use earlier results), then the outer stores
//              (one thread per outer point), then the full stores at every reduced point. Every
//              combination order is fixed by the thread layout, so results are deterministic run
//              to run; no atomics. f16/bf16 bodies accumulate in f32.
//
// Blocks are 256 threads (8 warps: enough warps per block to hide latency, small enough for 8
// resident blocks per SM), grids at most 4096 blocks (about four waves of an H100's 132 SMs at 8
// blocks each); loops stride by the grid beyond that. Indices are `int` unless a nest needs more.
#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/RenderParts.h"
#include "kernels/Simplify.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace kiln::cuda {
namespace {

using kernels::Kernel;
using kernels::LoopNest;

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;
constexpr int64_t kMaxBlocks = 4096;
/// Reduced points per outer point that one thread reduces alone.
constexpr int64_t kSerialMax = 32;
/// Reduced points per row that one warp reduces (beyond: a block).
constexpr int64_t kWarpMax = 1024;
/// Threads that keep the device busy with one element each in flight: past this many outer
/// points a column reduction needs no cooperation between threads.
constexpr int64_t kBusyThreads = 32768;

/// A nest after simplification: its kept and reduced dimensions and sizes.
struct Shape {
  LoopNest nest;
  std::vector<size_t> kept, red;
  int64_t outer = 1, count = 1, points = 1;
  bool row = false;        // the innermost dimension is reduced
  const char* index = "int";  // C++ type of flat indices
};

Shape shapeOf(const LoopNest& source) {
  Shape s;
  std::vector<int> group(source.domain.size(), 0);
  s.nest = kernels::simplifyNest(source, group);
  const LoopNest& n = s.nest;
  for (size_t d = 0; d < n.domain.size(); ++d) {
    (n.reduced[d] ? s.red : s.kept).push_back(d);
    (n.reduced[d] ? s.count : s.outer) *= n.domain[d];
  }
  s.points = s.outer * s.count;
  s.row = !n.domain.empty() && n.reduced.back();
  // Flat indices plus one grid's stride must not overflow.
  if (s.points + kMaxBlocks * kBlock >= std::numeric_limits<int32_t>::max()) s.index = "long long";
  return s;
}

enum class Strategy { Serial, Warp, Block, Column, Split };

const char* strategyName(Strategy s) {
  switch (s) {
    case Strategy::Serial: return "serial";
    case Strategy::Warp: return "warp";
    case Strategy::Block: return "block";
    case Strategy::Column: return "column";
    case Strategy::Split: return "split";
  }
  return "?";
}

struct Plan {
  Strategy strategy = Strategy::Serial;
  int64_t chunks = 1;  // Split: S
};

/// Chooses the reduction strategy from the sizes (see the file comment).
Plan reductionPlan(const Shape& s) {
  if (s.count <= kSerialMax) return {Strategy::Serial, 1};
  if (s.row) {
    if (s.count <= kWarpMax) return {Strategy::Warp, 1};
    // A block per row leaves SMs idle when rows are few and long: split them.
    int64_t chunks = std::min(ceilDiv(s.count, 16384), ceilDiv(512, s.outer));
    if (s.outer < 128 && chunks >= 2) return {Strategy::Split, chunks};
    return {Strategy::Block, 1};
  }
  if (s.outer >= kBusyThreads) return {Strategy::Serial, 1};
  int64_t tiles = ceilDiv(s.outer, 32);
  if (s.count <= 2048 || tiles * kBlock >= kBusyThreads) return {Strategy::Column, 1};
  int64_t chunks = std::min(ceilDiv(s.count, 256), ceilDiv(256, tiles));
  if (chunks >= 2) return {Strategy::Split, chunks};
  return {Strategy::Column, 1};
}

class NestRenderer {
 public:
  explicit NestRenderer(const Kernel& k) : k_(k), name_(identifier(k.name)) {
    for (const LoopNest& n : k.nests)
      for (const kernels::Store& s : n.stores)
        if (std::find(written_.begin(), written_.end(), s.buffer) == written_.end()) written_.push_back(s.buffer);
  }

  RenderedKernel render() {
    out_.name = k_.name;
    KILN_CHECK(!k_.nests.empty(), "kernel '{}': no loop nest to render", k_.name);
    bool reductions = false;
    for (const LoopNest& n : k_.nests) reductions = reductions || !n.reductions.empty();
    if (k_.nests.size() > 1) {
      KILN_CHECK(!reductions, "kernel '{}': a multi kernel part with reductions", k_.name);
      renderMulti();
    } else if (reductions) {
      renderReduction(shapeOf(k_.nests[0]));
    } else {
      renderMulti();  // a loop: a multi kernel of one part
    }
    return out_;
  }

 private:
  // ---- entries -----------------------------------------------------------------------------

  /// The entry's signature: every buffer of the kernel, then every scratch area.
  std::string signature(const std::string& entry) const {
    std::vector<int32_t> all(k_.buffers.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    std::string params = bufferParams(k_, all, written_);
    for (size_t j = 0; j < scratchTypes_.size(); ++j)
      params += fmt::format("{}{}* s{}", params.empty() ? "" : ", ", scratchTypes_[j], j);
    return fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kBlock, entry, params);
  }

  void launch(const std::string& entry, int64_t grid) {
    Launch l;
    l.entry = entry;
    l.grid = {std::max<int64_t>(grid, 1), 1, 1};
    l.block = {kBlock, 1, 1};
    for (size_t i = 0; i < k_.buffers.size() + scratchTypes_.size(); ++i) l.args.push_back(static_cast<BufferRef>(i));
    Step st;
    st.kind = Step::Kind::Launch;
    st.launch = std::move(l);
    out_.steps.push_back(std::move(st));
  }

  /// A scratch area of `count` values of computeType(t); returns its pointer variable.
  std::string scratch(DType t, int64_t count) {
    scratchTypes_.push_back(computeType(t));
    out_.scratchBytes.push_back(count * (t == DType::boolean ? 1 : std::string_view(computeType(t)) == "float" ? 4 : 8));
    return fmt::format("s{}", scratchTypes_.size() - 1);
  }

  // ---- coordinates -------------------------------------------------------------------------

  /// Declares the coordinates of `dims` (row-major) from the flat index `flat` and binds them.
  void bindCoords(ExprEmitter& e, const Shape& s, const std::vector<size_t>& dims, const std::string& flat,
                  std::string& code, const std::string& ind) {
    int64_t stride = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      size_t d = dims[i];
      int64_t size = s.nest.domain[d];
      std::string v;
      if (i == 0) v = stride == 1 ? flat : fmt::format("{} / {}", flat, stride);
      else v = stride == 1 ? fmt::format("{} % {}", flat, size) : fmt::format("{} / {} % {}", flat, stride, size);
      std::string name = fmt::format("i{}_{}", d, uid_++);
      code += fmt::format("{}const {} {} = {};\n", ind, s.index, name, v);
      e.setCoord(d, name);
      stride *= size;
    }
  }

  // ---- loops and multi kernels -------------------------------------------------------------

  /// The grid-stride loop over the points of loop nest `s` with `blocks` blocks, the first being
  /// block number `block` (a C++ expression).
  std::string loopBody(const Shape& s, const std::string& prefix, const std::string& block, int64_t blocks,
                       const std::string& ind) {
    std::string code = fmt::format("{0}#pragma unroll 1\n{0}for ({1} i = static_cast<{1}>({2}) * {3} + threadIdx.x; i < {4}; i += {5}) {{\n",
                                   ind, s.index, block, kBlock, s.points, blocks * kBlock);
    ExprEmitter e(k_, s.nest, prefix);
    bindCoords(e, s, allDims(s), "i", code, ind + "  ");
    e.emitStores(false, code, ind + "  ");
    return code + ind + "}\n";
  }

  /// A loop kernel is one grid-stride loop. A multi kernel gives each part a range of blocks (in
  /// proportion to its size) and a function of its own, called by the blocks of that range:
  /// separate (not inlined) functions keep NVRTC's time linear in the number of parts.
  void renderMulti() {
    std::vector<Shape> parts;
    int64_t wanted = 0;
    for (const LoopNest& n : k_.nests) {
      parts.push_back(shapeOf(n));
      wanted += ceilDiv(std::max<int64_t>(parts.back().points, 1), kBlock);
    }
    auto blocksOf = [&](const Shape& s) {
      int64_t blocks = ceilDiv(std::max<int64_t>(s.points, 1), kBlock);
      return wanted > kMaxBlocks ? std::max<int64_t>(1, blocks * kMaxBlocks / wanted) : blocks;
    };
    std::string entry = name_;
    std::string comment = fmt::format("// {}: {} part(s)\n", ir::kernelKindName(k_.kind), parts.size());
    if (parts.size() == 1) {
      int64_t blocks = blocksOf(parts[0]);
      out_.code += comment + signature(entry) + " {\n" + loopBody(parts[0], "v", "blockIdx.x", blocks, "  ") + "}\n";
      launch(entry, blocks);
      return;
    }
    std::string dispatch;
    int64_t first = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      const Shape& s = parts[p];
      int64_t blocks = blocksOf(s);
      std::vector<int32_t> used;
      for (const kernels::Load& l : s.nest.loads) used.push_back(l.buffer);
      for (const kernels::Store& st : s.nest.stores) used.push_back(st.buffer);
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
      std::string args;
      for (int32_t b : used) args += (args.empty() ? "" : ", ") + bufferVar(b);
      std::string fn = fmt::format("{}_part{}", name_, p);
      out_.code += fmt::format("// part {}: {} elements, {} blocks\nstatic __device__ __noinline__ void {}({}{}unsigned int block) {{\n",
                               p, s.points, blocks, fn, bufferParams(k_, used, written_), used.empty() ? "" : ", ");
      out_.code += loopBody(s, "v", "block", blocks, "  ") + "}\n";
      std::string block = first == 0 ? "blockIdx.x" : fmt::format("blockIdx.x - {}", first);
      dispatch += fmt::format("  if (blockIdx.x < {}) return {}({}{}{});\n", first + blocks, fn, args,
                              args.empty() ? "" : ", ", block);
      first += blocks;
    }
    out_.code += comment + signature(entry) + " {\n" + dispatch + "}\n";
    launch(entry, first);
  }

  static std::vector<size_t> allDims(const Shape& s) {
    std::vector<size_t> d(s.nest.domain.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = i;
    return d;
  }

  // ---- reductions --------------------------------------------------------------------------

  /// Whether expression i varies with the reduced coordinates.
  std::vector<bool> variesWithReduced(const LoopNest& n) const {
    auto touches = [&](const kernels::Affine& a) {
      for (size_t d = 0; d < a.coeff.size(); ++d)
        if (n.reduced[d] && a.coeff[d] != 0) return true;
      return false;
    };
    std::vector<bool> v(n.exprs.size(), false);
    for (size_t i = 0; i < n.exprs.size(); ++i) {
      const kernels::Expr& e = n.exprs[i];
      switch (e.kind) {
        case kernels::Expr::Kind::Load: {
          const kernels::IndexMap& m = n.loads[e.load].map;
          bool t = touches(m.index);
          for (const auto& b : m.bounds) t = t || touches(b.value);
          v[i] = t;
          break;
        }
        case kernels::Expr::Kind::Coord:
        case kernels::Expr::Kind::Random: v[i] = touches(e.index); break;
        case kernels::Expr::Kind::Op:
          for (int32_t a : e.args) v[i] = v[i] || v[a];
          break;
        default: break;
      }
    }
    return v;
  }

  /// Evaluates, before a loop over the reduced points, the expressions reachable from `roots`
  /// that do not vary in it (with count == 0 nothing is hoisted: no point exists to load at).
  void hoist(ExprEmitter& e, const Shape& s, const std::vector<int32_t>& roots, std::string& code,
             const std::string& ind) {
    if (s.count == 0) return;
    std::vector<bool> varies = variesWithReduced(s.nest);
    std::vector<bool> reach(s.nest.exprs.size(), false);
    std::vector<int32_t> stack = roots;
    while (!stack.empty()) {
      int32_t i = stack.back();
      stack.pop_back();
      if (reach[i]) continue;
      reach[i] = true;
      const kernels::Expr& x = s.nest.exprs[i];
      if (x.kind == kernels::Expr::Kind::Op)
        for (int32_t a : x.args) stack.push_back(a);
    }
    for (size_t i = 0; i < reach.size(); ++i) {
      const kernels::Expr& x = s.nest.exprs[i];
      // Constants and bound reductions are free; hoist only work.
      if (reach[i] && !varies[i] && x.kind != kernels::Expr::Kind::Constant && x.kind != kernels::Expr::Kind::Reduced)
        e.eval(static_cast<int32_t>(i), code, ind);
    }
  }

  std::vector<int32_t> storeRoots(const LoopNest& n, bool outer) const {
    std::vector<int32_t> r;
    for (const kernels::Store& st : n.stores)
      if (st.outer == outer) r.push_back(st.expr);
    return r;
  }

  bool hasStores(const LoopNest& n, bool outer) const {
    for (const kernels::Store& st : n.stores)
      if (st.outer == outer) return true;
    return false;
  }

  /// The loop over reduced points `for (r = first; r < end; r += step)` evaluating reduction j's
  /// body into accumulator `acc`.
  void accumulate(ExprEmitter& e, const Shape& s, size_t j, const ReductionForm& f, const std::string& acc,
                  const std::string& first, const std::string& end, const std::string& step, std::string& code,
                  const std::string& ind) {
    const kernels::Reduction& r = s.nest.reductions[j];
    hoist(e, s, {r.body}, code, ind);
    auto saved = e.snapshot();
    code += fmt::format("{}{} {} = {};\n", ind, computeType(f.accType), acc, f.identity);
    code += fmt::format("{}for ({} r = {}; r < {}; r += {}) {{\n", ind, s.index, first, end, step);
    bindCoords(e, s, s.red, "r", code, ind + "  ");
    std::string x = e.eval(r.body, code, ind + "  ");
    code += fmt::format("{}  {} = {}({}, {});\n", ind, acc, f.combine, acc, x);
    code += ind + "}\n";
    e.restore(saved);
  }

  /// The full stores at every reduced point `for (r = first; r < count; r += step)`.
  void fullStores(ExprEmitter& e, const Shape& s, const std::string& first, const std::string& step,
                  std::string& code, const std::string& ind) {
    if (!hasStores(s.nest, false)) return;
    hoist(e, s, storeRoots(s.nest, false), code, ind);
    auto saved = e.snapshot();
    code += fmt::format("{0}#pragma unroll 1\n{0}for ({1} r = {2}; r < {3}; r += {4}) {{\n", ind, s.index, first, s.count, step);
    bindCoords(e, s, s.red, "r", code, ind + "  ");
    e.emitStores(false, code, ind + "  ");
    code += ind + "}\n";
    e.restore(saved);
  }

  /// Combines `acc` across the lanes of a warp into lane 0 (shuffles down by `from`, …, 1).
  static void warpCombine(const ReductionForm& f, const std::string& acc, int from, std::string& code,
                          const std::string& ind) {
    code += fmt::format("{}for (int off = {}; off > 0; off >>= 1) {} = {}({}, __shfl_down_sync(0xffffffffu, {}, off));\n",
                        ind, from, acc, f.combine, acc, acc);
  }

  void renderReduction(const Shape& s) {
    Plan plan = reductionPlan(s);
    if (plan.strategy == Strategy::Split) return renderSplit(s, plan.chunks);
    const LoopNest& n = s.nest;
    std::string entry = name_;
    ExprEmitter e(k_, n, "v");
    std::string code;
    std::string ind = "    ";
    std::vector<ReductionForm> forms;
    for (const kernels::Reduction& r : n.reductions) forms.push_back(reductionForm(k_, n, r));
    std::string header = fmt::format("// {} reduction: {} outer points x {} reduced points\n", strategyName(plan.strategy),
                                     s.outer, s.count) + signature(entry) + " {\n";
    int64_t grid = 1;
    // The outer loop and, per strategy, who strides the reduced points.
    std::string first, step, outerStoreGuard;
    switch (plan.strategy) {
      case Strategy::Serial:
        header += fmt::format("  #pragma unroll 1\n  for ({0} o = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; o < {2}; o += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                              s.index, kBlock, s.outer);
        first = "0", step = "1";
        grid = ceilDiv(s.outer, kBlock);
        break;
      case Strategy::Warp:
        header += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
        header += fmt::format("  #pragma unroll 1\n  for ({0} o = static_cast<{0}>(blockIdx.x) * {1} + warp; o < {2}; o += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                              s.index, kWarps, s.outer);
        first = "lane", step = "32", outerStoreGuard = "lane == 0";
        grid = ceilDiv(s.outer, kWarps);
        break;
      case Strategy::Block:
        header += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
        for (size_t j = 0; j < forms.size(); ++j)
          header += fmt::format("  __shared__ {} sh{}[{}];\n", computeType(forms[j].accType), j, kWarps + 1);
        header += fmt::format("  #pragma unroll 1\n  for ({0} o = blockIdx.x; o < {1}; o += gridDim.x) {{\n", s.index, s.outer);
        first = "static_cast<" + std::string(s.index) + ">(threadIdx.x)", step = std::to_string(kBlock);
        outerStoreGuard = "threadIdx.x == 0";
        grid = s.outer;
        break;
      case Strategy::Column:
        // 32 columns (outer points) × 8 row groups; inactive columns (past the last) compute on
        // the last column and store nothing, so every thread reaches every barrier.
        header += "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
        for (size_t j = 0; j < forms.size(); ++j)
          header += fmt::format("  __shared__ {} sh{}[{}];\n", computeType(forms[j].accType), j, (kWarps + 1) * 32);
        header += fmt::format("  #pragma unroll 1\n  for ({0} g = blockIdx.x; g < {1}; g += gridDim.x) {{\n", s.index, ceilDiv(s.outer, 32));
        header += fmt::format("    const bool active = g * 32 + tx < {};\n", s.outer);
        header += fmt::format("    const {} o = active ? g * 32 + tx : {};\n", s.index, s.outer - 1);
        first = "ty", step = std::to_string(kWarps), outerStoreGuard = "active && ty == 0";
        grid = ceilDiv(s.outer, 32);
        break;
      case Strategy::Split: break;
    }
    bindCoords(e, s, s.kept, "o", code, ind);
    for (size_t j = 0; j < n.reductions.size(); ++j) {
      const ReductionForm& f = forms[j];
      std::string acc = fmt::format("acc{}", j);
      accumulate(e, s, j, f, acc, first, std::to_string(s.count), step, code, ind);
      std::string total = acc;
      switch (plan.strategy) {
        case Strategy::Warp:
          warpCombine(f, acc, 16, code, ind);
          code += fmt::format("{}{} = __shfl_sync(0xffffffffu, {}, 0);\n", ind, acc, acc);
          break;
        case Strategy::Block:
          warpCombine(f, acc, 16, code, ind);
          code += fmt::format("{}if (lane == 0) sh{}[warp] = {};\n{}__syncthreads();\n", ind, j, acc, ind);
          code += fmt::format("{}if (warp == 0) {{\n{}  {} t = lane < {} ? sh{}[lane] : {};\n", ind, ind,
                              computeType(f.accType), kWarps, j, f.identity);
          warpCombine(f, "t", kWarps / 2, code, ind + "  ");
          code += fmt::format("{}  if (lane == 0) sh{}[{}] = t;\n{}}}\n{}__syncthreads();\n", ind, j, kWarps, ind, ind);
          total = fmt::format("sh{}[{}]", j, kWarps);
          break;
        case Strategy::Column:
          code += fmt::format("{}sh{}[ty * 32 + tx] = {};\n{}__syncthreads();\n", ind, j, acc, ind);
          code += fmt::format("{}if (ty == 0) {{\n{}  {} t = sh{}[tx];\n", ind, ind, computeType(f.accType), j);
          code += fmt::format("{}  for (int y = 1; y < {}; ++y) t = {}(t, sh{}[y * 32 + tx]);\n", ind, kWarps, f.combine, j);
          code += fmt::format("{}  sh{}[{} + tx] = t;\n{}}}\n{}__syncthreads();\n", ind, j, kWarps * 32, ind, ind);
          total = fmt::format("sh{}[{} + tx]", j, kWarps * 32);
          break;
        default: break;
      }
      std::string red = fmt::format("red{}", j);
      code += fmt::format("{}const {} {} = {};\n", ind, computeType(n.reductions[j].dtype), red,
                          finishReduction(n.reductions[j], f, total));
      e.setReduced(j, red);
    }
    if (hasStores(n, true)) {
      auto saved = e.snapshot();
      if (outerStoreGuard.empty()) {
        e.emitStores(true, code, ind);
      } else {
        code += fmt::format("{}if ({}) {{\n", ind, outerStoreGuard);
        e.emitStores(true, code, ind + "  ");
        code += ind + "}\n";
      }
      e.restore(saved);
    }
    if (plan.strategy == Strategy::Column && hasStores(n, false)) {
      code += ind + "if (active) {\n";
      fullStores(e, s, first, step, code, ind + "  ");
      code += ind + "}\n";
    } else {
      fullStores(e, s, first, step, code, ind);
    }
    out_.code += header + code + "  }\n}\n";
    launch(entry, std::min(grid, kMaxBlocks));
  }

  /// Two-stage reductions (see the file comment): per reduction a partial and a final launch,
  /// then the full stores.
  void renderSplit(const Shape& s, int64_t chunks) {
    const LoopNest& n = s.nest;
    const int64_t chunk = ceilDiv(s.count, chunks);
    std::vector<ReductionForm> forms;
    std::vector<std::string> parts, finals;
    for (const kernels::Reduction& r : n.reductions) {
      forms.push_back(reductionForm(k_, n, r));
      parts.push_back(scratch(forms.back().accType, chunks * s.outer));
      finals.push_back(scratch(r.dtype, s.outer));
    }
    const std::string it = s.index;
    // Binds reductions [0, upto) from their finals at outer point o.
    auto loadFinals = [&](ExprEmitter& e, size_t upto, std::string& code, const std::string& ind) {
      for (size_t i = 0; i < upto; ++i) {
        std::string red = fmt::format("red{}", i);
        code += fmt::format("{}const {} {} = {}[o];\n", ind, computeType(n.reductions[i].dtype), red, finals[i]);
        e.setReduced(i, red);
      }
    };
    for (size_t j = 0; j < n.reductions.size(); ++j) {
      const ReductionForm& f = forms[j];
      const std::string accT = computeType(f.accType);
      // Partials: chunk c of outer point o.
      std::string entry = fmt::format("{}_r{}_partial", name_, j);
      ExprEmitter e(k_, n, "v");
      std::string code = fmt::format("// split reduction {}: {} outer points x {} reduced points in {} chunks of {}\n", j,
                                     s.outer, s.count, chunks, chunk) + signature(entry) + " {\n";
      const std::string ind = "  ";
      if (s.row) {
        code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
        code += fmt::format("  __shared__ {} sh[{}];\n", accT, kWarps + 1);
        code += fmt::format("  const {0} o = blockIdx.x % {1}, c = blockIdx.x / {1};\n", it, s.outer);
      } else {
        code += "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
        code += fmt::format("  __shared__ {} sh[{}];\n", accT, kWarps * 32);
        code += fmt::format("  const {0} tile = blockIdx.x % {1}, c = blockIdx.x / {1};\n", it, ceilDiv(s.outer, 32));
        code += fmt::format("  const bool active = tile * 32 + tx < {};\n", s.outer);
        code += fmt::format("  const {} o = active ? tile * 32 + tx : {};\n", it, s.outer - 1);
      }
      code += fmt::format("  const {0} end = c * {1} + {1} < {2} ? c * {1} + {1} : {2};\n", it, chunk, s.count);
      bindCoords(e, s, s.kept, "o", code, ind);
      loadFinals(e, j, code, ind);
      std::string first = s.row ? fmt::format("c * {} + threadIdx.x", chunk) : fmt::format("c * {} + ty", chunk);
      accumulate(e, s, j, f, "acc", first, "end", s.row ? std::to_string(kBlock) : std::to_string(kWarps), code, ind);
      if (s.row) {
        warpCombine(f, "acc", 16, code, ind);
        code += "  if (lane == 0) sh[warp] = acc;\n  __syncthreads();\n";
        code += fmt::format("  if (warp == 0) {{\n    {} t = lane < {} ? sh[lane] : {};\n", accT, kWarps, f.identity);
        warpCombine(f, "t", kWarps / 2, code, "    ");
        code += fmt::format("    if (lane == 0) {}[c * {} + o] = t;\n  }}\n", parts[j], s.outer);
      } else {
        code += "  sh[ty * 32 + tx] = acc;\n  __syncthreads();\n";
        code += fmt::format("  if (ty == 0 && active) {{\n    {} t = sh[tx];\n", accT);
        code += fmt::format("    for (int y = 1; y < {}; ++y) t = {}(t, sh[y * 32 + tx]);\n", kWarps, f.combine);
        code += fmt::format("    {}[c * {} + o] = t;\n  }}\n", parts[j], s.outer);
      }
      out_.code += code + "}\n";
      launch(entry, (s.row ? s.outer : ceilDiv(s.outer, 32)) * chunks);

      // Final: the chunks of each outer point combined in order; the last reduction's final
      // launch also performs the outer stores.
      entry = fmt::format("{}_r{}_final", name_, j);
      ExprEmitter fe(k_, n, "v");
      code = signature(entry) + " {\n";
      code += fmt::format("  #pragma unroll 1\n  for ({0} o = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; o < {2}; o += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                          it, kBlock, s.outer);
      code += fmt::format("    {} t = {}[o];\n", accT, parts[j]);
      code += fmt::format("    for (int c = 1; c < {}; ++c) t = {}(t, {}[c * {} + o]);\n", chunks, f.combine, parts[j], s.outer);
      std::string red = fmt::format("red{}", j);
      code += fmt::format("    const {} {} = {};\n", computeType(n.reductions[j].dtype), red,
                          finishReduction(n.reductions[j], f, "t"));
      code += fmt::format("    {}[o] = {};\n", finals[j], red);
      if (j + 1 == n.reductions.size() && hasStores(n, true)) {
        bindCoords(fe, s, s.kept, "o", code, "    ");
        loadFinals(fe, j, code, "    ");
        fe.setReduced(j, red);
        fe.emitStores(true, code, "    ");
      }
      out_.code += code + "  }\n}\n";
      launch(entry, std::min(ceilDiv(s.outer, kBlock), kMaxBlocks));
    }
    if (!hasStores(n, false)) return;
    // Full stores: every point of the domain.
    std::string entry = name_ + "_store";
    ExprEmitter e(k_, n, "v");
    std::string code = signature(entry) + " {\n";
    code += fmt::format("  #pragma unroll 1\n  for ({0} p = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; p < {2}; p += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                        it, kBlock, s.points);
    bindCoords(e, s, allDims(s), "p", code, "    ");
    code += fmt::format("    const {} o = {};\n", it, outerIndex(e, s));
    loadFinals(e, n.reductions.size(), code, "    ");
    e.emitStores(false, code, "    ");
    out_.code += code + "  }\n}\n";
    launch(entry, std::min(ceilDiv(s.points, kBlock), kMaxBlocks));
  }

  /// The row-major flat index of the current outer point, from the emitter's kept coordinates.
  std::string outerIndex(const ExprEmitter& e, const Shape& s) const {
    kernels::Affine a;
    a.coeff.assign(s.nest.domain.size(), 0);
    int64_t stride = 1;
    for (size_t i = s.kept.size(); i-- > 0;) {
      a.coeff[s.kept[i]] = stride;
      stride *= s.nest.domain[s.kept[i]];
    }
    return e.affine(a);
  }

  const Kernel& k_;
  std::string name_;
  std::vector<int32_t> written_;
  std::vector<std::string> scratchTypes_;
  RenderedKernel out_;
  int uid_ = 0;
};

}  // namespace

RenderedKernel renderNestKernel(const kernels::Kernel& k, const RenderOptions&) { return NestRenderer(k).render(); }

}  // namespace kiln::cuda
