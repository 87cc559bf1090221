// The decompose pass: rebuilds the graph, copying primitives and expanding each composite through
// its rule (passes/decompose/*.cpp). The rule table below is the one place that says which rule
// expands which op.
#include "passes/Decompose.h"

#include "passes/decompose/Builder.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::passes {

using ir::OpKind;
using ir::Value;

namespace {

struct RuleEntry {
  OpKind op;
  decomp::Rule rule;
};

constexpr RuleEntry kRules[] = {
    {OpKind::Linear, decomp::decomposeLinear},
    {OpKind::Gelu, decomp::decomposeGelu},
    {OpKind::Silu, decomp::decomposeSilu},
    {OpKind::ReduceMean, decomp::decomposeReduceMean},
    {OpKind::Softmax, decomp::decomposeSoftmax},
    {OpKind::LogSoftmax, decomp::decomposeLogSoftmax},
    {OpKind::CrossEntropy, decomp::decomposeCrossEntropy},
    {OpKind::Mse, decomp::decomposeMse},
    {OpKind::BceWithLogits, decomp::decomposeBceWithLogits},
    {OpKind::LayerNorm, decomp::decomposeLayerNorm},
    {OpKind::Dropout, decomp::decomposeDropout},
    {OpKind::Embedding, decomp::decomposeEmbedding},
    {OpKind::Attention, decomp::decomposeAttention},
};

decomp::Rule findRule(OpKind op) {
  for (const RuleEntry& e : kRules)
    if (e.op == op) return e.rule;
  return nullptr;
}

// Gives the composite's result name to the value replacing it, so dumps and outputs keep the
// user's names; only a value the rule itself produced takes it.
Value* adoptName(ir::Graph& g, Value* v, const std::string& name, size_t firstNewNode) {
  const auto& nodes = g.nodes();
  bool producedByRule = nodes.size() > firstNewNode && v->producer != nullptr &&
                        std::any_of(nodes.begin() + firstNewNode, nodes.end(),
                                    [&](const auto& n) { return n->result == v; });
  if (!name.empty() && v->name.empty() && producedByRule) g.nameValue(v, name);
  return v;
}

}  // namespace

bool hasDecomposition(OpKind op) { return findRule(op) != nullptr; }

void decompose(ir::Graph& g) {
  bool anyComposite = std::any_of(g.nodes().begin(), g.nodes().end(),
                                  [](const auto& n) { return n->info().has(ir::kComposite); });
  if (!anyComposite) return;

  ir::Graph out(g.name());
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : g.inputs()) map[v] = out.addInput(v->name, v->type, v->loc);
  for (const ir::Param& p : g.params())
    map[p.value] = out.addParam(p.value->name, p.value->type, p.init, p.value->loc);

  for (const auto& node : g.nodes()) {
    std::vector<Value*> operands;
    for (Value* v : node->operands) {
      auto it = map.find(v);
      KILN_ASSERT(it != map.end(), "operand of '{}' is not defined before use", node->info().name);
      operands.push_back(it->second);
    }
    if (!node->info().has(ir::kComposite)) {
      map[node->result] = out.addNodeRaw(node->op, std::move(operands), node->attrs, node->result->type,
                                         node->loc, node->result->name);
      continue;
    }
    decomp::Rule rule = findRule(node->op);
    KILN_ASSERT(rule != nullptr, "composite op '{}' has no decomposition rule", node->info().name);
    size_t firstNew = out.nodes().size();
    decomp::Builder builder(out, node->loc);
    Value* v = rule(builder, *node, operands);
    KILN_ASSERT(v->type == node->result->type, "decomposition of '{}' produced {} instead of {}",
                node->info().name, v->type.str(), node->result->type.str());
    map[node->result] = adoptName(out, v, node->result->name, firstNew);
  }
  for (const ir::Output& o : g.outputs()) out.addOutput(o.name, map.at(o.value));
  for (const ir::Update& u : g.updates()) out.addUpdate(map.at(u.param), map.at(u.value));
  g = std::move(out);
}

}  // namespace kiln::passes
