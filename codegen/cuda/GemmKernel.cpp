// The generated GEMM of the CUDA backend (GemmTile.h): one block per bm × bn tile of one batch's
// product, over all of K in steps of bk:
//
//     load the thread's elements of A[tile rows, k step] and B[k step, tile columns] into registers
//     (through the GEMM form's index maps: implicit GEMM, padding and quotient conditions read 0)
//     store them into shared-memory stage s; barrier
//     for each step: load the next step into registers, compute on stage s, store the registers
//     into stage s ^ 1, barrier
//     hand every accumulator of the tile inside [M, N] to the epilogue (with split-K: write it to
//     the split's partial products in scratch, GemmTile.h)
//
// Two stages, so each step has one barrier and the next step's global loads are in flight while
// the current one computes. Each operand element's flat index is the map's affine function of its
// coordinates, split into a batch part (per block), a row part (per thread and tile, computed once)
// and a k part (per step): the inner loop adds three integers and checks the bounds with unsigned
// compares. Threads walk the operand's contiguous dimension (k or rows, whichever has the longer
// contiguous run in memory), so warps read consecutive addresses.
//
// SIMT tiles keep both operands k-major in shared memory ([k][row], rows padded by 4 so a row is
// 16-byte aligned) and read them as float4 for f32; a thread's micro-tile is made of chunks of 4
// rows (columns) spaced 4·ty (4·tx) apart, so the vector reads of a warp hit distinct banks. MMA tiles keep them row-major
// ([row][k], k padded from 32 to 40 halves: the 8 rows an ldmatrix phase reads fall in distinct
// banks); a warp's fragments come from ldmatrix.x4 (A: 16 × 16; B: two n8 tiles × k16) and feed
// mma.sync.aligned.m16n8k16.row.col with f32 accumulators, whose (row, column) per register is
// the documented fragment layout: c0,c1 at (lane/4, 2·(lane%4) + {0,1}), c2,c3 eight rows below.
#include "codegen/cuda/GemmTile.h"
#include "codegen/cuda/RenderParts.h"

#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/Render.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cuda::gemm {
namespace {

using kernels::Affine;

constexpr int64_t kWave = 132;  // SMs of an H100: a grid smaller than this leaves SMs idle

std::string lit(int64_t v) {
  if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()) return fmt::format("({}LL)", v);
  return v < 0 ? fmt::format("({})", v) : std::to_string(v);
}

Tile simt(int tx, int ty, int cm, int cn) {
  Tile t;
  t.tx = tx, t.ty = ty, t.cm = cm, t.cn = cn;
  t.bm = 4 * ty * cm, t.bn = 4 * tx * cn, t.bk = 16, t.threads = tx * ty;
  return t;
}

Tile mma(int wm, int wn, int mt, int nt) {
  Tile t;
  t.mma = true;
  t.wm = wm, t.wn = wn, t.mt = mt, t.nt = nt;
  t.bm = wm * mt, t.bn = wn * nt, t.bk = 32, t.threads = 32 * wm * wn;
  return t;
}

/// One GEMM operand as the entry loads it: which coordinates of its map are batch, row (M for A,
/// N for B) and k coordinates, and how the block's threads cover a tile of it.
struct Operand {
  const kernels::GemmOperand* op = nullptr;
  std::string p;  // variable prefix: "a" or "b"
  std::vector<size_t> bPos, rPos, kPos;
  std::vector<int64_t> bDims, rDims, kDims;
  int64_t rows = 0;
  int tileRows = 0;
  bool fastK = true;
  int tr = 0, tk = 0;      // threads along rows × along k
  int perR = 0, perK = 0;  // elements per thread along each
  const char* type = "int";  // of the flat index and every bound or quotient value

  /// The affine quantities the loader evaluates: the index, each bound's value, each quotient's value.
  std::vector<const Affine*> quantities() const {
    std::vector<const Affine*> q = {&op->map.index};
    for (const auto& b : op->map.bounds) q.push_back(&b.value);
    for (const auto& x : op->quotients) q.push_back(&x.value);
    return q;
  }
};

