// Constant folding: a node whose operands are all `constant` nodes is evaluated here and replaced
// by one constant. The evaluator follows the reference interpreter exactly (interp/Eval*.cpp):
// floats compute in double and round once to the result dtype, integers compute in int64 and wrap
// to their width, casts truncate and saturate. The scalar functions are the interpreter's own rows
// (ir/ScalarOps.h); CanonicalizeTest's random graphs check that both agree bit for bit.
//
// Folded: elementwise ops (unary, binary, select, cast, stop_gradient) and reshape, broadcast,
// permute and slice. A splat stays a splat whatever its size; any other result is folded only up
// to kMaxFoldedElements elements. An integer result that a constant's f64 `value` attribute cannot
// hold exactly (beyond 2^53) is left unfolded.
#include "passes/canonicalize/Rewriter.h"

#include "ir/ScalarOps.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

namespace {


/// The int64 an integer or bool element holds after storing `v` (truncated toward zero,
/// saturated, NaN → 0; bool: v != 0): support/DType.h's storeFromDouble.
int64_t storedInt(DType t, double v) {
  switch (t) {
    case DType::i32: { int32_t x; storeFromDouble(t, &x, v); return x; }
    case DType::i64: { int64_t x; storeFromDouble(t, &x, v); return x; }
    default: return v != 0 ? 1 : 0;
  }
}

/// An int64 result stored into an integer or bool element: i32 wraps modulo 2^32, bool is v != 0.
int64_t wrapTo(DType t, int64_t v) {
  if (t == DType::i32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  if (t == DType::boolean) return v != 0 ? 1 : 0;
  return v;
}

// Integer → float converts from the exact int64 and rounds once (the interpreter's intToFloat).
double intToFloat(int64_t v, DType to) {
  if (to == DType::f64) return static_cast<double>(v);
  if (to == DType::f32) return static_cast<double>(static_cast<float>(v));
  return roundTo(to, static_cast<double>(roundToOddF32(v)));
}

int64_t narrowInt(int64_t v, DType to) {
  if (to != DType::i32) return v;
  return std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
}

/// A literal of `type` with room for `n` elements.
Literal emptyLiteral(const ir::TensorType& type, int64_t n) {
  Literal r{type, {}, {}};
  if (r.isFloat()) r.floats.resize(static_cast<size_t>(n));
  else r.ints.resize(static_cast<size_t>(n));
  return r;
}

/// Index into a tensor shaped `in` of element `i` of its NumPy broadcast to `out`.
int64_t broadcastIndex(const ir::Shape& in, const ir::Shape& out, int64_t i) {
  int64_t index = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    int64_t coord = out[d] == 0 ? 0 : i % out[d];
    i = out[d] == 0 ? 0 : i / out[d];
    size_t lead = out.size() - in.size();
    if (d < lead) continue;
    if (in[d - lead] != 1) index += coord * stride;
    stride *= in[d - lead];
  }
  return index;
}

/// Maps each output element of a movement op to the input element it copies.
using IndexMap = int64_t (*)(const Candidate& c, const ir::Shape& in, int64_t i);

int64_t permuteIndex(const Candidate& c, const ir::Shape& in, int64_t i) {
  const ir::Ints& perm = c.attrInts("perm");
  std::vector<int64_t> strides = ir::rowMajorStrides(in);
  int64_t index = 0;
  for (size_t d = c.type.shape.size(); d-- > 0;) {
    int64_t dim = c.type.shape[d];
    index += (dim == 0 ? 0 : i % dim) * strides[static_cast<size_t>(perm[d])];
    i = dim == 0 ? 0 : i / dim;
  }
  return index;
}

int64_t sliceIndex(const Candidate& c, const ir::Shape& in, int64_t i) {
  const ir::Ints &starts = c.attrInts("starts"), &steps = c.attrInts("steps");
  std::vector<int64_t> strides = ir::rowMajorStrides(in);
  int64_t index = 0;
  for (size_t d = c.type.shape.size(); d-- > 0;) {
    int64_t dim = c.type.shape[d];
    index += (starts[d] + (dim == 0 ? 0 : i % dim) * steps[d]) * strides[d];
    i = dim == 0 ? 0 : i / dim;
  }
  return index;
}

int64_t broadcastMap(const Candidate& c, const ir::Shape& in, int64_t i) { return broadcastIndex(in, c.type.shape, i); }

Literal moveElements(const Candidate& c, const Literal& x, int64_t n, IndexMap map) {
  Literal r = emptyLiteral(c.type, n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t from = x.splat() ? 0 : map(c, x.type.shape, i);
    if (r.isFloat()) r.floats[i] = x.f(from);
    else r.ints[i] = x.i(from);
  }
  return r;
}

Literal castLiteral(const Candidate& c, const Literal& x, int64_t n) {
  Literal r = emptyLiteral(c.type, n);
  DType to = c.type.dtype;
  for (int64_t i = 0; i < n; ++i) {
    if (x.isFloat()) {
      if (r.isFloat()) r.floats[i] = roundTo(to, x.f(i));
      else r.ints[i] = storedInt(to, x.f(i));
    } else if (r.isFloat()) {
      r.floats[i] = intToFloat(x.i(i), to);
    } else {
      r.ints[i] = wrapTo(to, narrowInt(x.i(i), to));
    }
  }
  return r;
}

/// Unary, binary and select with broadcasting; `n` is 1 when every operand is a splat.
std::optional<Literal> evalElementwise(const Candidate& c, std::span<const Literal> xs, int64_t n) {
  Literal r = emptyLiteral(c.type, n);
  auto at = [&](size_t k, int64_t i) { return xs[k].splat() ? 0 : broadcastIndex(xs[k].type.shape, c.type.shape, i); };
  if (c.op == OpKind::Select) {
    for (int64_t i = 0; i < n; ++i) {
      size_t k = xs[0].i(at(0, i)) != 0 ? 1 : 2;
      if (r.isFloat()) r.floats[i] = xs[k].f(at(k, i));
      else r.ints[i] = xs[k].i(at(k, i));
    }
    return r;
  }
  bool floatArith = xs[0].isFloat();
  if (const ir::ScalarUnary* row = ir::scalarUnary(c.op)) {
    if (floatArith ? row->onFloat == nullptr : row->onInt == nullptr) return std::nullopt;
    for (int64_t i = 0; i < n; ++i) {
      if (floatArith) r.floats[i] = roundTo(c.type.dtype, row->onFloat(xs[0].f(i)));
      else r.ints[i] = wrapTo(c.type.dtype, row->onInt(xs[0].i(i)));
    }
    return r;
  }
  const ir::ScalarBinary* row = ir::scalarBinary(c.op);
  if (row == nullptr || (floatArith ? row->onFloat == nullptr : row->onInt == nullptr)) return std::nullopt;
  for (int64_t i = 0; i < n; ++i) {
    if (floatArith) {
      double v = row->onFloat(xs[0].f(at(0, i)), xs[1].f(at(1, i)));
      if (r.isFloat()) r.floats[i] = roundTo(c.type.dtype, v);
      else r.ints[i] = v != 0 ? 1 : 0;  // comparisons
    } else {
      r.ints[i] = wrapTo(c.type.dtype, row->onInt(xs[0].i(at(0, i)), xs[1].i(at(1, i))));
    }
  }
  return r;
}

/// The `value` attribute of a constant holding `r`, or nothing when an integer does not fit a
/// double exactly.
std::optional<ir::Floats> attrValues(const Literal& r) {
  if (r.isFloat()) return r.floats;
  ir::Floats out;
  out.reserve(r.ints.size());
  for (int64_t v : r.ints) {
    auto d = static_cast<double>(v);
    if (storedInt(r.type.dtype, d) != v) return std::nullopt;
    out.push_back(d);
  }
  return out;
}

}  // namespace

