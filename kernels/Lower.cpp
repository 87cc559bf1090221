// Lowering a schedule step (a fusion group or one node) to a Kernel description. The central
// tool is the strided view: a tensor reached through movement ops (reshape, permute, broadcast,
// slice, pad) from a base (a buffer, or a value computed in the kernel) is described by affine
// functionals of its own coordinates — the base's flat index and the padding bounds — which the
// movement ops transform exactly as strides transform in PyTorch's views. Placing the tensor in
// the kernel's domain (with NumPy broadcasting) gives an IndexMap over the domain. A value
// computed inside the kernel can be used directly only where it is read at the point it was
// computed (its IndexMap equals its natural one); that rule, not a list of patterns, decides
// which groups are expressible.
#include "kernels/Kernel.h"

#include "ir/Lexer.h"
#include "ir/Schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>

namespace kiln::kernels {

IndexMap rowMajorMap(const ir::Shape& shape) {
  IndexMap m;
  m.index = Affine{0, ir::rowMajorStrides(shape)};
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1) m.index.coeff[d] = 0;  // a size-1 dimension's coordinate is always 0
  return m;
}

namespace {

using ir::Node;
using ir::OpKind;
using ir::Shape;
using ir::Value;

bool isReduction(OpKind op) { return op == OpKind::ReduceSum || op == OpKind::ReduceMax || op == OpKind::ReduceMin; }

bool isContraction(OpKind op) {
  return op == OpKind::MatMul || op == OpKind::Conv2d || op == OpKind::Conv2dGradInput ||
         op == OpKind::Conv2dGradWeight;
}

bool isSplat(const Node& n) { return n.op == OpKind::Constant && n.attrFloats("value").size() == 1; }

/// Leaves whose value at any index is computable: splat constants, iota, random without a step.
bool isVirtualLeaf(const Node& n) {
  return isSplat(n) || n.op == OpKind::Iota || (n.op == OpKind::Random && n.operands.empty());
}

bool isElementwise(const Node& n) {
  return (n.info().flags & ir::kElementwise) && !(n.info().flags & ir::kComposite) && !isViewOp(n.op);
}

ir::KernelKind defaultKind(const Node& n) {
  if (isContraction(n.op)) return ir::KernelKind::Contraction;
  if (isReduction(n.op)) return ir::KernelKind::Reduction;
  if (isElementwise(n) || isViewOp(n.op) || isVirtualLeaf(n) || n.op == OpKind::Constant) return ir::KernelKind::Loop;
  return ir::KernelKind::Op;
}

/// A tensor as affine functionals of its own coordinates: functional 0 is the flat index into the
/// base, the others are padding bounds (valid where 0 <= value < limit).
struct View {
  Shape shape;
  std::vector<Affine> fns;  // coeff per dimension of `shape`
  std::vector<int64_t> limits;  // for fns[1..]
  double padValue = 0;
  bool padded = false;
};

View baseView(const Shape& shape) {
  View v;
  v.shape = shape;
  v.fns.push_back({0, ir::rowMajorStrides(shape)});
  return v;
}

// Reshape: consecutive groups of dimensions with equal products map onto each other. Splitting a
// dimension always works; merging dimensions needs each functional to be contiguous over them.
std::string reshapeView(View& v, const Shape& to) {
  const Shape& from = v.shape;
  std::vector<std::vector<int64_t>> out(v.fns.size(), std::vector<int64_t>(to.size(), 0));
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    // Size-1 dimensions carry no coordinate.
    if (i < from.size() && from[i] == 1) {
      ++i;
      continue;
    }
    if (j < to.size() && to[j] == 1) {
      ++j;
      continue;
    }
    if (i >= from.size() || j >= to.size()) return "reshape: element counts differ";
    size_t i0 = i, j0 = j;
    int64_t pi = from[i++], pj = to[j++];
    while (pi != pj) {
      if (pi < pj) {
        if (i >= from.size()) return "reshape: element counts differ";
        pi *= from[i++];
      } else {
        if (j >= to.size()) return "reshape: element counts differ";
        pj *= to[j++];
      }
    }
    for (size_t f = 0; f < v.fns.size(); ++f) {
      const std::vector<int64_t>& c = v.fns[f].coeff;
      // Contiguity over from[i0, i): c[k] == c[k+1] * from[k+1] (ignoring size-1 dimensions).
      int64_t inner = -1, innerSize = 1;
      for (size_t k = i; k-- > i0;) {
        if (from[k] == 1) continue;
        if (inner >= 0 && c[k] != inner * innerSize)
          return fmt::format("reshape merges dimensions that are not contiguous in memory (a permuted or sliced view)");
        inner = c[k];
        innerSize = from[k];
      }
      int64_t unit = 0;
      for (size_t k = i; k-- > i0;)
        if (from[k] != 1) {
          unit = c[k];
          break;
        }
      int64_t scale = 1;
      for (size_t k = j; k-- > j0;) {
        if (to[k] == 1) continue;
        out[f][k] = unit * scale;
        scale *= to[k];
      }
    }
  }
  for (size_t f = 0; f < v.fns.size(); ++f) v.fns[f].coeff = std::move(out[f]);
  v.shape = to;
  return {};
}