/// The length of the contiguous run of `dims` (positions `pos` of the map) from the innermost
/// dimension of coefficient 1 outwards; 0 when no dimension has coefficient 1.
int64_t contiguousRun(const Affine& index, const std::vector<size_t>& pos, const std::vector<int64_t>& dims) {
  int64_t run = 0;
  for (size_t i = pos.size(); i-- > 0;) {
    if (dims[i] == 1) continue;
    int64_t coeff = index.coeff[pos[i]];
    if (run == 0) {
      if (coeff != 1) return 0;
      run = dims[i];
    } else if (coeff == run) {
      run *= dims[i];
    } else {
      break;
    }
  }
  return run;
}

/// The largest |value| an affine function takes over the coordinate box `sizes`.
double extent(const Affine& a, const std::vector<int64_t>& sizes) {
  double v = std::abs(static_cast<double>(a.constant));
  for (size_t d = 0; d < a.coeff.size(); ++d)
    v += std::abs(static_cast<double>(a.coeff[d])) * static_cast<double>(std::max<int64_t>(sizes[d] - 1, 0));
  return v;
}

Operand operandOf(const kernels::GemmForm& f, bool isA, const Tile& t) {
  Operand o;
  o.op = isA ? &f.a : &f.b;
  o.p = isA ? "a" : "b";
  size_t nb = f.batchDims.size(), nr = isA ? f.mDims.size() : f.nDims.size(), nk = f.kDims.size();
  o.bDims = f.batchDims;
  o.rDims = isA ? f.mDims : f.nDims;
  o.kDims = f.kDims;
  for (size_t i = 0; i < nb; ++i) o.bPos.push_back(i);
  // A over (batch…, m…, k…); B over (batch…, k…, n…).
  for (size_t i = 0; i < nr; ++i) o.rPos.push_back(isA ? nb + i : nb + nk + i);
  for (size_t i = 0; i < nk; ++i) o.kPos.push_back(isA ? nb + nr + i : nb + i);
  o.rows = isA ? f.m : f.n;
  o.tileRows = isA ? t.bm : t.bn;
  int64_t runK = contiguousRun(o.op->map.index, o.kPos, o.kDims);
  int64_t runR = contiguousRun(o.op->map.index, o.rPos, o.rDims);
  o.fastK = runK >= runR;
  if (o.fastK) {
    o.tk = std::min(32, t.bk);
    o.tr = t.threads / o.tk;
  } else {
    o.tr = std::min(32, o.tileRows);
    o.tk = t.threads / o.tr;
  }
  KILN_ASSERT(o.tr * o.tk == t.threads && o.tileRows % o.tr == 0 && t.bk % o.tk == 0, "GEMM loader {}x{} for a {}x{} tile",
              o.tr, o.tk, o.tileRows, t.bk);
  o.perR = o.tileRows / o.tr;
  o.perK = t.bk / o.tk;
  // Sizes of every coordinate of the map, to bound the values it computes.
  std::vector<int64_t> sizes(o.op->map.index.coeff.size(), 1);
  for (size_t i = 0; i < nb; ++i) sizes[o.bPos[i]] = o.bDims[i];
  for (size_t i = 0; i < nr; ++i) sizes[o.rPos[i]] = o.rDims[i];
  for (size_t i = 0; i < nk; ++i) sizes[o.kPos[i]] = o.kDims[i];
  double most = 0;
  for (const Affine* a : o.quantities()) most = std::max(most, extent(*a, sizes));
  double index = extent(o.op->map.index, sizes);
  for (const auto& q : o.op->quotients) index += std::abs(static_cast<double>(q.coeff)) * static_cast<double>(q.limit);
  if (std::max(most, index) >= static_cast<double>(std::numeric_limits<int32_t>::max()) / 2) o.type = "long long";
  return o;
}

