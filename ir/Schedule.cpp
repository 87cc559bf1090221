#include "ir/Schedule.h"

namespace kiln::ir {

std::unordered_set<const Value*> materializedResults(const Graph& g) {
  std::unordered_set<const Value*> out;
  for (const Output& o : g.outputs())
    if (o.value->kind == ValueKind::Result) out.insert(o.value);
  for (const Update& u : g.updates())
    if (u.value->kind == ValueKind::Result) out.insert(u.value);
  for (const auto& n : g.nodes())
    for (const Value* v : n->operands)
      if (v->kind == ValueKind::Result && (n->group < 0 || v->producer->group != n->group)) out.insert(v);
  return out;
}

std::vector<std::vector<const Node*>> kernelSteps(const Graph& g) {
  std::vector<std::vector<const Node*>> steps;
  int32_t open = -1;
  for (const auto& n : g.nodes()) {
    if (n->group < 0 || n->group != open) steps.emplace_back();
    steps.back().push_back(n.get());
    open = n->group;
  }
  return steps;
}

}  // namespace kiln::ir