std::string applyView(View& v, const Node& n) {
  const Shape& to = n.result->type.shape;
  switch (n.op) {
    case OpKind::StopGradient: return {};
    case OpKind::Reshape: return reshapeView(v, to);
    case OpKind::Permute: {
      const ir::Ints& perm = n.attrInts("perm");
      for (Affine& f : v.fns) {
        std::vector<int64_t> c(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) c[i] = f.coeff[perm[i]];
        f.coeff = std::move(c);
      }
      break;
    }
    case OpKind::Broadcast: {
      size_t lead = to.size() - v.shape.size();
      for (Affine& f : v.fns) {
        std::vector<int64_t> c(to.size(), 0);
        for (size_t k = 0; k < v.shape.size(); ++k)
          if (v.shape[k] == to[k + lead]) c[k + lead] = f.coeff[k];
        f.coeff = std::move(c);
      }
      break;
    }
    case OpKind::Slice: {
      const ir::Ints& starts = n.attrInts("starts");
      const ir::Ints& steps = n.attrInts("steps");
      for (Affine& f : v.fns)
        for (size_t d = 0; d < f.coeff.size(); ++d) {
          f.constant += starts[d] * f.coeff[d];
          f.coeff[d] *= steps[d];
        }
      break;
    }
    case OpKind::Pad: {
      const ir::Ints& low = n.attrInts("low");
      double value = n.attrFloat("value");
      if (v.padded && v.padValue != value && !(v.padValue != v.padValue && value != value))
        return "pad of a padded view with a different value";
      Shape before = v.shape;
      for (Affine& f : v.fns)
        for (size_t d = 0; d < f.coeff.size(); ++d) f.constant -= low[d] * f.coeff[d];
      for (size_t d = 0; d < before.size(); ++d) {
        if (low[d] == 0 && n.attrInts("high")[d] == 0) continue;
        Affine b{-low[d], std::vector<int64_t>(before.size(), 0)};
        b.coeff[d] = 1;
        v.fns.push_back(std::move(b));
        v.limits.push_back(before[d]);
      }
      v.padded = true;
      v.padValue = value;
      break;
    }
    default: return fmt::format("'{}' is not a view", n.info().name);
  }
  v.shape = to;
  return {};
}

/// Where the values of one shape sit in a nest's domain: domain dimension of each dimension
/// (-1: a size-1 dimension, always coordinate 0).
struct Placement {
  std::vector<int> dims;
};

/// The IndexMap over `domainRank` dimensions of view `v` read by a consumer whose result has
/// placement `at` and shape `consumerShape` (NumPy broadcasting from the right).
IndexMap place(const View& v, const Shape& consumerShape, const Placement& at, size_t domainRank) {
  size_t lead = consumerShape.size() - v.shape.size();
  auto convert = [&](const Affine& f) {
    Affine a{f.constant, std::vector<int64_t>(domainRank, 0)};
    for (size_t k = 0; k < v.shape.size(); ++k) {
      int d = at.dims[k + lead];
      if (d >= 0 && v.shape[k] != 1) a.coeff[d] += f.coeff[k];
    }
    return a;
  };
  IndexMap m;
  m.index = convert(v.fns[0]);
  for (size_t i = 1; i < v.fns.size(); ++i) m.bounds.push_back({convert(v.fns[i]), v.limits[i - 1]});
  m.padValue = v.padded ? v.padValue : 0;
  return m;
}