/// Declares `names[i]` = the coordinates of flat index `flat` over `dims` (row-major).
std::string unravel(const std::string& flat, const std::vector<int64_t>& dims, const std::string& name,
                    const char* type, const std::string& ind) {
  std::string code;
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    std::string v;
    if (dims[i] == 1) v = "0";
    else if (i == 0) v = stride == 1 ? flat : fmt::format("{} / {}", flat, lit(stride));
    else v = stride == 1 ? fmt::format("{} % {}", flat, lit(dims[i])) : fmt::format("{} / {} % {}", flat, lit(stride), lit(dims[i]));
    code += fmt::format("{}const {} {}{} = {};\n", ind, type, name, i, v);
    stride *= dims[i];
  }
  return code;
}

/// Σ coeff · coordinate over the coordinates `pos` (named name0, name1, …), plus `constant`, in
/// `type`.
std::string part(const Affine& a, const std::vector<size_t>& pos, const std::string& name, const char* type,
                 int64_t constant = 0) {
  std::string s;
  bool wide = std::string_view(type) != "int";
  for (size_t i = 0; i < pos.size(); ++i) {
    int64_t c = a.coeff[pos[i]];
    if (c == 0) continue;
    std::string x = wide ? fmt::format("static_cast<long long>({}{})", name, i) : fmt::format("{}{}", name, i);
    std::string term = c == 1 ? x : fmt::format("{} * {}", x, wide ? fmt::format("({}LL)", c) : lit(c));
    s += s.empty() ? term : " + " + term;
  }
  if (constant != 0 || s.empty()) s += s.empty() ? lit(constant) : " + " + lit(constant);
  return s;
}

class GemmWriter {
 public:
  GemmWriter(const kernels::Kernel& k, const kernels::GemmForm& f, const Tile& t, const GemmEntry& e)
      : k_(k), f_(f), t_(t), e_(e), a_(operandOf(f, true, t)), b_(operandOf(f, false, t)),
        operand_(k.buffers.at(f.a.buffer).type.dtype) {}

  std::string render() {
    std::string& c = code_;
    if (t_.mma) c += mmaHelpers();
    c += fmt::format("// generated GEMM: batch {} x M {} x N {} x K {}, {} tiles {}x{}x{}, {} threads, {} operands\n",
                     f_.batch, f_.m, f_.n, f_.k, t_.mma ? "mma.sync" : "SIMT", t_.bm, t_.bn, t_.bk, t_.threads,
                     dtypeName(operand_));
    c += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", t_.threads, e_.name, e_.params);
    sharedMemory();
    const char* ix = e_.index.c_str();
    int64_t nTiles = ceilDiv(f_.n, t_.bn), mTiles = ceilDiv(f_.m, t_.bm);
    // Blocks: N tiles fastest, then M tiles, batches and K splits.
    c += fmt::format("  const {0} tile = blockIdx.x;\n  const {0} n0 = tile % {1} * {2}, m0 = tile / {1} % {3} * {4}, bb = tile / {5} % {6};\n",
                     ix, lit(nTiles), t_.bn, lit(mTiles), t_.bm, lit(nTiles * mTiles), lit(std::max<int64_t>(f_.batch, 1)));
    if (split()) {
      c += fmt::format("  const int sp = static_cast<int>(tile / {});\n", lit(nTiles * mTiles * f_.batch));
      c += fmt::format("  const int kb = sp * {0}, ke = kb + {0} < {1} ? kb + {0} : {1};\n", e_.chunk, lit(f_.k));
    } else {
      c += fmt::format("  const int kb = 0, ke = {};\n", lit(f_.k));
    }
    c += unravel("bb", f_.batchDims, "bc", ix, "  ");
    for (Operand* o : {&a_, &b_}) operandPrologue(*o);
    c += fmt::format("  {} acc[{}] = {{}};\n", t_.mma ? "float" : computeType(e_.acc), accumulators());
    c += "  auto loadStep = [&](int k0) {\n";
    for (Operand* o : {&a_, &b_}) loadStep(*o);
    c += "  };\n  auto storeStep = [&](int s) {\n";
    for (Operand* o : {&a_, &b_}) storeStep(*o);
    c += "  };\n";
    const int64_t steps = this->steps();
    if (steps > 0) {
      c += "  loadStep(kb);\n  storeStep(0);\n  __syncthreads();\n";
      c += fmt::format("  for (int kt = 0; kt < {}; ++kt) {{\n    const int s = kt & 1;\n", steps);
      c += fmt::format("    if (kt + 1 < {}) loadStep(kb + (kt + 1) * {});\n", steps, t_.bk);
      t_.mma ? mmaCompute() : simtCompute();
      c += fmt::format("    if (kt + 1 < {}) storeStep(s ^ 1);\n    __syncthreads();\n  }}\n", steps);
    }
    t_.mma ? mmaEpilogue() : simtEpilogue();
    c += "}\n";
    return code_;
  }

