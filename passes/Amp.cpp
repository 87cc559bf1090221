// The amp pass: rebuilds the graph, copying every node and replacing each f32 contraction by casts
// of its operands to the low type, the contraction in the low type, and a cast of its result back
// to f32 that takes over the original result's name.
//
// A select between values that are exact in the low type (widened contraction results, constants
// such as a ReLU gradient's 0) is made in the low type and widened after: the same values, and the
// cast that the next contraction needs of it disappears. Where f32 users remain (a bias gradient's
// sum beside the next product), they read the low-precision values and widen them as they go,
// instead of a second, f32 copy of the tensor (simplenet's bf16 step wrote 30 MB of its backward
// ReLU masks' results as f32 only for their column sums).
#include "passes/Amp.h"

#include "support/DType.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::passes {

using ir::OpKind;
using ir::Value;

namespace {

bool isF32Contraction(const ir::Node& n) {
  return n.info().has(ir::kContraction) && n.result->type.dtype == DType::f32 &&
         std::all_of(n.operands.begin(), n.operands.end(),
                     [](const Value* v) { return v->type.dtype == DType::f32; });
}

Value* addCast(ir::Graph& g, Value* v, DType to, const SourceLoc& loc, const std::string& name = {}) {
  const ir::NamedAttr attrs[] = {{"dtype", to}};
  return g.addNode(OpKind::Cast, {v}, attrs, loc, name);
}

/// Low-precision versions of f32 values of the graph being built, made at most once each.
class LowCasts {
 public:
  LowCasts(ir::Graph& g, DType low) : g_(g), low_(low) {}

  /// Records a copied node: a cast of an f32 value to the low type can serve later contractions.
  void noteCopied(const ir::Node& n) {
    if (n.op == OpKind::Cast && n.result->type.dtype == low_ && n.operands[0]->type.dtype == DType::f32)
      cache_.emplace(n.operands[0], n.result);
  }

  /// Whether `v` (f32) holds values of the low type only: a widened low value, or a constant
  /// whose every value the low type represents exactly.
  bool exact(const Value* v) const {
    const ir::Node* p = v->producer;
    if (p == nullptr) return false;
    if (p->op == OpKind::Cast) return p->operands[0]->type.dtype == low_;
    if (p->op != OpKind::Constant) return false;
    const ir::Floats& values = p->attrFloats("value");
    return std::all_of(values.begin(), values.end(), [&](double x) { return roundTo(low_, x) == x; });
  }

  /// `v` (f32) in the low type.
  Value* of(Value* v, const SourceLoc& loc) {
    auto it = cache_.find(v);
    if (it != cache_.end()) return it->second;
    const ir::Node* p = v->producer;
    // A widened low-precision value narrows back exactly: use the original.
    bool widened = p != nullptr && p->op == OpKind::Cast && p->operands[0]->type.dtype == low_;
    Value* low = widened ? p->operands[0] : addCast(g_, v, low_, loc);
    cache_.emplace(v, low);
    return low;
  }

  DType type() const { return low_; }

 private:
  ir::Graph& g_;
  DType low_;
  std::unordered_map<const Value*, Value*> cache_;
};

}  // namespace

DType lowPrecisionType(Precision p) {
  switch (p) {
    case Precision::F32: return DType::f32;
    case Precision::BF16: return DType::bf16;
    case Precision::F16: return DType::f16;
  }
  return DType::f32;
}

void amp(ir::Graph& g, const PassContext& ctx) {
  DType low = lowPrecisionType(ctx.precision);
  if (low == DType::f32) return;
  if (std::none_of(g.nodes().begin(), g.nodes().end(), [](const auto& n) { return isF32Contraction(*n); })) return;

  ir::Graph out(g.name());
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : g.inputs()) map[v] = out.addInput(v->name, v->type, v->loc);
  for (const ir::Param& p : g.params())
    map[p.value] = out.addParam(p.value->name, p.value->type, p.init, p.value->loc);

  LowCasts casts(out, low);
  for (const auto& node : g.nodes()) {
    std::vector<Value*> operands;
    for (Value* v : node->operands) operands.push_back(map.at(v));
    if (node->op == OpKind::Select && node->result->type.dtype == DType::f32 && casts.exact(operands[1]) &&
        casts.exact(operands[2])) {
      for (size_t i : {1, 2}) operands[i] = casts.of(operands[i], node->loc);
      Value* low = out.addNodeRaw(OpKind::Select, std::move(operands), node->attrs,
                                  ir::TensorType{casts.type(), node->result->type.shape}, node->loc);
      map[node->result] = addCast(out, low, DType::f32, node->loc, node->result->name);
      continue;
    }
    if (!isF32Contraction(*node)) {
      Value* copy = out.addNodeRaw(node->op, std::move(operands), node->attrs, node->result->type, node->loc,
                                   node->result->name);
      casts.noteCopied(*copy->producer);
      map[node->result] = copy;
      continue;
    }
    for (Value*& v : operands) v = casts.of(v, node->loc);
    Value* product = out.addNodeRaw(node->op, std::move(operands), node->attrs,
                                    ir::TensorType{low, node->result->type.shape}, node->loc);
    map[node->result] = addCast(out, product, DType::f32, node->loc, node->result->name);
  }
  for (const ir::Output& o : g.outputs()) out.addOutput(o.name, map.at(o.value));
  for (const ir::Update& u : g.updates()) out.addUpdate(map.at(u.param), map.at(u.value));
  g = std::move(out);
}

}  // namespace kiln::passes