/// The view of `v` from its base: up through the producers that are view ops while `through`
/// holds for the value they compute, applied from the base down. Sets `base`; returns why the
/// chain is not expressible as strides, or nothing.
std::string viewFromBase(const Value* v, const std::function<bool(const Value*)>& through, const Value*& base,
                         View& view, size_t* ops = nullptr) {
  std::vector<const Node*> chain;
  base = v;
  while (base->kind == ir::ValueKind::Result && isViewOp(base->producer->op) && through(base)) {
    chain.push_back(base->producer);
    base = base->producer->operands[0];
  }
  if (ops) *ops = chain.size();
  view = baseView(base->type.shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    std::string why = applyView(view, **it);
    if (!why.empty()) return why;
  }
  return {};
}

class Lowering {
 public:
  Lowering(const ir::Graph& g, const std::vector<const Node*>& nodes,
           const std::unordered_set<const Value*>& materialized, Kernel& k)
      : nodes_(nodes), materialized_(materialized), k_(k) {
    for (const Node* n : nodes) inGroup_.insert(n);
    for (const ir::Output& o : g.outputs()) graphResults_.insert(o.value);
    for (const ir::Update& u : g.updates()) graphResults_.insert(u.value);
  }

  std::string run(ir::KernelKind kind) {
    k_.kind = kind;
    k_.nodes = nodes_;
    if (kind == ir::KernelKind::Op) return lowerOp();
    if (kind == ir::KernelKind::Multi) return lowerMulti();
    std::string why = lowerNest(nodes_, kind);
    if (!why.empty()) return why;
    finish();
    return {};
  }

 private:
  int32_t buffer(const Value* v, Buffer::Role role) {
    auto it = bufferOf_.find(v);
    if (it != bufferOf_.end()) return it->second;
    k_.buffers.push_back({v, v->name, v->type, role});
    int32_t b = static_cast<int32_t>(k_.buffers.size() - 1);
    bufferOf_.emplace(v, b);
    return b;
  }

  int32_t inputBuffer(const Value* v) {
    Buffer::Role role = v->kind == ir::ValueKind::Input   ? Buffer::Role::Input
                        : v->kind == ir::ValueKind::Param ? Buffer::Role::Param
                        : v->producer->op == OpKind::Constant ? Buffer::Role::Constant
                                                              : Buffer::Role::Temp;
    return buffer(v, role);
  }

  bool internal(const Value* v) const { return v->kind == ir::ValueKind::Result && inGroup_.count(v->producer); }

  std::string lowerOp() {
    if (nodes_.size() != 1) return "an op kernel holds exactly one node";
    const Node* n = nodes_[0];
    k_.op = n;
    for (const Value* v : n->operands) k_.inputs.push_back(inputBuffer(v));
    k_.outputs.push_back(buffer(n->result, Buffer::Role::Temp));
    finish();
    return {};
  }

