#include "interp/KernelExec.h"

#include "interp/Eval.h"
#include "kernels/Kernel.h"
#include "support/Philox.h"

#include <unordered_map>

namespace kiln::interp {

namespace {

using detail::HostTensor;
using ir::Value;

struct Memory {
  std::unordered_map<const Value*, HostTensor> owned;
  std::unordered_map<const Value*, const HostTensor*> bound;
  const HostTensor& get(const Value* v) const {
    auto b = bound.find(v);
    if (b != bound.end()) return *b->second;
    auto o = owned.find(v);
    KILN_ASSERT(o != owned.end(), "kernel executor: %{} read before it is written", v->name);
    return o->second;
  }
};

/// Evaluates op `op` with `attrs` on operand tensors, as the interpreter would evaluate a node.
HostTensor evalOp(ir::OpKind op, const std::vector<ir::AttrValue>& attrs, const std::vector<const HostTensor*>& args,
                  const ir::TensorType& result) {
  std::vector<Value> operandValues(args.size());
  ir::Node node{op, {}, attrs, nullptr, {}};
  for (size_t i = 0; i < args.size(); ++i) {
    operandValues[i].type = {args[i]->dtype(), args[i]->shape()};
    node.operands.push_back(&operandValues[i]);
  }
  Value out;
  out.type = result;
  node.result = &out;
  detail::EvalFn fn = detail::findEvaluator(op);
  KILN_ASSERT(fn != nullptr, "no evaluator for '{}'", ir::opName(op));
  return fn(node, args);
}

int64_t eval(const kernels::Affine& a, const std::vector<int64_t>& coords) {
  int64_t v = a.constant;
  for (size_t d = 0; d < coords.size(); ++d) v += a.coeff[d] * coords[d];
  return v;
}

/// A contraction operand as the node sees it: buffer `buf`'s elements read through `map` into a
/// tensor of `shape` (kernels::Contraction).
HostTensor gatherOperand(const kernels::Kernel& k, int32_t buf, const ir::Shape& shape, const kernels::IndexMap& map,
                         const Memory& mem) {
  const HostTensor& src = mem.get(k.buffers[buf].value);
  HostTensor t(src.dtype(), shape);
  for (int64_t p = 0; p < ir::numElements(shape); ++p) detail::copyElement(src, eval(map.index, detail::unravel(p, shape)), t, p);
  return t;
}

void runNest(const kernels::Kernel& k, const kernels::LoopNest& nest, const HostTensor* acc, Memory& mem) {
  const ir::Shape& domain = nest.domain;
  int64_t points = ir::numElements(domain);
  std::vector<std::vector<int64_t>> coords(points);
  for (int64_t p = 0; p < points; ++p) coords[p] = detail::unravel(p, domain);
  ir::Ints axes;
  ir::Shape keep = domain;
  for (size_t d = 0; d < domain.size(); ++d)
    if (nest.reduced[d]) {
      axes.push_back(static_cast<int64_t>(d));
      keep[d] = 1;
    }
  std::vector<HostTensor> values;
  values.reserve(nest.exprs.size());
  for (const kernels::Expr& e : nest.exprs) {
    HostTensor t(e.dtype, domain);
    switch (e.kind) {
      case kernels::Expr::Kind::Load: {
        const kernels::Load& l = nest.loads[e.load];
        const HostTensor& src = mem.get(k.buffers[l.buffer].value);
        for (int64_t p = 0; p < points; ++p) {
          bool inside = true;
          for (const auto& b : l.map.bounds) {
            int64_t v = eval(b.value, coords[p]);
            inside = inside && v >= 0 && v < b.limit;
          }
          if (inside)
            detail::copyElement(src, eval(l.map.index, coords[p]), t, p);
          else
            t.set(p, l.map.padValue);
        }
        break;
      }
      case kernels::Expr::Kind::Constant:
        for (int64_t p = 0; p < points; ++p) t.set(p, e.value);
        break;
      case kernels::Expr::Kind::Coord:
        for (int64_t p = 0; p < points; ++p) t.set(p, static_cast<double>(eval(e.index, coords[p]) / e.divisor % e.modulus));
        break;
      case kernels::Expr::Kind::Random:
        for (int64_t p = 0; p < points; ++p) {
          uint64_t i = static_cast<uint64_t>(eval(e.index, coords[p]));
          t.set(p, e.normal ? philoxNormal(e.seed, e.offset, i) : philoxUniform(e.seed, e.offset, i));
        }
        break;
      case kernels::Expr::Kind::Reduced: {
        const kernels::Reduction& r = nest.reductions[e.reduction];
        HostTensor reduced =
            evalOp(r.op, {axes, true}, {&values[r.body]}, ir::TensorType{r.dtype, keep});
        std::vector<int64_t> from = detail::broadcastIndices(keep, domain);
        for (int64_t p = 0; p < points; ++p) detail::copyElement(reduced, from[p], t, p);
        break;
      }
      case kernels::Expr::Kind::Acc: t = *acc; break;
      case kernels::Expr::Kind::Op: {
        std::vector<const HostTensor*> args;
        for (int32_t a : e.args) args.push_back(&values[a]);
        t = evalOp(e.op, e.attrs, args, ir::TensorType{e.dtype, domain});
        break;
      }
    }
    values.push_back(std::move(t));
  }
  for (const kernels::Store& s : nest.stores) {
    const kernels::Buffer& b = k.buffers[s.buffer];
    auto it = mem.owned.find(b.value);
    if (it == mem.owned.end()) it = mem.owned.emplace(b.value, HostTensor(b.type.dtype, b.type.shape)).first;
    for (int64_t p = 0; p < points; ++p) detail::copyElement(values[s.expr], p, it->second, eval(s.map.index, coords[p]));
  }
}

}  // namespace

TensorMap runKernels(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params,
                     TensorMap* updatedParams) {
  Memory mem;
  for (const Value* v : graph.inputs()) {
    auto it = inputs.find(v->name);
    KILN_CHECK(it != inputs.end(), "missing input '{}'", v->name);
    mem.bound[v] = &it->second;
  }
  for (const ir::Param& p : graph.params()) {
    auto it = params.find(p.value->name);
    if (it != params.end())
      mem.bound[p.value] = &it->second;
    else
      mem.owned.emplace(p.value, initialize(p));
  }
  std::vector<kernels::Kernel> kernels = kernels::lowerGraph(graph);
  auto operandsOf = [&](const ir::Node& n) {
    std::vector<const HostTensor*> args;
    for (const Value* v : n.operands) args.push_back(&mem.get(v));
    return args;
  };
  // Constant data.
  for (const auto& n : graph.nodes())
    if (n->op == ir::OpKind::Constant) mem.owned.emplace(n->result, evalOp(n->op, n->attrs, {}, n->result->type));
  for (const kernels::Kernel& k : kernels) {
    if (k.op) {
      mem.owned.insert_or_assign(k.op->result, evalOp(k.op->op, k.op->attrs, operandsOf(*k.op), k.op->result->type));
      continue;
    }
    HostTensor acc;
    if (k.hasContraction) {
      const ir::Node* c = k.nodes.front();
      for (const ir::Node* n : k.nodes)
        if (n->op == k.contraction.op) {
          c = n;
          break;
        }
      const kernels::Contraction& con = k.contraction;
      const HostTensor a = gatherOperand(k, con.a, con.shapeA, con.mapA, mem);
      const HostTensor b = gatherOperand(k, con.b, con.shapeB, con.mapB, mem);
      acc = evalOp(c->op, c->attrs, {&a, &b}, c->result->type);
    }
    for (const kernels::LoopNest& nest : k.nests) runNest(k, nest, &acc, mem);
  }
  TensorMap outputs;
  for (const ir::Output& o : graph.outputs()) outputs.insert_or_assign(o.name, mem.get(o.value));
  if (updatedParams)
    for (const ir::Update& u : graph.updates()) updatedParams->insert_or_assign(u.param->name, mem.get(u.value));
  return outputs;
}

}  // namespace kiln::interp
