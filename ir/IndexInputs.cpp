#include "ir/IndexInputs.h"

#include "ir/Type.h"

#include <fmt/format.h>

namespace kiln::ir {

std::vector<IndexInput> indexInputs(const Graph& g) {
  std::vector<IndexInput> out;
  for (const auto& n : g.nodes()) {
    const Value* v = nullptr;
    IndexInput use;
    if (n->op == OpKind::Gather) {
      v = n->operands.at(1);
      const Shape& data = n->operands.at(0)->type.shape;
      use.axis = normalizeAxis(n->attrInt("axis"), static_cast<int64_t>(data.size()));
      use.bound = data.at(static_cast<size_t>(use.axis));
    } else if (n->op == OpKind::ScatterAdd) {
      v = n->operands.at(0);
      use.axis = n->attrInt("axis");
      use.bound = n->attrInt("dim_size");
    } else {
      continue;
    }
    while (v->kind == ValueKind::Result && v->producer->op == OpKind::Reshape) v = v->producer->operands.at(0);
    if (v->kind != ValueKind::Input) continue;
    use.input = v;
    use.op = n->result->name.empty() ? std::string(n->info().name) : fmt::format("{} (%{})", n->info().name, n->result->name);
    use.loc = n->loc.known() ? n->loc.str() + ": " : "";
    out.push_back(std::move(use));
  }
  return out;
}

}  // namespace kiln::ir