  // Independent loops (the optimizer's per-parameter updates): split into connected components.
  std::string lowerMulti() {
    std::vector<int> comp(nodes_.size());
    std::iota(comp.begin(), comp.end(), 0);
    std::function<int(int)> find = [&](int x) { return comp[x] == x ? x : comp[x] = find(comp[x]); };
    std::unordered_map<const Node*, int> index;
    for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i]] = static_cast<int>(i);
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (const Value* v : nodes_[i]->operands)
        if (internal(v)) comp[find(static_cast<int>(i))] = find(index.at(v->producer));
    std::map<int, std::vector<const Node*>> parts;
    for (size_t i = 0; i < nodes_.size(); ++i) parts[find(static_cast<int>(i))].push_back(nodes_[i]);
    for (auto& [root, part] : parts) {
      std::string why = lowerNest(part, ir::KernelKind::Loop);
      if (!why.empty()) return why;
    }
    finish();
    return {};
  }

  // ---- one loop nest ---------------------------------------------------------------------------

  std::string lowerNest(const std::vector<const Node*>& nodes, ir::KernelKind kind) {
    nest_ = LoopNest{};
    exprOf_.clear();
    leafExprs_.clear();
    loadIndex_.clear();
    level_.clear();
    // The nodes computed at a point (views are folded into index maps unless materialized).
    std::vector<const Node*> evaluated;
    for (const Node* n : nodes) {
      if (n->info().flags & ir::kComposite) return fmt::format("'{}' is a composite op: decompose first", n->info().name);
      if (n->op == OpKind::Constant) continue;  // a leaf or constant data
      bool view = isViewOp(n->op) || isVirtualLeaf(*n);
      if (!view || materialized_.count(n->result)) evaluated.push_back(n);
    }
    if (evaluated.empty()) return "the group computes nothing";
    // The domain.
    const Node* contraction = nullptr;
    std::vector<const Node*> reductions;
    for (const Node* n : evaluated) {
      if (isContraction(n->op)) {
        if (contraction) return "two contractions in one kernel";
        contraction = n;
      } else if (isReduction(n->op)) {
        reductions.push_back(n);
      } else if (!isElementwise(*n) && !isViewOp(n->op) && !isVirtualLeaf(*n) && n->op != OpKind::Constant) {
        return fmt::format("'{}' needs a dedicated kernel", n->info().name);
      }
    }
    if (contraction && !reductions.empty()) return "a contraction and a reduction in one kernel";
    if (contraction && kind != ir::KernelKind::Contraction) return "a contraction outside a contraction kernel";
    if (!reductions.empty() && kind != ir::KernelKind::Reduction) return "a reduction outside a reduction kernel";
    if (contraction) {
      if (contraction != evaluated.front()) return "the contraction must come first in its kernel";
      nest_.domain = contraction->result->type.shape;
    } else if (!reductions.empty()) {
      nest_.domain = reductions[0]->operands[0]->type.shape;
    } else {
      nest_.domain = evaluated.back()->result->type.shape;
    }
    const Shape& domain = nest_.domain;
    nest_.reduced.assign(domain.size(), false);
    std::vector<int64_t> axes;
    if (!reductions.empty()) {
      axes = reductions[0]->attrInts("axes");
      if (axes.empty()) {
        axes.resize(domain.size());
        std::iota(axes.begin(), axes.end(), 0);
      }
      for (int64_t a : axes) nest_.reduced[a] = true;
      for (const Node* r : reductions) {
        std::vector<int64_t> ax = r->attrInts("axes");
        if (ax.empty()) {
          ax.resize(domain.size());
          std::iota(ax.begin(), ax.end(), 0);
        }
        if (r->operands[0]->type.shape != domain || ax != axes)
          return fmt::format("reductions over different domains or axes ({} over {} vs {} over {})",
                             r->operands[0]->type.str(), fmt::join(ax, ","), ir::TensorType{DType::f32, domain}.str(),
                             fmt::join(axes, ","));
      }
    }
    // Shapes of the outer level: keepdim (reduced dimensions 1) and squeezed.
    Shape keep = domain, squeezed;
    for (size_t d = 0; d < domain.size(); ++d) {
      if (nest_.reduced[d])
        keep[d] = 1;
      else
        squeezed.push_back(domain[d]);
    }
    auto levelOf = [&](const Shape& s, bool& outer, Placement& at) -> bool {
      at.dims.clear();
      if (s == domain) {
        outer = false;
        for (size_t d = 0; d < s.size(); ++d) at.dims.push_back(s[d] == 1 ? -1 : static_cast<int>(d));
        return true;
      }
      if (reductions.empty()) return false;
      outer = true;
      if (s == keep) {
        for (size_t d = 0; d < s.size(); ++d) at.dims.push_back(s[d] == 1 ? -1 : static_cast<int>(d));
        return true;
      }
      if (s == squeezed) {
        for (size_t d = 0; d < domain.size(); ++d)
          if (!nest_.reduced[d]) at.dims.push_back(domain[d] == 1 ? -1 : static_cast<int>(d));
        return true;
      }
      return false;
    };
    for (const Node* n : evaluated) {
      Level l;
      if (isReduction(n->op)) {
        bool o;
        if (!levelOf(n->result->type.shape, o, l.at)) return "a reduction result of an unexpected shape";
        l.outer = true;
      } else if (!levelOf(n->result->type.shape, l.outer, l.at)) {
        return fmt::format("'{}' computes {} while the kernel iterates over {}", n->info().name,
                           n->result->type.str(), ir::TensorType{n->result->type.dtype, domain}.str());
      }
      level_[n] = l;
    }
    // Expressions, in node order.
    for (const Node* n : evaluated) {
      const Level& l = level_.at(n);
      int32_t e = -1;
      if (n == contraction) {
        Contraction c{n->op, n->attrs, -1, -1, n->result->type, {}, {}, {}, {}};
        std::string why = contractionOperand(*n, 0, c.a, c.shapeA, c.mapA);
        if (why.empty()) why = contractionOperand(*n, 1, c.b, c.shapeB, c.mapB);
        if (!why.empty()) return why;
        k_.hasContraction = true;
        k_.contraction = std::move(c);
        e = addExpr({Expr::Kind::Acc, n->result->type.dtype});
      } else if (isReduction(n->op)) {
        Placement full;
        bool o;
        levelOf(domain, o, full);
        int32_t body = -1;
        std::string why = operandExpr(n->operands[0], domain, full, false, body);
        if (!why.empty()) return why;
        nest_.reductions.push_back({n->op, body, n->result->type.dtype});
        Expr r{Expr::Kind::Reduced, n->result->type.dtype};
        r.reduction = static_cast<int32_t>(nest_.reductions.size() - 1);
        e = addExpr(std::move(r));
      } else if (isElementwise(*n)) {
        Expr x{Expr::Kind::Op, n->result->type.dtype};
        x.op = n->op;
        x.attrs = n->attrs;
        for (const Value* v : n->operands) {
          int32_t a = -1;
          std::string why = operandExpr(v, n->result->type.shape, l.at, l.outer, a);
          if (!why.empty()) return why;
          x.args.push_back(a);
        }
        e = addExpr(std::move(x));
      } else {
        // A materialized view or leaf: its value at its own natural position.
        std::string why = operandExpr(n->result, n->result->type.shape, l.at, l.outer, e);
        if (!why.empty()) return why;
      }
      exprOf_[n->result] = e;
      if (materialized_.count(n->result)) {
        Store s{buffer(n->result, Buffer::Role::Temp), e, naturalMap(n->result->type.shape, l.at), l.outer};
        nest_.stores.push_back(std::move(s));
        k_.outputs.push_back(s.buffer);
      }
    }
    if (nest_.stores.empty()) return "the kernel stores nothing";
    k_.nests.push_back(std::move(nest_));
    return {};
  }

  struct Level {
    bool outer = false;
    Placement at;
  };

  /// Operand `i` of contraction `n`: its buffer, shape and index map (Contraction). A matmul
  /// operand may be a chain of views in the kernel (reshape, permute, slice, broadcast) of a value
  /// in memory; every other operand is read from memory as it is.
  std::string contractionOperand(const Node& n, size_t i, int32_t& buf, Shape& shape, IndexMap& map) {
    const Value* base = nullptr;
    View view;
    size_t views = 0;
    std::string why = viewFromBase(n.operands[i], [&](const Value* x) { return internal(x); }, base, view, &views);
    if (internal(base) && base->producer->op != OpKind::Constant)
      return "a contraction operand computed in the same kernel";
    if (views > 0 && n.op != OpKind::MatMul)
      return fmt::format("a view as operand of '{}' (only matmul reads its operands through views)", n.info().name);
    if (!why.empty()) return why;
    if (view.padded) return "a padded view as a contraction operand";
    Placement own;
    for (size_t d = 0; d < view.shape.size(); ++d) own.dims.push_back(view.shape[d] == 1 ? -1 : static_cast<int>(d));
    buf = inputBuffer(base);
    shape = view.shape;
    map = place(view, view.shape, own, view.shape.size());
    return {};
  }

  int32_t addExpr(Expr e) {
    nest_.exprs.push_back(std::move(e));
    return static_cast<int32_t>(nest_.exprs.size() - 1);
  }

  IndexMap naturalMap(const Shape& s, const Placement& at) const {
    return place(baseView(s), s, at, nest_.domain.size());
  }

  /// The expression for `v` as read by a consumer with result shape `consumerShape` at `at`.
  std::string operandExpr(const Value* v, const Shape& consumerShape, const Placement& at, bool outer, int32_t& out) {
    // Up through in-group views to the base.
    const Value* base = nullptr;
    View view;
    std::string why = viewFromBase(v, [&](const Value* x) { return internal(x); }, base, view);
    if (!why.empty()) return why;
    IndexMap map = place(view, consumerShape, at, nest_.domain.size());
    if (internal(base) && isVirtualLeaf(*base->producer)) return leafExpr(*base->producer, map, out);
    if (internal(base) && base->producer->op == OpKind::Constant) {
      out = loadExpr(buffer(base, Buffer::Role::Constant), map, base->type.dtype);
      return {};
    }
    if (internal(base)) {
      auto it = exprOf_.find(base);
      if (it == exprOf_.end()) return fmt::format("%{} is used before it is computed", base->name);
      const Level& l = level_.at(base->producer);
      if (!(map == naturalMap(base->type.shape, l.at)) || (!l.outer && outer))
        return fmt::format("'{}' result is read at other points than it is computed (a broadcast, permute or "
                           "shift of a value computed in the same kernel)",
                           base->producer->info().name);
      out = it->second;
      return {};
    }
    out = loadExpr(inputBuffer(base), map, base->type.dtype);
    return {};
  }

  int32_t loadExpr(int32_t buf, const IndexMap& map, DType dtype) {
    for (size_t i = 0; i < nest_.loads.size(); ++i)
      if (nest_.loads[i].buffer == buf && nest_.loads[i].map == map) return loadIndex_.at(i);
    nest_.loads.push_back({buf, map});
    Expr e{Expr::Kind::Load, dtype};
    e.load = static_cast<int32_t>(nest_.loads.size() - 1);
    int32_t x = addExpr(std::move(e));
    loadIndex_[nest_.loads.size() - 1] = x;
    return x;
  }

  std::string leafExpr(const Node& n, const IndexMap& map, int32_t& out) {
    if (!map.bounds.empty()) return fmt::format("padding of a '{}' is not expressible", n.info().name);
    Expr e{Expr::Kind::Constant, n.result->type.dtype};
    if (n.op == OpKind::Constant) {
      e.value = n.attrFloats("value")[0];
    } else if (n.op == OpKind::Iota) {
      e.kind = Expr::Kind::Coord;
      e.index = map.index;
      int64_t axis = n.attrInt("axis");
      e.divisor = ir::rowMajorStrides(n.result->type.shape)[axis];
      e.modulus = n.result->type.shape[axis];
    } else {
      e.kind = Expr::Kind::Random;
      e.index = map.index;
      e.seed = static_cast<uint64_t>(n.attrInt("seed"));
      e.offset = static_cast<uint64_t>(n.attrInt("offset"));
      e.normal = n.attrStr("dist") == "normal";
    }
    for (size_t i = 0; i < leafExprs_.size(); ++i) {
      const Expr& o = nest_.exprs[leafExprs_[i]];
      if (o.kind == e.kind && o.dtype == e.dtype &&
          std::bit_cast<uint64_t>(o.value) == std::bit_cast<uint64_t>(e.value) && o.index == e.index &&
          o.divisor == e.divisor && o.modulus == e.modulus && o.seed == e.seed && o.offset == e.offset &&
          o.normal == e.normal) {
        out = leafExprs_[i];
        return {};
      }
    }
    out = addExpr(std::move(e));
    leafExprs_.push_back(out);
    return {};
  }

  // Inputs, traffic and work.
  void finish() {
    std::unordered_set<int32_t> written(k_.outputs.begin(), k_.outputs.end());
    for (const LoopNest& nest : k_.nests)
      for (const Load& l : nest.loads)
        if (std::find(k_.inputs.begin(), k_.inputs.end(), l.buffer) == k_.inputs.end()) k_.inputs.push_back(l.buffer);
    if (k_.hasContraction)
      for (int32_t b : {k_.contraction.a, k_.contraction.b})
        if (std::find(k_.inputs.begin(), k_.inputs.end(), b) == k_.inputs.end()) k_.inputs.push_back(b);
    std::sort(k_.outputs.begin(), k_.outputs.end());
    k_.outputs.erase(std::unique(k_.outputs.begin(), k_.outputs.end()), k_.outputs.end());
    for (int32_t b : k_.inputs) k_.bytesRead += k_.buffers[b].type.bytes();
    for (int32_t b : k_.outputs) k_.bytesWritten += k_.buffers[b].type.bytes();
    for (Buffer& b : k_.buffers)
      if (b.value->kind == ir::ValueKind::Result && b.role == Buffer::Role::Temp && graphResults_.count(b.value))
        b.role = Buffer::Role::Output;
    k_.flops = flops();
    std::vector<std::string> ops;
    for (const Node* n : nodes_)
      if (!isViewOp(n->op) && n->op != OpKind::Constant && ops.size() < 4) ops.push_back(std::string(n->info().name));
    if (ops.empty()) ops.push_back(std::string(nodes_.front()->info().name));
    k_.name = fmt::format("{}", fmt::join(ops, "_"));
  }

  double flops() const {
    double f = 0;
    for (const LoopNest& nest : k_.nests) {
      double points = 1;
      for (int64_t n : nest.domain) points *= static_cast<double>(n);
      for (const Expr& e : nest.exprs)
        if (e.kind == Expr::Kind::Op && e.op != OpKind::Cast) f += points;
      f += points * nest.reductions.size();
    }
    if (k_.hasContraction) f += contractionFlops(k_);
    return f;
  }

  static double contractionFlops(const Kernel& k) {
    const Contraction& c = k.contraction;
    const ir::TensorType a{k.buffers[c.a].type.dtype, c.shapeA}, b{k.buffers[c.b].type.dtype, c.shapeB};
    double out = static_cast<double>(c.result.numel());
    switch (c.op) {
      case OpKind::MatMul: {
        bool ta = std::get<bool>(c.attrs.at(0));
        int64_t kdim = ta ? a.shape[a.shape.size() - 2] : a.shape.back();
        return 2 * out * kdim;
      }
      case OpKind::Conv2d:  // per output: C/groups * KH * KW multiply-adds
        return 2 * out * b.shape[1] * b.shape[2] * b.shape[3];
      case OpKind::Conv2dGradInput:  // the same work as the forward conv: dy[N,O,OH,OW] x w
        return 2 * static_cast<double>(a.numel()) * b.shape[1] * b.shape[2] * b.shape[3];
      case OpKind::Conv2dGradWeight:  // dw[O,C/g,KH,KW] summed over N*OH*OW
        return 2 * out * b.shape[0] * b.shape[2] * b.shape[3];
      default: return 0;
    }
  }

  const std::vector<const Node*>& nodes_;
  const std::unordered_set<const Value*>& materialized_;
  Kernel& k_;
  std::unordered_set<const Node*> inGroup_;
  std::unordered_set<const Value*> graphResults_;  // graph outputs and update values
  std::unordered_map<const Value*, int32_t> bufferOf_;
  LoopNest nest_;
  std::unordered_map<const Value*, int32_t> exprOf_;
  std::unordered_map<const Node*, Level> level_;
  std::vector<int32_t> leafExprs_;
  std::unordered_map<size_t, int32_t> loadIndex_;
};

}  // namespace

