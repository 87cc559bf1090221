#include "kernels/Gemm.h"

#include "support/Error.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>

namespace kiln::kernels {
namespace {

using ir::OpKind;

const ir::AttrValue& attrOf(const Contraction& c, std::string_view name) {
  return c.attrs.at(static_cast<size_t>(ir::opInfo(c.op).attrIndex(name)));
}

/// Stride, padding and dilation hold one value per spatial dimension; a single value applies to both.
int64_t spatial(const Contraction& c, std::string_view name, size_t i) {
  const ir::Ints& v = std::get<ir::Ints>(attrOf(c, name));
  return v.size() == 1 ? v[0] : v.at(i);
}

/// constant + Σ coeff · coordinate over `size` coordinates, given as (position, coefficient) terms.
Affine affine(size_t size, std::initializer_list<std::pair<size_t, int64_t>> terms, int64_t constant = 0) {
  Affine a;
  a.constant = constant;
  a.coeff.assign(size, 0);
  for (auto [position, coeff] : terms) a.coeff.at(position) += coeff;
  return a;
}

int64_t evaluate(const Affine& a, std::span<const int64_t> coords) {
  int64_t v = a.constant;
  for (size_t d = 0; d < a.coeff.size(); ++d) v += a.coeff[d] * coords[d];
  return v;
}

int64_t product(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> concat(std::initializer_list<const std::vector<int64_t>*> parts) {
  std::vector<int64_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

/// Drops the bounds of `map` that hold at every point of the coordinate box `sizes`.
void dropTrivialBounds(IndexMap& map, const std::vector<int64_t>& sizes) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return;  // an empty box
  std::erase_if(map.bounds, [&](const IndexMap::Bound& b) {
    int64_t lo = b.value.constant, hi = b.value.constant;
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t span = b.value.coeff[d] * (sizes[d] - 1);
      (span < 0 ? lo : hi) += span;
    }
    return lo >= 0 && hi < b.limit;
  });
}

/// Fills the sizes and finishes both maps.
void finish(GemmForm& f) {
  f.batch = product(f.batchDims);
  f.m = product(f.mDims);
  f.n = product(f.nDims);
  f.k = product(f.kDims);
  dropTrivialBounds(f.a.map, concat({&f.batchDims, &f.mDims, &f.kDims}));
  dropTrivialBounds(f.b.map, concat({&f.batchDims, &f.kDims, &f.nDims}));
  f.affine = f.a.quotients.empty() && f.b.quotients.empty();
}

/// Matmul operand `map` (over the operand's coordinates, of `shape`) as a map over the form's
/// (batch…, row, col) coordinates, `nb` batch coordinates, where (row, col) are the operand's last
/// two dimensions — swapped when `transposed`. Batch dimensions broadcast NumPy style: the
/// operand's missing and size-1 ones read coordinate 0.
IndexMap matmulOperandMap(const IndexMap& map, const ir::Shape& shape, size_t nb, bool transposed) {
  const size_t rank = shape.size(), operandBatch = rank - 2;
  // The operand dimension behind each form coordinate (none: broadcast).
  std::vector<std::optional<size_t>> dimOf(nb + 2);
  for (size_t i = 0; i < nb; ++i)
    if (i + operandBatch >= nb && shape[i + operandBatch - nb] != 1) dimOf[i] = i + operandBatch - nb;
  dimOf[nb] = transposed ? rank - 1 : rank - 2;
  dimOf[nb + 1] = transposed ? rank - 2 : rank - 1;
  auto compose = [&](const Affine& a) {
    Affine out{a.constant, std::vector<int64_t>(nb + 2, 0)};
    for (size_t j = 0; j < nb + 2; ++j)
      if (dimOf[j]) out.coeff[j] = a.coeff[*dimOf[j]];
    return out;
  };
  IndexMap out;
  out.index = compose(map.index);
  for (const IndexMap::Bound& b : map.bounds) out.bounds.push_back({compose(b.value), b.limit});
  out.padValue = map.padValue;
  return out;
}

GemmForm matmulForm(const Kernel& k) {
  const Contraction& c = k.contraction;
  const bool ta = std::get<bool>(attrOf(c, "transpose_a")), tb = std::get<bool>(attrOf(c, "transpose_b"));
  const ir::Shape &as = c.shapeA, &rs = c.result.shape;
  const size_t nb = rs.size() - 2;
  const int64_t m = rs[nb], n = rs[nb + 1], kk = as[as.size() - (ta ? 2 : 1)];
  GemmForm f;
  f.batchDims.assign(rs.begin(), rs.begin() + static_cast<std::ptrdiff_t>(nb));
  f.mDims = {m};
  f.nDims = {n};
  f.kDims = {kk};
  f.resultBatchDims = static_cast<int>(nb);
  // A over (batch…, m, k), B over (batch…, k, n), through the operands' maps (Contraction).
  f.a.buffer = c.a;
  f.a.map = matmulOperandMap(c.mapA, c.shapeA, nb, ta);
  f.b.buffer = c.b;
  f.b.map = matmulOperandMap(c.mapB, c.shapeB, nb, tb);
  finish(f);
  return f;
}

/// The sizes of a convolution and its gradients, from x[N,C,H,W], w[O,C/G,KH,KW], y[N,O,OH,OW].
struct ConvShape {
  int64_t n, c, h, w, o, cg, kh, kw, oh, ow, groups, og;
  int64_t strideH, strideW, padH, padW, dilH, dilW;

