#include "passes/decompose/Builder.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::passes::decomp {

using ir::OpKind;
using ir::Value;

ir::Ints allAxes(int64_t rank) {
  ir::Ints axes;
  for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  return axes;
}

int expandNodes(ir::Graph& g, const std::function<bool(const ir::Node&)>& selected, const Expansion& expand) {
  if (std::none_of(g.nodes().begin(), g.nodes().end(), [&](const auto& n) { return selected(*n); })) return 0;
  ir::Graph out(g.name());
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : g.inputs()) map[v] = out.addInput(v->name, v->type, v->loc);
  for (const ir::Param& p : g.params()) map[p.value] = out.addParam(p.value->name, p.value->type, p.init, p.value->loc);
  int expanded = 0;
  for (const auto& node : g.nodes()) {
    std::vector<Value*> operands;
    for (Value* v : node->operands) {
      auto it = map.find(v);
      KILN_ASSERT(it != map.end(), "operand of '{}' is not defined before use", node->info().name);
      operands.push_back(it->second);
    }
    if (!selected(*node)) {
      map[node->result] = out.addNodeRaw(node->op, std::move(operands), node->attrs, node->result->type,
                                         node->loc, node->result->name);
      continue;
    }
    size_t firstNew = out.nodes().size();
    Builder builder(out, node->loc);
    Value* v = expand(builder, *node, operands);
    KILN_ASSERT(v->type == node->result->type, "expanding '{}' produced {} instead of {}", node->info().name,
                v->type.str(), node->result->type.str());
    // Only a value the expansion itself produced takes the name (not an operand passed through).
    const auto& nodes = out.nodes();
    bool producedHere = std::any_of(nodes.begin() + static_cast<std::ptrdiff_t>(firstNew), nodes.end(),
                                    [&](const auto& n) { return n->result == v; });
    if (!node->result->name.empty() && v->name.empty() && producedHere) out.nameValue(v, node->result->name);
    map[node->result] = v;
    ++expanded;
  }
  for (const ir::Output& o : g.outputs()) out.addOutput(o.name, map.at(o.value));
  for (const ir::Update& u : g.updates()) out.addUpdate(map.at(u.param), map.at(u.value));
  g = std::move(out);
  return expanded;
}

Value* Builder::op(OpKind k, std::vector<Value*> operands, std::vector<ir::NamedAttr> attrs) {
  return g_.addNode(k, std::move(operands), attrs, loc_);
}

Value* Builder::constant(double v, DType dtype) {
  return op(OpKind::Constant, {}, {{"shape", ir::Ints{}}, {"dtype", dtype}, {"value", ir::Floats{v}}});
}

Value* Builder::reduce(OpKind k, Value* x, const ir::Ints& axes, bool keepdim) {
  return op(k, {x}, {{"axes", axes}, {"keepdim", keepdim}});
}

Value* Builder::mean(Value* x, const ir::Ints& axes, bool keepdim) {
  // An explicit empty axis list means "all" for the reduction ops, so count the same way.
  int64_t n = 1;
  if (axes.empty()) n = x->type.numel();
  for (int64_t a : axes) n *= x->type.shape[a];
  // n == 0 gives sum 0 * inf = NaN, the mean of nothing.
  return scale(reduce(OpKind::ReduceSum, x, axes, keepdim), 1.0 / static_cast<double>(n));
}

Value* Builder::permute(Value* x, const ir::Ints& perm) { return op(OpKind::Permute, {x}, {{"perm", perm}}); }

Value* Builder::reshape(Value* x, const ir::Shape& shape) { return op(OpKind::Reshape, {x}, {{"shape", shape}}); }

// The max only keeps exp() from overflowing; softmax does not depend on it, so its gradient is
// zero in exact arithmetic. stop_gradient says so, and autodiff emits no backward for it.
static Value* maxShifted(Builder& b, Value* x, int64_t axis) {
  Value* max = b.unary(OpKind::StopGradient, b.reduce(OpKind::ReduceMax, x, {axis}, true));
  return b.sub(x, max);
}

Value* Builder::softmax(Value* x, int64_t axis) {
  Value* shifted = maxShifted(*this, x, axis);
  Value* e = unary(OpKind::Exp, shifted);
  return div(e, reduce(OpKind::ReduceSum, e, {axis}, true));
}

Value* Builder::logSoftmax(Value* x, int64_t axis) {
  Value* shifted = maxShifted(*this, x, axis);
  Value* sum = reduce(OpKind::ReduceSum, unary(OpKind::Exp, shifted), {axis}, true);
  return sub(shifted, unary(OpKind::Log, sum));
}

Value* Builder::reduceLoss(Value* perElement, const std::string& reduction) {
  if (reduction == "none") return perElement;
  ir::Ints axes = allAxes(perElement->type.rank());
  if (reduction == "sum") return reduce(OpKind::ReduceSum, perElement, axes, false);
  KILN_ASSERT(reduction == "mean", "unknown loss reduction '{}'", reduction);
  return mean(perElement, axes, false);
}

}  // namespace kiln::passes::decomp