bool isStridedView(const ir::Value& v) {
  const Value* base = nullptr;
  View view;
  size_t views = 0;
  if (!viewFromBase(&v, [](const Value*) { return true; }, base, view, &views).empty() || views == 0) return false;
  return !view.padded && !(base->kind == ir::ValueKind::Result && isVirtualLeaf(*base->producer));
}

bool isViewOp(OpKind op) {
  switch (op) {
    case OpKind::Reshape:
    case OpKind::Permute:
    case OpKind::Broadcast:
    case OpKind::Slice:
    case OpKind::Pad:
    case OpKind::StopGradient: return true;
    default: return false;
  }
}

std::string tryLower(const ir::Graph& g, const std::vector<const Node*>& nodes, ir::KernelKind kind,
                     const std::unordered_set<const Value*>& materialized, Kernel& out) {
  out = Kernel{};
  return Lowering(g, nodes, materialized, out).run(kind);
}

std::vector<Kernel> lowerGraph(const ir::Graph& g) {
  std::unordered_set<const Value*> materialized = ir::materializedResults(g);
  ir::text::ValueNames names(g);  // the printer's names, so listings match the IR dumps
  std::vector<Kernel> kernels;
  for (const std::vector<const Node*>& step : ir::kernelSteps(g)) {
    ir::KernelKind kind = step[0]->group >= 0 ? g.groups()[step[0]->group].kind : defaultKind(*step[0]);
    // An unused ungrouped node (dead code) computes nothing anyone reads; constants are data
    // (Buffer::Role::Constant), not kernels.
    if (step[0]->group < 0 && (!materialized.count(step[0]->result) || step[0]->op == OpKind::Constant)) continue;
    Kernel k;
    std::string why = tryLower(g, step, kind, materialized, k);
    KILN_CHECK(why.empty(), "{}cannot lower kernel of '{}' (%{}): {}",
               step[0]->loc.known() ? step[0]->loc.str() + ": " : "", step[0]->info().name,
               step[0]->result->name.empty() ? "?" : step[0]->result->name, why);
    k.name = fmt::format("k{}_{}", kernels.size(), k.name);
    for (Buffer& b : k.buffers) b.name = names.of(b.value);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

}  // namespace kiln::kernels
