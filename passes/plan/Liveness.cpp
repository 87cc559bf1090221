#include "passes/plan/Liveness.h"

#include "ir/Schedule.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::passes::planning {

Liveness computeLiveness(const ir::Graph& g) {
  Liveness live;
  live.steps = ir::kernelSteps(g);
  std::unordered_map<const ir::Node*, int> stepOf;
  for (size_t s = 0; s < live.steps.size(); ++s)
    for (const ir::Node* n : live.steps[s]) stepOf[n] = static_cast<int>(s);

  // Graph outputs and update values live in memory the caller or the parameter storage owns.
  std::unordered_set<const ir::Value*> arena = ir::materializedResults(g);
  for (const ir::Output& o : g.outputs()) arena.erase(o.value);
  for (const ir::Update& u : g.updates()) arena.erase(u.value);

  for (const auto& n : g.nodes()) {
    if (!arena.count(n->result)) continue;
    live.index[n->result] = static_cast<int>(live.buffers.size());
    live.buffers.push_back(n->result);
    live.def.push_back(stepOf.at(n.get()));
    live.last.push_back(stepOf.at(n.get()));
  }
  for (const auto& n : g.nodes())
    for (const ir::Value* v : n->operands)
      if (auto it = live.index.find(v); it != live.index.end())
        live.last[it->second] = std::max(live.last[it->second], stepOf.at(n.get()));
  return live;
}

std::string inPlaceProblem(const ir::Graph& g, const Liveness& live, int operand, int result,
                           const ir::text::ValueNames& names) {
  const ir::Value* a = live.buffers[operand];
  const ir::Value* b = live.buffers[result];
  std::string what = fmt::format("%{} cannot take the slot of %{}", names.of(b), names.of(a));
  int step = live.def[result];
  if (live.last[operand] != step)
    return fmt::format("{}: %{} is live until step {}, not only until step {} that writes %{}", what, names.of(a),
                       live.last[operand], step, names.of(b));
  if (live.bytes(operand) != live.bytes(result))
    return fmt::format("{}: {} bytes against {}", what, live.bytes(result), live.bytes(operand));

  const std::vector<const ir::Node*>& nodes = live.steps[step];
  int32_t group = nodes.front()->group;
  if (group >= 0 && g.groups()[group].kind != ir::KernelKind::Loop)
    return fmt::format("{}: kernel @{} is a {} kernel, not a loop", what, g.groups()[group].name,
                       ir::kernelKindName(g.groups()[group].kind));

  // Every node of the step that depends on the operand must compute element i from element i.
  std::unordered_set<const ir::Value*> reached = {a};
  for (const ir::Node* n : nodes) {
    bool reads = std::any_of(n->operands.begin(), n->operands.end(),
                             [&](const ir::Value* v) { return reached.count(v) > 0; });
    if (!reads) continue;
    if (!n->info().has(ir::kElementwise))
      return fmt::format("{}: %{} reaches {} (not elementwise) in step {}", what, names.of(a), n->info().name, step);
    if (n->result->type.shape != a->type.shape)
      return fmt::format("{}: %{} {} reaches {} with result {} (a broadcast) in step {}", what, names.of(a),
                         a->type.str(), n->info().name, n->result->type.str(), step);
    reached.insert(n->result);
  }
  if (!reached.count(b)) return fmt::format("{}: %{} does not depend on %{}", what, names.of(b), names.of(a));
  return "";
}

}  // namespace kiln::passes::planning
