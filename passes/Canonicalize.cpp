// The canonicalize driver: sweeps until nothing changes. One sweep drops the nodes that reach no
// output or update (DCE), then rebuilds the graph in order, offering every node to the rules
// (passes/canonicalize/) and merging identical nodes (CSE) as it goes. Rules see operands that
// are already simplified, so chains collapse within one sweep; later sweeps pick up what a sweep
// enabled (a node that became dead, a permute that became a matmul's only user).
#include "passes/Canonicalize.h"

#include "passes/canonicalize/Rewriter.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::passes {

using ir::Value;

namespace {

// A safety net, not a limit that a real graph reaches: every rule removes a node or an op from a
// chain, so a graph settles in a handful of sweeps (the zoo's training steps take three or four).
constexpr int kMaxSweeps = 64;

// Where each value of the old graph is read: how many operand slots of live nodes and how many
// outputs and updates name it.
using Uses = std::unordered_map<const Value*, int64_t>;

std::vector<bool> liveNodes(const ir::Graph& g, Uses& uses) {
  const auto& nodes = g.nodes();
  std::unordered_map<const Value*, bool> needed;
  for (const ir::Output& o : g.outputs()) {
    needed[o.value] = true;
    ++uses[o.value];
  }
  for (const ir::Update& u : g.updates()) {
    needed[u.value] = true;
    ++uses[u.value];
  }
  std::vector<bool> live(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!needed.count(nodes[i]->result)) continue;
    live[i] = true;
    for (const Value* v : nodes[i]->operands) needed[v] = true;
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (live[i])
      for (const Value* v : nodes[i]->operands) ++uses[v];
  return live;
}

// One sweep; replaces `g` and returns true when anything changed.
bool sweep(ir::Graph& g) {
  Uses uses;
  std::vector<bool> live = liveNodes(g, uses);
  bool changed = std::find(live.begin(), live.end(), false) != live.end();

  ir::Graph out(g.name());
  std::unordered_map<const Value*, Value*> map;  // old value → its replacement in `out`
  // For each value of `out`, the uses of the old values that map onto it by the nodes not yet
  // rebuilt (and by outputs and updates): counted, not searched, so that a chain whose values all
  // collapse onto one (neg of neg of …) stays linear.
  std::unordered_map<const Value*, int64_t> pending;
  auto bind = [&](const Value* old, Value* now) {
    map[old] = now;
    if (auto u = uses.find(old); u != uses.end()) pending[now] += u->second;
  };
  for (Value* v : g.inputs()) bind(v, out.addInput(v->name, v->type, v->loc));
  for (const ir::Param& p : g.params()) bind(p.value, out.addParam(p.value->name, p.value->type, p.init, p.value->loc));

  canon::Rewriter rw(out);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    const ir::Node& node = *nodes[i];
    canon::Candidate c{node.op, {}, node.attrs, node.result->type, {}};
    for (const Value* v : node.operands) {
      Value* now = map.at(v);
      // The node is its operand's only use when nothing built so far reads the operand and no old
      // value that maps onto it is read anywhere but here.
      c.operands.push_back(now);
      c.soleUse.push_back(rw.usesBuilt(now) == 0 && pending[now] == 1);
    }
    for (const Value* v : node.operands) --pending[map.at(v)];
    rw.setLocation(node.loc);
    Value* v = rw.build(std::move(c));
    if (!node.result->name.empty() && v->kind == ir::ValueKind::Result && v->name.empty())
      out.nameValue(v, node.result->name);
    bind(node.result, v);
  }
  if (!changed && rw.rewrites() == 0) return false;
  for (const ir::Output& o : g.outputs()) out.addOutput(o.name, map.at(o.value));
  for (const ir::Update& u : g.updates()) out.addUpdate(map.at(u.param), map.at(u.value));
  g = std::move(out);
  return true;
}

}  // namespace

void canonicalize(ir::Graph& g, const PassContext&) {
  for (int i = 0; i < kMaxSweeps; ++i)
    if (!sweep(g)) return;
}

}  // namespace kiln::passes