 private:
  bool split() const { return e_.splits > 1; }

  /// The statement finishing result point (bb, m, n) with accumulator `acc`: the epilogue, or the
  /// split's partial product written to scratch.
  std::string finish(const std::string& acc) const {
    if (!split()) return fmt::format("{}bb, m, n, {});", e_.epilogue, acc);
    const char* ix = e_.splits * f_.batch * f_.m * f_.n >= std::numeric_limits<int32_t>::max() ? "long long" : "int";
    return fmt::format("{}[((static_cast<{}>(sp) * {} + bb) * {} + m) * {} + n] = {};", e_.partials, ix, lit(f_.batch),
                       lit(f_.m), lit(f_.n), acc);
  }

  int accumulators() const {
    return t_.mma ? (t_.mt / 16) * (t_.nt / 8) * 4 : 16 * t_.cm * t_.cn;
  }
  /// The element type in shared memory: compute values (SIMT) or the bits of f16/bf16 (MMA).
  std::string stageType() const { return t_.mma ? "unsigned short" : computeType(e_.acc); }

  /// Steps along K of every block (every split runs as many; its last ones read zeros past K).
  int64_t steps() const { return ceilDiv(split() ? e_.chunk : f_.k, t_.bk); }

  /// Two stages (one filled while the other is read), one when a single step covers K.
  void sharedMemory() {
    const int stages = steps() > 1 ? 2 : 1;
    for (const Operand* o : {&a_, &b_}) {
      if (t_.mma)
        code_ += fmt::format("  __shared__ __align__(16) unsigned short {}s[{}][{}][{}];\n", o->p, stages, o->tileRows,
                             t_.bk + 8);
      else
        code_ += fmt::format("  __shared__ __align__(16) {} {}s[{}][{}][{}];\n", stageType(), o->p, stages, t_.bk,
                             o->tileRows + 4);
    }
  }

  /// Per block and thread: the batch part of every quantity and the row parts of the thread's rows.
  void operandPrologue(const Operand& o) {
    std::string& c = code_;
    const std::string& p = o.p;
    std::vector<const Affine*> qs = o.quantities();
    c += fmt::format("  // {}: {} (buffer b{}), threads {} along rows x {} along k, {} x {} elements each\n",
                     p == "a" ? "A" : "B", k_.buffers[o.op->buffer].name, o.op->buffer, o.tr, o.tk, o.perR, o.perK);
    c += fmt::format("  const int {0}_tr = threadIdx.x {1} {2}, {0}_tk = threadIdx.x {3} {4};\n", p,
                     o.fastK ? "/" : "%", o.fastK ? o.tk : o.tr, o.fastK ? "%" : "/", o.fastK ? o.tk : o.tr);
    for (size_t q = 0; q < qs.size(); ++q)
      c += fmt::format("  const {} {}_b{} = {};\n", o.type, p, q, part(*qs[q], o.bPos, "bc", o.type, qs[q]->constant));
    c += fmt::format("  bool {}_rok[{}];\n", p, o.perR);
    for (size_t q = 0; q < qs.size(); ++q) c += fmt::format("  {} {}_r{}[{}];\n", o.type, p, q, o.perR);
    c += fmt::format("#pragma unroll\n  for (int i = 0; i < {}; ++i) {{\n", o.perR);
    c += fmt::format("    const {} r = {} + {}_tr + i * {};\n", e_.index, p == "a" ? "m0" : "n0", p, o.tr);
    c += fmt::format("    {}_rok[i] = r < {};\n", p, lit(o.rows));
    c += unravel("r", o.rDims, "rc", e_.index.c_str(), "    ");
    for (size_t q = 0; q < qs.size(); ++q)
      c += fmt::format("    {}_r{}[i] = {};\n", p, q, part(*qs[q], o.rPos, "rc", o.type));
    c += "  }\n";
    c += fmt::format("  {} {}_reg[{}][{}];\n", stageType(), p, o.perR, o.perK);
  }

