// Contraction kernels of the CUDA backend (RenderParts.h renderContraction): matmul, conv2d,
// conv2d_grad_input and conv2d_grad_weight with their epilogue nest.
//
//   cuBLASLt   a matmul whose GEMM form (kernels/Gemm.h) reads plain row-major matrices (each
//              possibly transposed) at a uniform batch stride, with f32, bf16 or f16 operands, when
//              options.blasLt and the product has at least options.blasMinMacs multiply-adds
//              (4 Mi by default: below, a cuBLASLt call costs more than the generated GEMM's one
//              launch; docs/PERFORMANCE.md, "Small products on the GPU"). When the epilogue nest
//              stores exactly Acc, relu, the tanh GELU, +bias, or bias then relu/GELU, in the
//              product's dtype, at the product's own positions, one Blas step does it all
//              (cuBLASLt's epilogue; GELU is its tanh form, so only the nest's tanh form folds).
//              Otherwise cuBLASLt writes the f32 product to a scratch area and a launch of the
//              epilogue reads it (Acc = the f32 value, rounded to the product's dtype as the
//              generated GEMM rounds it).
//   generated  everything else (convolutions, integer and f64 products, batches cuBLASLt cannot
//              stride, small products, and every matmul when !options.blasLt): the tiled GEMM of
//              GemmKernel.cpp with the epilogue evaluated from the accumulator registers — one
//              launch, or, when the tiles alone would leave the device idle and K is long (weight
//              gradients), split-K: the GEMM writes each split's partial products to scratch and
//              a second launch adds them in split order (deterministic) and runs the epilogue.
//
// The epilogue is one device function, NAME_epilogue(buffers…, b, m, n, acc): the nest at the
// result point of GEMM-form point (b, m, n), with Acc bound to `acc`. The form's point maps to the
// result-level view [batch / groups, groups · M, N] (a convolution's group joins M), whose three
// parts split the result's dimensions; the nest is simplified (kernels/Simplify.h) within each part.
#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/GemmTile.h"
#include "codegen/cuda/RenderParts.h"
#include "kernels/Simplify.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

namespace kiln::cuda {
namespace {

using kernels::Expr;
using kernels::GemmForm;
using kernels::Kernel;
using kernels::LoopNest;
using ir::OpKind;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 4096;

/// The accumulator dtype of a product of `operand` values: f32 for f32/f16/bf16, f64, else i64.
DType accumulatorType(DType operand) {
  switch (operand) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return DType::f32;
    case DType::f64: return DType::f64;
    default: return DType::i64;
  }
}

// ---- cuBLASLt eligibility ---------------------------------------------------------------------

/// One operand of a matmul as cuBLASLt reads it.
struct Matrix {
  bool trans = false;
  int64_t stride = 0;  // between batches
};

/// The uniform batch stride of coefficients `coeff` over batch dimensions `dims` (0: broadcast), or
/// nothing when the batches are not equally spaced.
std::optional<int64_t> batchStride(const std::vector<int64_t>& coeff, const std::vector<int64_t>& dims) {
  std::optional<int64_t> stride;
  int64_t after = 1;  // batches inside one step of dimension i
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] > 1) {
      if (!stride) {
        if (coeff[i] % after != 0) return std::nullopt;
        stride = coeff[i] / after;
      }
      if (coeff[i] != *stride * after) return std::nullopt;
    }
    after *= dims[i];
  }
  return stride.value_or(0);
}

/// How cuBLASLt reads a row-major rows × cols operand (A: m × k; B: k × n) at coordinates
/// (batch…, row, col) of `map`: stored as is or transposed, and its batch stride.
std::optional<Matrix> matrixOf(const kernels::IndexMap& map, size_t nb, int64_t rows, int64_t cols,
                               const std::vector<int64_t>& batchDims) {
  if (!map.bounds.empty() || map.index.constant != 0) return std::nullopt;
  int64_t cr = map.index.coeff[nb], cc = map.index.coeff[nb + 1];
  auto is = [](int64_t size, int64_t coeff, int64_t want) { return size == 1 || coeff == want; };
  Matrix x;
  if (is(cols, cc, 1) && is(rows, cr, cols)) x.trans = false;
  else if (is(rows, cr, 1) && is(cols, cc, rows)) x.trans = true;
  else return std::nullopt;
  std::vector<int64_t> coeff(map.index.coeff.begin(), map.index.coeff.begin() + static_cast<ptrdiff_t>(nb));
  std::optional<int64_t> stride = batchStride(coeff, batchDims);
  if (!stride) return std::nullopt;
  x.stride = *stride;
  return x;
}

