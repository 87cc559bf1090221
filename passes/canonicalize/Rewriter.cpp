// The rewriter: offers each node to the rules of its op (the table below is the one place that
// says which rule looks at which op), then merges it with an identical node already built (CSE).
#include "passes/canonicalize/Rewriter.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

namespace {

using Rule = Value* (*)(Rewriter&, const Candidate&);

struct RuleEntry {
  OpKind op;
  Rule rule;
};

// Tried in order after constant folding; the first rule that returns a value wins.
constexpr RuleEntry kRules[] = {
    {OpKind::Constant, splatConstant},
    {OpKind::Mul, simplifyArithmetic},
    {OpKind::Div, simplifyArithmetic},
    {OpKind::Add, simplifyArithmetic},
    {OpKind::Sub, simplifyArithmetic},
    {OpKind::Neg, simplifyArithmetic},
    {OpKind::Cast, simplifyCast},
    {OpKind::Reshape, simplifyReshape},
    {OpKind::Broadcast, simplifyBroadcast},
    {OpKind::Permute, simplifyPermute},
    {OpKind::Permute, foldPermuteOfMatMul},
    {OpKind::Slice, simplifySlice},
    {OpKind::SliceGrad, sliceGradAsPad},
    {OpKind::MatMul, foldTransposesIntoMatMul},
    {OpKind::Select, maskBeforeMaxPoolGrad},
};

size_t mix(size_t seed, size_t h) { return seed ^ (h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)); }

size_t hashAttr(const ir::AttrValue& a) {
  size_t h = a.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          h = mix(h, std::bit_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, ir::Floats>) {
          for (double d : x) h = mix(h, std::bit_cast<uint64_t>(d));
        } else if constexpr (std::is_same_v<T, ir::Ints>) {
          for (int64_t i : x) h = mix(h, std::hash<int64_t>()(i));
        } else if constexpr (std::is_same_v<T, DType>) {
          h = mix(h, static_cast<size_t>(x));
        } else {
          h = mix(h, std::hash<T>()(x));
        }
      },
      a);
  return h;
}

// Floats compare by their bits: constants 0.0 and -0.0 differ, and two NaN constants are the same.
bool sameAttr(const ir::AttrValue& a, const ir::AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* d = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b));
  if (const auto* f = std::get_if<ir::Floats>(&a)) {
    const ir::Floats& g = std::get<ir::Floats>(b);
    if (f->size() != g.size()) return false;
    for (size_t i = 0; i < f->size(); ++i)
      if (std::bit_cast<uint64_t>((*f)[i]) != std::bit_cast<uint64_t>(g[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace

const ir::AttrValue& Candidate::attr(std::string_view name) const {
  int i = ir::opInfo(op).attrIndex(name);
  KILN_ASSERT(i >= 0 && static_cast<size_t>(i) < attrs.size(), "op '{}' has no attribute '{}'", ir::opName(op), name);
  return attrs[static_cast<size_t>(i)];
}

size_t Rewriter::KeyHash::operator()(const Key& k) const {
  size_t h = static_cast<size_t>(k.op);
  for (const Value* v : k.operands) h = mix(h, std::hash<const Value*>()(v));
  for (const ir::AttrValue& a : k.attrs) h = mix(h, hashAttr(a));
  h = mix(h, static_cast<size_t>(k.type.dtype));
  for (int64_t d : k.type.shape) h = mix(h, std::hash<int64_t>()(d));
  return h;
}

bool Rewriter::KeyEqual::operator()(const Key& a, const Key& b) const {
  if (a.op != b.op || a.operands != b.operands || a.type != b.type || a.attrs.size() != b.attrs.size()) return false;
  for (size_t i = 0; i < a.attrs.size(); ++i)
    if (!sameAttr(a.attrs[i], b.attrs[i])) return false;
  return true;
}

Value* Rewriter::build(OpKind op, std::vector<Value*> operands, std::vector<ir::NamedAttr> attrs) {
  const ir::OpInfo& info = ir::opInfo(op);
  Candidate c{op, std::move(operands), ir::resolveAttrs(info, attrs, loc_), {}, {}};
  std::vector<ir::TensorType> types;
  for (const Value* v : c.operands) types.push_back(v->type);
  c.type = ir::inferType(info, types, c.attrs, loc_);
  return build(std::move(c));
}

Value* Rewriter::build(Candidate c) {
  if (Value* v = foldConstants(*this, c)) {
    ++rewrites_;
    return v;
  }
  for (const RuleEntry& e : kRules) {
    if (e.op != c.op) continue;
    if (Value* v = e.rule(*this, c)) {
      ++rewrites_;
      return v;
    }
  }
  Key key{c.op, c.operands, c.attrs, c.type};
  auto it = built_.find(key);
  if (it != built_.end()) {
    ++rewrites_;
    return it->second;
  }
  for (const Value* operand : c.operands) ++uses_[operand];
  Value* v = out_.addNodeRaw(c.op, std::move(c.operands), std::move(c.attrs), std::move(c.type), loc_);
  built_.emplace(std::move(key), v);
  return v;
}

Value* Rewriter::constant(const ir::TensorType& type, ir::Floats values) {
  bool same = !values.empty() && std::all_of(values.begin(), values.end(), [&](double d) {
    return std::bit_cast<uint64_t>(d) == std::bit_cast<uint64_t>(values[0]);
  });
  if (same) values.resize(1);
  Candidate c{OpKind::Constant, {}, {type.shape, type.dtype, std::move(values)}, type, {}};
  return build(std::move(c));
}

}  // namespace kiln::passes::canon