  /// Loads the thread's elements of the k step starting at k0 into registers (0 outside).
  void loadStep(const Operand& o) {
    std::string& c = code_;
    const std::string& p = o.p;
    std::vector<const Affine*> qs = o.quantities();
    const kernels::IndexMap& map = o.op->map;
    size_t nBounds = map.bounds.size();
    c += fmt::format("#pragma unroll\n    for (int j = 0; j < {}; ++j) {{\n", o.perK);
    c += fmt::format("      const int kk = k0 + {}_tk + j * {};\n      const bool kok = kk < ke;\n", p, o.tk);
    c += unravel("kk", o.kDims, "kc", "int", "      ");
    for (size_t q = 0; q < qs.size(); ++q)
      c += fmt::format("      const {0} kq{1} = {2}_b{1} + {3};\n", o.type, q, p, part(*qs[q], o.kPos, "kc", o.type));
    c += fmt::format("#pragma unroll\n      for (int i = 0; i < {}; ++i) {{\n", o.perR);
    c += fmt::format("        bool ok = kok && {}_rok[i];\n", p);
    c += fmt::format("        {} at = kq0 + {}_r0[i];\n", o.type, p);
    bool narrow = std::string_view(o.type) == "int";
    for (size_t q = 1; q <= nBounds; ++q)
      c += fmt::format("        ok = ok && static_cast<{}>(kq{} + {}_r{}[i]) < {}{};\n", narrow ? "unsigned int" : "unsigned long long",
                       q, p, q, map.bounds[q - 1].limit, narrow ? "u" : "ull");
    for (size_t x = 0; x < o.op->quotients.size(); ++x) {
      const kernels::GemmOperand::Quotient& qt = o.op->quotients[x];
      size_t q = 1 + nBounds + x;
      c += fmt::format("        const {0} w{1} = kq{2} + {3}_r{2}[i];\n", o.type, x, q, p);
      c += fmt::format("        ok = ok && w{0} % {1} == 0 && w{0} >= 0 && w{0} / {1} < {2};\n", x, lit(qt.divisor), lit(qt.limit));
      c += fmt::format("        at += w{} / {} * {};\n", x, lit(qt.divisor), lit(qt.coeff));
    }
    std::string buf = bufferVar(o.op->buffer);
    std::string value = t_.mma ? fmt::format("reinterpret_cast<const unsigned short*>({})[at]", buf)
                               : fmt::format("static_cast<{}>(kiln_ld({}[at]))", stageType(), buf);
    c += fmt::format("        {}_reg[i][j] = ok ? {} : static_cast<{}>(0);\n      }}\n    }}\n", p, value, stageType());
  }

  void storeStep(const Operand& o) {
    const std::string& p = o.p;
    std::string row = fmt::format("{}_tr + i * {}", p, o.tr), k = fmt::format("{}_tk + j * {}", p, o.tk);
    code_ += fmt::format("#pragma unroll\n    for (int i = 0; i < {}; ++i)\n#pragma unroll\n      for (int j = 0; j < {}; ++j) ", o.perR, o.perK);
    code_ += t_.mma ? fmt::format("{}s[s][{}][{}] = {}_reg[i][j];\n", p, row, k, p)
                    : fmt::format("{}s[s][{}][{}] = {}_reg[i][j];\n", p, k, row, p);
  }

  // ---- SIMT --------------------------------------------------------------------------------------