  ConvShape(const Contraction& con, const ir::Shape& x, const ir::Shape& wt, const ir::Shape& y)
      : n(x[0]), c(x[1]), h(x[2]), w(x[3]), o(wt[0]), cg(wt[1]), kh(wt[2]), kw(wt[3]), oh(y[2]), ow(y[3]),
        groups(std::get<int64_t>(attrOf(con, "groups"))), og(o / groups),
        strideH(spatial(con, "stride", 0)), strideW(spatial(con, "stride", 1)),
        padH(spatial(con, "padding", 0)), padW(spatial(con, "padding", 1)),
        dilH(spatial(con, "dilation", 0)), dilW(spatial(con, "dilation", 1)) {}

  /// x[n, g·C/G + c, y·sH + i·dH − pH, v·sW + j·dW − pW] over `size` coordinates at the given
  /// positions, with the window's bounds.
  IndexMap input(size_t size, size_t pn, size_t pg, size_t pc, size_t pi, size_t pj, size_t py, size_t pv) const {
    IndexMap m;
    m.index = affine(size,
                     {{pn, c * h * w}, {pg, cg * h * w}, {pc, h * w}, {py, strideH * w}, {pi, dilH * w},
                      {pv, strideW}, {pj, dilW}},
                     -padH * w - padW);
    m.bounds.push_back({affine(size, {{py, strideH}, {pi, dilH}}, -padH), h});
    m.bounds.push_back({affine(size, {{pv, strideW}, {pj, dilW}}, -padW), w});
    return m;
  }
  /// w[g·O/G + o, c, i, j].
  IndexMap weight(size_t size, size_t pg, size_t po, size_t pc, size_t pi, size_t pj) const {
    IndexMap m;
    m.index = affine(size, {{pg, og * cg * kh * kw}, {po, cg * kh * kw}, {pc, kh * kw}, {pi, kw}, {pj, 1}});
    return m;
  }
};

GemmForm conv2dForm(const Kernel& k) {
  const Contraction& c = k.contraction;
  ConvShape s(c, c.shapeA, c.shapeB, c.result.shape);
  GemmForm f;
  f.batchDims = {s.n, s.groups};
  f.mDims = {s.og};
  f.nDims = {s.oh, s.ow};
  f.kDims = {s.cg, s.kh, s.kw};
  f.resultBatchDims = 1, f.resultNDims = 2, f.groups = s.groups;
  // A = w over (n, g, o, c, i, j); B = x over (n, g, c, i, j, y, v).
  f.a.buffer = c.b;
  f.a.map = s.weight(6, 1, 2, 3, 4, 5);
  f.b.buffer = c.a;
  f.b.map = s.input(7, 0, 1, 2, 3, 4, 5, 6);
  finish(f);
  return f;
}

GemmForm conv2dGradWeightForm(const Kernel& k) {
  const Contraction& c = k.contraction;
  ConvShape s(c, c.shapeA, c.result.shape, c.shapeB);
  GemmForm f;
  f.batchDims = {s.groups};
  f.mDims = {s.og};
  f.nDims = {s.cg, s.kh, s.kw};
  f.kDims = {s.n, s.oh, s.ow};
  f.resultBatchDims = 0, f.resultNDims = 3, f.groups = s.groups;
  // A = dy over (g, o, n, y, v); B = x over (g, n, y, v, c, i, j).
  f.a.buffer = c.b;
  f.a.map.index = affine(5, {{2, s.o * s.oh * s.ow}, {0, s.og * s.oh * s.ow}, {1, s.oh * s.ow}, {3, s.ow}, {4, 1}});
  f.b.buffer = c.a;
  f.b.map = s.input(7, 1, 0, 4, 5, 6, 2, 3);
  finish(f);
  return f;
}

GemmForm conv2dGradInputForm(const Kernel& k) {
  const Contraction& c = k.contraction;
  ConvShape s(c, c.result.shape, c.shapeB, c.shapeA);
  GemmForm f;
  f.batchDims = {s.n, s.groups};
  f.mDims = {s.cg};
  f.nDims = {s.h, s.w};
  f.kDims = {s.og, s.kh, s.kw};
  f.resultBatchDims = 1, f.resultNDims = 2, f.groups = s.groups;
  // A = w over (n, g, c, o, i, j).
  f.a.buffer = c.b;
  f.a.map = s.weight(6, 1, 3, 2, 4, 5);
  // B = dy over (n, g, o, i, j, h, w) at y = (h + pH − i·dH) / sH, v = (w + pW − j·dW) / sW.
  f.b.buffer = c.a;
  IndexMap& dy = f.b.map;
  dy.index = affine(7, {{0, s.o * s.oh * s.ow}, {1, s.og * s.oh * s.ow}, {2, s.oh * s.ow}});
  // Its row y = value / stride of limit OH (coefficient OW in dy), likewise its column v: an
  // affine coordinate with a bound at stride 1, a quotient term otherwise.
  auto place = [&](Affine value, int64_t stride, int64_t limit, int64_t coeff) {
    if (stride > 1) {
      f.b.quotients.push_back({std::move(value), stride, limit, coeff});
      return;
    }
    for (size_t d = 0; d < value.coeff.size(); ++d) dy.index.coeff[d] += coeff * value.coeff[d];
    dy.index.constant += coeff * value.constant;
    dy.bounds.push_back({std::move(value), limit});
  };
  place(affine(7, {{5, 1}, {3, -s.dilH}}, s.padH), s.strideH, s.oh, s.ow);
  place(affine(7, {{6, 1}, {4, -s.dilW}}, s.padW), s.strideW, s.ow, 1);
  finish(f);
  return f;
}

}  // namespace

GemmForm gemmForm(const Kernel& k) {
  KILN_CHECK(k.hasContraction, "kernel '{}' has no contraction", k.name);
  GemmForm f;
  switch (k.contraction.op) {
    case OpKind::MatMul: f = matmulForm(k); break;
    case OpKind::Conv2d: f = conv2dForm(k); break;
    case OpKind::Conv2dGradWeight: f = conv2dGradWeightForm(k); break;
    case OpKind::Conv2dGradInput: f = conv2dGradInputForm(k); break;
    default: KILN_THROW("kernel '{}': '{}' is not a contraction", k.name, ir::opInfo(k.contraction.op).name);
  }
  f.epilogueFlops = std::max(0.0, k.flops - productFlops(f));
  return f;
}

double productFlops(const GemmForm& f) {
  return 2.0 * static_cast<double>(f.batch) * static_cast<double>(f.m) * static_cast<double>(f.n) *
         static_cast<double>(f.k);
}

std::optional<int64_t> gemmElementIndex(const GemmOperand& op, std::span<const int64_t> coords) {
  for (const IndexMap::Bound& b : op.map.bounds) {
    const int64_t v = evaluate(b.value, coords);
    if (v < 0 || v >= b.limit) return std::nullopt;
  }
  int64_t index = evaluate(op.map.index, coords);
  for (const GemmOperand::Quotient& q : op.quotients) {
    const int64_t v = evaluate(q.value, coords);
    if (v % q.divisor != 0 || v < 0 || v / q.divisor >= q.limit) return std::nullopt;
    index += q.coeff * (v / q.divisor);
  }
  return index;
}

std::optional<Strides> stridesOf(const GemmForm& f, bool a) {
  const GemmOperand& op = a ? f.a : f.b;
  if (!op.map.bounds.empty() || !op.quotients.empty()) return std::nullopt;
  const std::vector<int64_t>& rowDims = a ? f.mDims : f.nDims;
  const size_t rowAt = f.batchDims.size() + (a ? 0 : f.kDims.size());
  const size_t kAt = f.batchDims.size() + (a ? f.mDims.size() : 0);
  std::optional<int64_t> row = groupStride(op.map.index, rowAt, rowDims);
  std::optional<int64_t> k = groupStride(op.map.index, kAt, f.kDims);
  if (!row || !k) return std::nullopt;
  Strides s{*row, *k};
  if ((a ? f.m : f.n) <= 1 && s.k != 1) s.row = 1;
  if (f.k <= 1 && s.row != 1) s.k = 1;
  if (s.row != 1 && s.k != 1) return std::nullopt;
  return s;
}

std::optional<int64_t> groupStride(const Affine& a, size_t at, const std::vector<int64_t>& dims) {
  if (dims.empty()) return 0;
  const int64_t s = a.coeff[at + dims.size() - 1];
  int64_t stride = s;
  for (size_t d = dims.size() - 1; d-- > 0;) {
    stride *= dims[d + 1];
    if (dims[d] != 1 && a.coeff[at + d] != stride) return std::nullopt;  // size 1: any coefficient
  }
  return s;
}

}  // namespace kiln::kernels