std::optional<Literal> literalOf(const Value* v) {
  const ir::Node* n = producerOf(v);
  if (n == nullptr || n->op != OpKind::Constant) return std::nullopt;
  const ir::Floats& values = n->attrFloats("value");
  Literal r{v->type, {}, {}};
  for (double d : values) {
    if (r.isFloat()) r.floats.push_back(roundTo(v->type.dtype, d));
    else r.ints.push_back(storedInt(v->type.dtype, d));
  }
  return r;
}

bool isConstantEqualTo(const Value* v, double c) {
  std::optional<Literal> lit = literalOf(v);
  if (!lit) return false;
  if (lit->isFloat())
    return std::all_of(lit->floats.begin(), lit->floats.end(),
                       [&](double x) { return x == c && std::signbit(x) == std::signbit(c); });
  return std::all_of(lit->ints.begin(), lit->ints.end(), [&](int64_t x) { return static_cast<double>(x) == c; });
}

const ir::Node* producerOf(const Value* v) { return v->kind == ir::ValueKind::Result ? v->producer : nullptr; }

Value* foldConstants(Rewriter& rw, const Candidate& c) {
  const ir::OpInfo& info = ir::opInfo(c.op);
  bool elementwise = info.has(ir::kElementwise);
  bool movement = c.op == OpKind::Reshape || c.op == OpKind::Broadcast || c.op == OpKind::Permute ||
                  c.op == OpKind::Slice;
  if (c.operands.empty() || info.has(ir::kComposite) || !(elementwise || movement)) return nullptr;
  std::vector<Literal> xs;
  for (const Value* v : c.operands) {
    std::optional<Literal> lit = literalOf(v);
    if (!lit) return nullptr;
    xs.push_back(std::move(*lit));
  }
  // stop_gradient only matters to autodiff, and a constant has no gradient.
  if (c.op == OpKind::StopGradient) return c.operands[0];
  bool allSplat = std::all_of(xs.begin(), xs.end(), [](const Literal& x) { return x.splat(); });
  int64_t numel = c.type.numel();
  if (!allSplat && numel > kMaxFoldedElements) return nullptr;
  int64_t n = allSplat ? 1 : numel;
  std::optional<Literal> r;
  switch (c.op) {
    case OpKind::Cast: r = castLiteral(c, xs[0], n); break;
    case OpKind::Reshape:  // the same elements in the same order
      r = xs[0];
      r->type = c.type;
      break;
    case OpKind::Broadcast: r = moveElements(c, xs[0], n, broadcastMap); break;
    case OpKind::Permute: r = moveElements(c, xs[0], n, permuteIndex); break;
    case OpKind::Slice: r = moveElements(c, xs[0], n, sliceIndex); break;
    default: r = evalElementwise(c, xs, n); break;
  }
  if (!r) return nullptr;
  std::optional<ir::Floats> values = attrValues(*r);
  if (!values) return nullptr;
  return rw.constant(c.type, std::move(*values));
}

Value* splatConstant(Rewriter& rw, const Candidate& c) {
  const ir::Floats& values = std::get<ir::Floats>(c.attr("value"));
  if (values.size() <= 1) return nullptr;
  for (double d : values)
    if (std::bit_cast<uint64_t>(d) != std::bit_cast<uint64_t>(values[0])) return nullptr;
  return rw.constant(c.type, {values[0]});
}

}  // namespace kiln::passes::canon