  void simtCompute() {
    std::string& c = code_;
    const char* ct = computeType(e_.acc);
    int rowsPer = 4 * t_.cm, colsPer = 4 * t_.cn;
    c += fmt::format("    const int tx = threadIdx.x % {}, ty = threadIdx.x / {};\n", t_.tx, t_.tx);
    // Unrolled 16 deep whatever the step: deeper unrolling of the wider steps (gemm::simtStep) tripled
    // NVRTC's time for no speed.
    c += fmt::format("#pragma unroll 16\n    for (int kk = 0; kk < {}; ++kk) {{\n", t_.bk);
    c += fmt::format("      {} x[{}], y[{}];\n", ct, rowsPer, colsPer);
    auto fetch = [&](const char* dst, const char* src, const char* t, int chunks, int spacing) {
      c += fmt::format("#pragma unroll\n      for (int q = 0; q < {}; ++q) {{\n", chunks);
      if (e_.acc == DType::f32) {
        c += fmt::format("        const float4 v = *reinterpret_cast<const float4*>(&{}[s][kk][{} * 4 + q * {}]);\n", src, t, spacing);
        c += fmt::format("        {0}[q * 4] = v.x; {0}[q * 4 + 1] = v.y; {0}[q * 4 + 2] = v.z; {0}[q * 4 + 3] = v.w;\n", dst);
      } else {
        c += fmt::format("#pragma unroll\n        for (int u = 0; u < 4; ++u) {}[q * 4 + u] = {}[s][kk][{} * 4 + q * {} + u];\n", dst,
                         src, t, spacing);
      }
      c += "      }\n";
    };
    fetch("x", "as", "ty", t_.cm, 4 * t_.ty);
    fetch("y", "bs", "tx", t_.cn, 4 * t_.tx);
    std::string fma;
    switch (e_.acc) {
      case DType::f32: fma = "fmaf(x[i], y[j], acc[i * {0} + j])"; break;
      case DType::f64: fma = "fma(x[i], y[j], acc[i * {0} + j])"; break;
      default:  // integers wrap, as the interpreter's i64 arithmetic
        fma = "static_cast<long long>(static_cast<unsigned long long>(acc[i * {0} + j]) + static_cast<unsigned long long>(x[i]) * static_cast<unsigned long long>(y[j]))";
    }
    c += fmt::format("#pragma unroll\n      for (int i = 0; i < {0}; ++i)\n#pragma unroll\n        for (int j = 0; j < {1}; ++j) acc[i * {1} + j] = {2};\n    }}\n",
                     rowsPer, colsPer, fmt::format(fmt::runtime(fma), colsPer));
  }

  void simtEpilogue() {
    std::string& c = code_;
    int rowsPer = 4 * t_.cm, colsPer = 4 * t_.cn;
    c += fmt::format("  const int tx = threadIdx.x % {}, ty = threadIdx.x / {};\n", t_.tx, t_.tx);
    c += fmt::format("#pragma unroll\n  for (int i = 0; i < {}; ++i) {{\n", rowsPer);
    c += fmt::format("    const {} m = m0 + ty * 4 + i / 4 * {} + i % 4;\n", e_.index, 4 * t_.ty);
    c += fmt::format("    if (m >= {}) continue;\n", lit(f_.m));
    c += fmt::format("#pragma unroll\n    for (int j = 0; j < {}; ++j) {{\n", colsPer);
    c += fmt::format("      const {} n = n0 + tx * 4 + j / 4 * {} + j % 4;\n", e_.index, 4 * t_.tx);
    c += fmt::format("      if (n < {}) {}\n    }}\n  }}\n", lit(f_.n), finish(fmt::format("acc[i * {} + j]", colsPer)));
  }

  // ---- MMA ---------------------------------------------------------------------------------------

