// Thin matmuls as sums of outer products (passes/ThinMatMul.h).
#include "passes/ThinMatMul.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::passes {

using ir::Ints;
using ir::OpKind;
using ir::Value;

namespace {

constexpr int64_t kMaxDepth = 2;  // K up to which a product is a sum of outer products

bool isThin(const ir::Node& n) {
  if (n.op != OpKind::MatMul) return false;
  const Value *a = n.operands[0], *b = n.operands[1];
  const DType t = n.result->type.dtype;
  if (a->type.rank() != 2 || b->type.rank() != 2 || (t != DType::f32 && t != DType::f64)) return false;
  const int64_t k = a->type.shape[n.attrBool("transpose_a") ? 0 : 1];
  return k >= 1 && k <= kMaxDepth;
}

/// Adds the nodes of one rewrite at the matmul's location.
class Builder {
 public:
  Builder(ir::Graph& g, SourceLoc loc) : g_(g), loc_(std::move(loc)) {}

  Value* node(OpKind op, std::vector<Value*> operands, std::vector<ir::NamedAttr> attrs = {},
              std::string name = {}) {
    return g_.addNode(op, std::move(operands), attrs, loc_, std::move(name));
  }
  Value* slice(Value* v, Ints starts, Ints ends) {
    return node(OpKind::Slice, {v}, {{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"steps", Ints{1, 1}}});
  }
  Value* reshape(Value* v, Ints shape) { return node(OpKind::Reshape, {v}, {{"shape", std::move(shape)}}); }
  Value* cast(Value* v, DType to, std::string name = {}) {
    return v->type.dtype == to ? v : node(OpKind::Cast, {v}, {{"dtype", to}}, std::move(name));
  }

 private:
  ir::Graph& g_;
  SourceLoc loc_;
};

/// Σ_k op(A)[:, k] ⊗ op(B)[k, :] in f64, rounded to the result type, named `name`.
Value* outerProducts(Builder& b, const ir::Node& n, Value* a, Value* bm, const std::string& name) {
  const bool ta = n.attrBool("transpose_a"), tb = n.attrBool("transpose_b");
  const int64_t m = n.result->type.shape[0], cols = n.result->type.shape[1];
  const int64_t depth = a->type.shape[ta ? 0 : 1];
  const DType result = n.result->type.dtype;
  // The sum starts at +0, as the interpreter's does: a product of -0 alone gives +0.
  Value* sum = b.node(OpKind::Constant, {}, {{"shape", Ints{}}, {"dtype", DType::f64}, {"value", ir::Floats{0.0}}});
  for (int64_t k = 0; k < depth; ++k) {
    // Column k of op(A) as [M, 1]; row k of op(B) as [1, N]. A row of a transposed A (or a column
    // of a transposed B) is reshaped, which keeps its elements' order.
    Value* colA = ta ? b.reshape(b.slice(a, {k, 0}, {k + 1, m}), {m, 1}) : b.slice(a, {0, k}, {m, k + 1});
    Value* rowB = tb ? b.reshape(b.slice(bm, {0, k}, {cols, k + 1}), {1, cols}) : b.slice(bm, {k, 0}, {k + 1, cols});
    // The last node carries the result's name when no cast to the result type follows (f64).
    std::string here = k + 1 == depth && result == DType::f64 ? name : std::string();
    // Broadcast before the widening, so that each cast runs at the points of the product reading
    // it and joins its kernel (a cast of the [M, 1] column would be a kernel of its own).
    auto widened = [&](Value* v) { return b.cast(b.node(OpKind::Broadcast, {v}, {{"shape", Ints{m, cols}}}), DType::f64); };
    Value* term = b.node(OpKind::Mul, {widened(colA), widened(rowB)});
    sum = b.node(OpKind::Add, {sum, term}, {}, here);
  }
  return b.cast(sum, result, name);
}

}  // namespace

int expandThinMatMuls(ir::Graph& g) {
  if (std::none_of(g.nodes().begin(), g.nodes().end(), [](const auto& n) { return isThin(*n); })) return 0;
  ir::Graph out(g.name());
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : g.inputs()) map[v] = out.addInput(v->name, v->type, v->loc);
  for (const ir::Param& p : g.params()) map[p.value] = out.addParam(p.value->name, p.value->type, p.init, p.value->loc);
  int rewritten = 0;
  for (const auto& node : g.nodes()) {
    std::vector<Value*> operands;
    for (Value* v : node->operands) operands.push_back(map.at(v));
    if (!isThin(*node)) {
      map[node->result] = out.addNodeRaw(node->op, std::move(operands), node->attrs, node->result->type, node->loc,
                                         node->result->name);
      continue;
    }
    Builder b(out, node->loc);
    Value* v = outerProducts(b, *node, operands[0], operands[1], node->result->name);
    KILN_CHECK(v->type == node->result->type, "thin matmul at {}: rewrote {} as {}", node->loc.str(),
               node->result->type.str(), v->type.str());
    map[node->result] = v;
    ++rewritten;
  }
  for (const ir::Output& o : g.outputs()) out.addOutput(o.name, map.at(o.value));
  for (const ir::Update& u : g.updates()) out.addUpdate(map.at(u.param), map.at(u.value));
  g = std::move(out);
  return rewritten;
}

}  // namespace kiln::passes