/// The cuBLASLt product of a matmul kernel, without epilogue, buffers or output type; nothing
/// when cuBLASLt cannot compute it.
std::optional<BlasMatmul> blasProduct(const Kernel& k, const GemmForm& f) {
  if (k.contraction.op != OpKind::MatMul || !f.affine) return std::nullopt;
  DType ta = k.buffers[f.a.buffer].type.dtype, tb = k.buffers[f.b.buffer].type.dtype;
  if (ta != tb || (ta != DType::f32 && ta != DType::bf16 && ta != DType::f16)) return std::nullopt;
  if (f.batch <= 0 || f.m <= 0 || f.n <= 0 || f.k <= 0 || f.batch > std::numeric_limits<int32_t>::max()) return std::nullopt;
  size_t nb = f.batchDims.size();
  std::optional<Matrix> a = matrixOf(f.a.map, nb, f.m, f.k, f.batchDims);
  // B over (batch…, k, n): its rows are k, its columns n.
  std::optional<Matrix> b = matrixOf(f.b.map, nb, f.k, f.n, f.batchDims);
  if (!a || !b) return std::nullopt;
  BlasMatmul p;
  p.m = f.m, p.n = f.n, p.k = f.k, p.batch = f.batch;
  p.transA = a->trans, p.transB = b->trans;
  p.strideA = a->stride, p.strideB = b->stride, p.strideD = f.m * f.n;
  p.typeA = ta, p.typeB = tb;
  p.a = f.a.buffer, p.b = f.b.buffer;
  // Batches of a stored A against one B are one taller product: [batch·m, k] · [k, n].
  if (p.batch > 1 && p.strideB == 0 && !p.transA && p.strideA == p.m * p.k) {
    p.m *= p.batch;
    p.batch = 1;
    p.strideA = p.strideD = 0;
  }
  return p;
}

// ---- epilogue folding -------------------------------------------------------------------------

bool nearly(double x, double want) { return std::abs(x - want) <= 1e-6 * std::abs(want); }

class EpilogueMatcher {
 public:
  EpilogueMatcher(const LoopNest& n, DType t) : n_(n), t_(t) {}

  /// The cuBLASLt epilogue (and its bias buffer) computing expression `root`, if any.
  std::optional<std::pair<BlasMatmul::Epilogue, BufferRef>> match(int32_t root) {
    using E = BlasMatmul::Epilogue;
    int32_t inner = root;
    int activation = 0;  // 0 none, 1 relu, 2 gelu
    if (const Expr* e = op(root, OpKind::Relu)) {
      inner = e->args[0];
      activation = 1;
    } else if (std::optional<int32_t> x = geluTanh(root)) {
      inner = *x;
      activation = 2;
    }
    if (isAcc(inner)) return std::pair{activation == 0 ? E::None : activation == 1 ? E::Relu : E::Gelu, BufferRef{-1}};
    const Expr* add = op(inner, OpKind::Add);
    if (!add) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      int32_t acc = add->args[side], bias = add->args[1 - side];
      std::optional<int32_t> buffer = biasBuffer(bias);
      if (isAcc(acc) && buffer)
        return std::pair{activation == 0 ? E::Bias : activation == 1 ? E::BiasRelu : E::BiasGelu, BufferRef{*buffer}};
    }
    return std::nullopt;
  }

 private:
  /// Expression i if it is op `kind` of the product's dtype.
  const Expr* op(int32_t i, OpKind kind) const {
    const Expr& e = n_.exprs[i];
    return e.kind == Expr::Kind::Op && e.op == kind && e.dtype == t_ ? &e : nullptr;
  }
  bool isAcc(int32_t i) const { return n_.exprs[i].kind == Expr::Kind::Acc && n_.exprs[i].dtype == t_; }
  bool isConstant(int32_t i, double v) const {
    const Expr& e = n_.exprs[i];
    return e.kind == Expr::Kind::Constant && e.dtype == t_ && nearly(e.value, v);
  }

  /// A load of n values of the product's dtype along the last (N) dimension: its buffer.
  std::optional<int32_t> biasBuffer(int32_t i) const {
    const Expr& e = n_.exprs[i];
    if (e.kind != Expr::Kind::Load || e.dtype != t_) return std::nullopt;
    const kernels::Load& l = n_.loads[e.load];
    const kernels::Affine& a = l.map.index;
    if (!l.map.bounds.empty() || a.constant != 0 || a.coeff.empty() || a.coeff.back() != 1) return std::nullopt;
    for (size_t d = 0; d + 1 < a.coeff.size(); ++d)
      if (a.coeff[d] != 0) return std::nullopt;
    return l.buffer;
  }

  /// Both orders of a commutative op's operands: calls f(x, y) until it returns true.
  template <typename F>
  bool either(const Expr* e, F&& f) const {
    return e && (f(e->args[0], e->args[1]) || f(e->args[1], e->args[0]));
  }

  /// x when i is passes/decompose's tanh GELU of x: 0.5 · (x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))).
  std::optional<int32_t> geluTanh(int32_t i) const {
    std::optional<int32_t> found;
    either(op(i, OpKind::Mul), [&](int32_t prod, int32_t half) {
      if (!isConstant(half, 0.5)) return false;
      return either(op(prod, OpKind::Mul), [&](int32_t x, int32_t phi2) {
        return either(op(phi2, OpKind::Add), [&](int32_t th, int32_t one) {
          const Expr* tanh = op(th, OpKind::Tanh);
          if (!isConstant(one, 1) || !tanh) return false;
          return either(op(tanh->args[0], OpKind::Mul), [&](int32_t inner, int32_t scale) {
            if (!isConstant(scale, std::sqrt(2.0 / 3.141592653589793))) return false;
            return either(op(inner, OpKind::Add), [&](int32_t x2, int32_t term) {
              if (x2 != x) return false;
              return either(op(term, OpKind::Mul), [&](int32_t cube, int32_t c) {
                if (!isConstant(c, 0.044715) || !isCube(cube, x)) return false;
                found = x;
                return true;
              });
            });
          });
        });
      });
    });
    return found;
  }

  /// Whether i is (x · x) · x in some order.
  bool isCube(int32_t i, int32_t x) const {
    return either(op(i, OpKind::Mul), [&](int32_t sq, int32_t x2) {
      const Expr* s = op(sq, OpKind::Mul);
      return x2 == x && s && s->args[0] == x && s->args[1] == x;
    });
  }

  const LoopNest& n_;
  DType t_;
};