  /// ldmatrix and mma.sync wrappers, shared by every GEMM kernel of a program (hence the guard).
  std::string mmaHelpers() const {
    return R"(#ifndef KILN_GEMM_MMA_HELPERS
#define KILN_GEMM_MMA_HELPERS
// Four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
static __device__ __forceinline__ void kiln_ldmatrix_x4(unsigned r[4], const unsigned short* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
// d += a (16x16, row-major) * b (16x8, column-major), f32 accumulators.
static __device__ __forceinline__ void kiln_mma_bf16(float* d, const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ void kiln_mma_f16(float* d, const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
)";
  }

  void mmaCompute() {
    std::string& c = code_;
    int fm = t_.mt / 16, fn = t_.nt / 8;
    c += fmt::format("    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = warp / {0}, wc = warp % {0};\n", t_.wn);
    c += fmt::format("#pragma unroll\n    for (int ks = 0; ks < {}; ks += 16) {{\n", t_.bk);
    c += fmt::format("      unsigned fa[{}][4], fb[{}][2];\n", fm, fn);
    c += fmt::format("#pragma unroll\n      for (int i = 0; i < {}; ++i) kiln_ldmatrix_x4(fa[i], &as[s][wr * {} + i * 16 + (lane & 15)][ks + (lane >> 4) * 8]);\n",
                     fm, t_.mt);
    // Matrices of one x4 load: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
    c += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; j += 2) {{\n", fn);
    c += "        unsigned r[4];\n";
    c += fmt::format("        kiln_ldmatrix_x4(r, &bs[s][wc * {} + j * 8 + (lane & 7) + (lane >> 4) * 8][ks + ((lane >> 3) & 1) * 8]);\n", t_.nt);
    c += "        fb[j][0] = r[0]; fb[j][1] = r[1]; fb[j + 1][0] = r[2]; fb[j + 1][1] = r[3];\n      }\n";
    c += fmt::format("#pragma unroll\n      for (int i = 0; i < {0}; ++i)\n#pragma unroll\n        for (int j = 0; j < {1}; ++j) kiln_mma_{2}(&acc[(i * {1} + j) * 4], fa[i], fb[j]);\n    }}\n",
                     fm, fn, operand_ == DType::f16 ? "f16" : "bf16");
  }

  void mmaEpilogue() {
    std::string& c = code_;
    int fm = t_.mt / 16, fn = t_.nt / 8;
    c += fmt::format("  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = warp / {0}, wc = warp % {0};\n", t_.wn);
    c += fmt::format("#pragma unroll\n  for (int i = 0; i < {}; ++i)\n#pragma unroll\n    for (int h = 0; h < 2; ++h) {{\n", fm);
    c += fmt::format("      const {} m = m0 + wr * {} + i * 16 + h * 8 + (lane >> 2);\n", e_.index, t_.mt);
    c += fmt::format("      if (m >= {}) continue;\n", lit(f_.m));
    c += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j)\n#pragma unroll\n        for (int q = 0; q < 2; ++q) {{\n", fn);
    c += fmt::format("          const {} n = n0 + wc * {} + j * 8 + (lane & 3) * 2 + q;\n", e_.index, t_.nt);
    c += fmt::format("          if (n < {}) {}\n        }}\n    }}\n", lit(f_.n),
                     finish(fmt::format("acc[(i * {} + j) * 4 + h * 2 + q]", fn)));
  }

  const kernels::Kernel& k_;
  const kernels::GemmForm& f_;
  const Tile& t_;
  const GemmEntry& e_;
  Operand a_, b_;
  DType operand_;
  std::string code_;
};

}  // namespace

std::vector<Tile> candidateTiles(DType operand, int sm) {
  if ((operand == DType::bf16 || operand == DType::f16) && sm >= 80)
    return {mma(2, 4, 64, 32), mma(4, 2, 32, 32), mma(2, 4, 32, 32), mma(2, 2, 32, 32), mma(1, 4, 32, 32),
            mma(4, 1, 32, 32), mma(1, 2, 32, 32), mma(2, 1, 32, 32), mma(2, 2, 16, 16)};
  std::vector<Tile> tiles = {simt(16, 16, 2, 2), simt(16, 16, 2, 1), simt(16, 16, 1, 2), simt(16, 16, 1, 1),
                             simt(16, 8, 1, 2),  simt(8, 16, 2, 1),  simt(16, 8, 1, 1),  simt(8, 16, 1, 1),
                             simt(8, 8, 1, 1)};
  // 64-bit accumulators: at most half the registers of the largest micro-tile, and both stages in
  // the 48 KiB of static shared memory a block may declare.
  if (operand == DType::f64 || isInteger(operand) || operand == DType::boolean)
    std::erase_if(tiles, [](const Tile& t) { return t.cm * t.cn > 2 || 2 * t.bk * (t.bm + t.bn + 8) * 8 > 48 * 1024; });
  return tiles;
}

Tile chooseTile(const kernels::GemmForm& f, DType operand, int sm) {
  // Tiles no larger than the problem (rounded up to 32), largest area first and, among equal
  // areas, the one wasting least: the first whose grid nearly fills the device (three quarters of
  // a wave, as a grid of fewer but fuller blocks is often as fast), else the one with most blocks.
  auto used = [&](const Tile& t) {
    return static_cast<double>(f.m * f.n) / static_cast<double>(ceilDiv(f.m, t.bm) * t.bm * ceilDiv(f.n, t.bn) * t.bn);
  };
  std::vector<Tile> tiles = candidateTiles(operand, sm);
  std::erase_if(tiles, [&](const Tile& t) {
    return (t.bm > 32 && t.bm > ceilDiv(f.m, 32) * 32) || (t.bn > 32 && t.bn > ceilDiv(f.n, 32) * 32);
  });
  std::stable_sort(tiles.begin(), tiles.end(), [&](const Tile& x, const Tile& y) {
    return x.bm * x.bn != y.bm * y.bn ? x.bm * x.bn > y.bm * y.bn : used(x) > used(y);
  });
  Tile chosen = tiles.back();
  for (const Tile& t : tiles)
    if (tileCount(f, t) >= kWave * 3 / 4) {
      chosen = t;
      break;
    }
  if (!chosen.mma) chosen.bk = simtStep(f, chosen, operand);
  return chosen;
}

int simtStep(const kernels::GemmForm& f, const Tile& t, DType operand) {
  // Each step is a round trip to memory the block waits for: a short K in one or two steps.
  int bk = f.k <= 16 ? 16 : f.k <= 32 ? 32 : f.k <= 64 ? 64 : f.k <= 256 ? 32 : 16;
  const int64_t elem = operand == DType::f64 || isInteger(operand) || operand == DType::boolean ? 8 : 4;
  auto bytes = [&](int k) { return (f.k > k ? 2 : 1) * k * (t.bm + t.bn + 8) * elem; };
  while (bk > 16 && bytes(bk) > 48 * 1024) bk /= 2;
  return bk;
}

int64_t tileCount(const kernels::GemmForm& f, const Tile& t) { return f.batch * ceilDiv(f.m, t.bm) * ceilDiv(f.n, t.bn); }

std::pair<int64_t, int64_t> splitK(const kernels::GemmForm& f, const Tile& t, DType acc) {
  constexpr int64_t kMinChunk = 256, kMaxSplits = 64, kMaxPartialBytes = int64_t{64} << 20;
  int64_t tiles = tileCount(f, t);
  if (tiles == 0 || tiles >= kWave * 3 / 4) return {1, f.k};
  int64_t perSplit = f.batch * f.m * f.n * dtypeSize(acc);
  int64_t splits = std::min({ceilDiv(kWave, tiles), f.k / kMinChunk, kMaxSplits, kMaxPartialBytes / perSplit});
  if (splits < 2) return {1, f.k};
  int64_t chunk = ceilDiv(ceilDiv(f.k, splits), t.bk) * t.bk;
  return {ceilDiv(f.k, chunk), chunk};
}

std::string gemmKernelSource(const kernels::Kernel& k, const kernels::GemmForm& f, const Tile& t, const GemmEntry& e) {
  return GemmWriter(k, f, t, e).render();
}

}  // namespace kiln::cuda::gemm