/// Whether `m` writes the nest's domain point to its row-major position in a result of `shape`.
bool isIdentity(const kernels::IndexMap& m, const ir::Shape& shape) {
  if (!m.bounds.empty() || m.index.constant != 0 || m.index.coeff.size() != shape.size()) return false;
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && m.index.coeff[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

// ---- the renderer ---------------------------------------------------------------------------------

class ContractionRenderer {
 public:
  /// Renders `k`; with `tile`, always as the generated GEMM with that tile.
  ContractionRenderer(const Kernel& k, const RenderOptions& o, std::optional<gemm::Tile> tile = std::nullopt)
      : k_(k), o_(o), tile_(tile), f_(kernels::gemmForm(k)), name_(identifier(k.name)) {
    KILN_CHECK(k.nests.size() == 1 && k.nests[0].reductions.empty(),
               "kernel '{}': a contraction epilogue is one nest without reductions", k.name);
    DType ta = k.buffers[f_.a.buffer].type.dtype, tb = k.buffers[f_.b.buffer].type.dtype;
    KILN_CHECK(ta == tb, "kernel '{}': contraction operands of two types ({} and {})", k.name, dtypeName(ta),
               dtypeName(tb));
    operand_ = ta;
    acc_ = accumulatorType(ta);
    // b, m and n (and flat result indices) in int when the result is small enough.
    if (f_.batch * f_.m * f_.n + kMaxBlocks * kBlock >= std::numeric_limits<int32_t>::max()) index_ = "long long";
    for (int32_t b = 0; b < static_cast<int32_t>(k.buffers.size()); ++b) all_.push_back(b);
    for (const kernels::Store& s : k.nests[0].stores)
      if (std::find(written_.begin(), written_.end(), s.buffer) == written_.end()) written_.push_back(s.buffer);
  }

  RenderedKernel render() {
    out_.name = k_.name;
    const bool small = static_cast<double>(f_.batch) * f_.m * f_.n * f_.k < static_cast<double>(o_.blasMinMacs);
    std::optional<BlasMatmul> blas = o_.blasLt && !small && !tile_ ? blasProduct(k_, f_) : std::nullopt;
    if (blas && fold(*blas)) return out_;
    epilogueFunction();
    if (blas) {
      blasThroughScratch(*blas);
    } else {
      generated();
    }
    return out_;
  }

 private:
  /// One Blas step writing the result with cuBLASLt's epilogue, when the nest is one it has.
  bool fold(BlasMatmul p) {
    const LoopNest& n = k_.nests[0];
    DType t = k_.contraction.result.dtype;
    if (n.stores.size() != 1 || p.typeA != t) return false;
    const kernels::Store& s = n.stores[0];
    if (k_.buffers[s.buffer].type.dtype != t || !isIdentity(s.map, n.domain)) return false;
    auto matched = EpilogueMatcher(n, t).match(s.expr);
    if (!matched) return false;
    p.typeD = t;
    p.d = s.buffer;
    p.epilogue = matched->first;
    p.bias = matched->second;
    out_.code = fmt::format("// {}: cuBLASLt {}x{}x{} batch {}, epilogue folded\n", k_.name, p.m, p.n, p.k, p.batch);
    Step st;
    st.kind = Step::Kind::Blas;
    st.blas = p;
    out_.steps.push_back(std::move(st));
    return true;
  }

  /// cuBLASLt writes the f32 product to scratch; a launch applies the epilogue at every point.
  void blasThroughScratch(BlasMatmul p) {
    p.typeD = DType::f32;
    p.d = static_cast<BufferRef>(k_.buffers.size());
    out_.scratchBytes.push_back(f_.batch * f_.m * f_.n * static_cast<int64_t>(sizeof(float)));
    Step blas;
    blas.kind = Step::Kind::Blas;
    blas.blas = p;
    out_.steps.push_back(std::move(blas));
    std::string entry = name_ + "_apply";
    int64_t total = f_.batch * f_.m * f_.n;
    std::string& c = out_.code;
    c += fmt::format("// {}: cuBLASLt {}x{}x{} batch {} into scratch, then the epilogue\n", k_.name, p.m, p.n, p.k, p.batch);
    c += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}, const float* s0) {{\n", kBlock, entry,
                     bufferParams(k_, all_, written_));
    c += fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; i < {2}; i += static_cast<{0}>(gridDim.x) * {1})\n",
                     index_, kBlock, total);
    c += fmt::format("    {}i / {} / {}, i / {} % {}, i % {}, s0[i]);\n}}\n", epilogueCall(), f_.n, f_.m, f_.n, f_.m, f_.n);
    launch(entry, std::clamp<int64_t>(ceilDiv(total, kBlock), 1, kMaxBlocks), kBlock);
  }

  /// The generated GEMM with the epilogue fused; with split-K, the GEMM writes partial products to
  /// scratch and a second launch sums them in split order and runs the epilogue.
  void generated() {
    gemm::Tile t = tile_ ? *tile_ : gemm::chooseTile(f_, operand_, o_.sm);
    int64_t tiles = gemm::tileCount(f_, t);
    if (tiles == 0) return;  // an empty result: nothing to compute or store
    auto [splits, chunk] = gemm::splitK(f_, t, acc_);
    KILN_CHECK(tiles * splits <= std::numeric_limits<int32_t>::max() && f_.k < std::numeric_limits<int32_t>::max() - t.bk,
               "kernel '{}': a GEMM of {} x {} x {} x {} is too large for one launch", k_.name, f_.batch, f_.m, f_.n, f_.k);
    gemm::GemmEntry e;
    e.name = name_;
    e.params = bufferParams(k_, all_, written_);
    e.epilogue = epilogueCall();
    e.index = index_;
    e.acc = acc_;
    e.splits = splits;
    e.chunk = chunk;
    const char* accType = computeType(acc_);
    if (splits > 1) {
      e.partials = "s0";
      e.params += fmt::format(", {}* s0", accType);
      out_.scratchBytes.push_back(splits * f_.batch * f_.m * f_.n * dtypeSize(acc_));
    }
    out_.code += gemm::gemmKernelSource(k_, f_, t, e);
    out_.gemmKSteps = ceilDiv(chunk, t.bk);
    launch(name_, tiles * splits, t.threads);
    if (splits == 1) return;
    std::string entry = name_ + "_sum";
    int64_t total = f_.batch * f_.m * f_.n;
    const char* ix = splits * total + kMaxBlocks * kBlock >= std::numeric_limits<int32_t>::max() ? "long long" : index_;
    std::string& c = out_.code;
    c += fmt::format("// {}: the sum of {} partial products over K (chunks of {}), then the epilogue\n", k_.name, splits, chunk);
    c += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}, const {}* s0) {{\n", kBlock, entry,
                     bufferParams(k_, all_, written_), accType);
    c += fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; i < {2}; i += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                     ix, kBlock, total);
    c += fmt::format("    {} acc = s0[i];\n", accType);
    c += fmt::format("    for (int sp = 1; sp < {}; ++sp) acc = kiln_add(acc, s0[sp * static_cast<{}>({}) + i]);\n", splits, ix, total);
    c += fmt::format("    {}i / {} / {}, i / {} % {}, i % {}, acc);\n  }}\n}}\n", epilogueCall(), f_.n, f_.m, f_.n, f_.m, f_.n);
    launch(entry, std::clamp<int64_t>(ceilDiv(total, kBlock), 1, kMaxBlocks), kBlock);
  }

  /// A launch of `entry` with every buffer and scratch area as arguments.
  void launch(const std::string& entry, int64_t blocks, int threads) {
    Launch l;
    l.entry = entry;
    l.grid = {blocks, 1, 1};
    l.block = {threads, 1, 1};
    for (size_t i = 0; i < k_.buffers.size() + out_.scratchBytes.size(); ++i) l.args.push_back(static_cast<BufferRef>(i));
    Step st;
    st.launch = std::move(l);
    out_.steps.push_back(std::move(st));
  }

  /// "NAME_epilogue(b0, b1, …, " : a call of the epilogue missing (b, m, n, acc).
  std::string epilogueCall() const {
    std::string call = name_ + "_epilogue(";
    for (int32_t b : all_) call += bufferVar(b) + ", ";
    return call;
  }

  /// NAME_epilogue(buffers…, b, m, n, acc): the nest at the result point of form point (b, m, n).
  void epilogueFunction() {
    const LoopNest& source = k_.nests[0];
    std::vector<int> group;
    for (int g = 0; g < 3; ++g) {
      int dims = g == 0 ? f_.resultBatchDims : g == 1 ? f_.resultMDims : f_.resultNDims;
      group.insert(group.end(), static_cast<size_t>(dims), g);
    }
    KILN_CHECK(group.size() == source.domain.size(), "kernel '{}': epilogue domain rank {} != result rank {}", k_.name,
               source.domain.size(), group.size());
    nest_ = kernels::simplifyNest(source, group);
    const char* ix = index_;
    std::string& c = out_.code;
    c += fmt::format("static __device__ __forceinline__ void {}_epilogue({}, {} b, {} m, {} n, {} acc) {{\n", name_,
                     bufferParams(k_, all_, written_), ix, ix, ix, computeType(acc_));
    // The result-level point: a convolution's group is part of M.
    std::string flat[3] = {"b", "m", "n"};
    if (f_.groups > 1) flat[0] = fmt::format("(b / {})", f_.groups), flat[1] = fmt::format("(b % {} * {} + m)", f_.groups, f_.m);
    ExprEmitter e(k_, nest_, "e");
    for (int g = 0; g < 3; ++g) {
      std::vector<size_t> dims;
      for (size_t d = 0; d < nest_.domain.size(); ++d)
        if (group[d] == g) dims.push_back(d);
      int64_t stride = 1;
      for (size_t i = dims.size(); i-- > 0;) {
        size_t d = dims[i];
        std::string v = i == 0 ? (stride == 1 ? flat[g] : fmt::format("{} / {}", flat[g], stride))
                               : (stride == 1 ? fmt::format("{} % {}", flat[g], nest_.domain[d])
                                              : fmt::format("{} / {} % {}", flat[g], stride, nest_.domain[d]));
        std::string var = fmt::format("x{}", d);
        c += fmt::format("  const {} {} = {};\n", ix, var, v);
        e.setCoord(d, var);
        stride *= nest_.domain[d];
      }
    }
    e.setAcc("acc", acc_);
    e.emitStores(false, c, "  ");
    c += "}\n";
  }

  const Kernel& k_;
  const RenderOptions& o_;
  std::optional<gemm::Tile> tile_;
  GemmForm f_;
  std::string name_;
  DType operand_ = DType::f32, acc_ = DType::f32;
  const char* index_ = "int";
  std::vector<int32_t> all_, written_;
  LoopNest nest_;
  RenderedKernel out_;
};

}  // namespace

RenderedKernel renderContraction(const Kernel& k, const RenderOptions& options) {
  KILN_CHECK(k.hasContraction, "kernel '{}' has no contraction", k.name);
  return ContractionRenderer(k, options).render();
}

RenderedKernel gemm::renderGeneratedGemm(const Kernel& k, const Tile& t) {
  KILN_CHECK(k.hasContraction, "kernel '{}' has no contraction", k.name);
  RenderOptions options;
  return ContractionRenderer(k, options, t).render();
}

}  // namespace kiln::cuda
