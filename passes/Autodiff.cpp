// Reverse-mode autodiff: one backward sweep over the nodes in reverse topological order, applying
// each node's gradient rule (passes/autodiff/, table in RuleTable.cpp) to the adjoint of its result
// and accumulating operand adjoints. Only "active" values — float values on a path from a
// requested value — are differentiated, so data inputs, integer values and values behind
// stop_gradient cost nothing.
#include "passes/Autodiff.h"

#include "passes/Decompose.h"
#include "passes/autodiff/GradRules.h"

#include <fmt/format.h>

#include <cstdio>
#include <unordered_map>
#include <unordered_set>

namespace kiln::passes {

using ir::Value;

namespace {

SourceLoc locOf(const Value* v) { return v->producer ? v->producer->loc : v->loc; }

// How messages name a value: its text name, else the op that produced it and where.
std::string describe(const Value* v) {
  if (!v->name.empty()) return fmt::format("%{} ({})", v->name, v->type.str());
  if (v->producer) {
    std::string at = v->producer->loc.known() ? " at " + v->producer->loc.str() : "";
    return fmt::format("the result of '{}'{} ({})", v->producer->info().name, at, v->type.str());
  }
  return fmt::format("an unnamed value ({})", v->type.str());
}

std::unordered_set<const Value*> valuesOf(const ir::Graph& g) {
  std::unordered_set<const Value*> all(g.inputs().begin(), g.inputs().end());
  for (const ir::Param& p : g.params()) all.insert(p.value);
  for (const auto& n : g.nodes()) all.insert(n->result);
  return all;
}

void checkRequest(const ir::Graph& g, const Value* loss, std::span<Value* const> wrt, const Value* seed) {
  for (const auto& n : g.nodes())
    if (n->info().has(ir::kComposite))
      throw Error(n->loc, fmt::format("autodiff: op '{}' is composite; run the decompose pass first (the "
                                      "\"autodiff\" pass does)",
                                      n->info().name));
  std::unordered_set<const Value*> all = valuesOf(g);
  KILN_CHECK(loss != nullptr && all.count(loss), "autodiff: the loss is not a value of graph '{}'", g.name());
  if (loss->type.numel() != 1 || !isFloat(loss->type.dtype))
    throw Error(locOf(loss), fmt::format("autodiff: the loss must be a float scalar, but {} is {}", describe(loss),
                                         loss->type.numel() != 1 ? "not a scalar" : "not a float"));
  KILN_CHECK(seed == nullptr || (all.count(seed) && seed->type == loss->type),
             "autodiff: the seed must be a value of graph '{}' typed like the loss ({})", g.name(), loss->type.str());
  for (size_t i = 0; i < wrt.size(); ++i) {
    const Value* v = wrt[i];
    KILN_CHECK(v != nullptr && all.count(v), "autodiff: value #{} to differentiate with respect to is not in graph '{}'",
               i, g.name());
    if (!isFloat(v->type.dtype))
      throw Error(locOf(v), fmt::format("autodiff: cannot differentiate with respect to {}: only float values have "
                                        "gradients",
                                        describe(v)));
  }
}

// Float values that depend on a requested value through ops with a gradient rule.
std::unordered_set<const Value*> activeValues(const ir::Graph& g, std::span<Value* const> wrt) {
  std::unordered_set<const Value*> active(wrt.begin(), wrt.end());
  for (const auto& n : g.nodes()) {
    if (!isFloat(n->result->type.dtype) || ad::findGradRule(n->op) == nullptr) continue;
    for (const Value* v : n->operands)
      if (active.count(v)) {
        active.insert(n->result);
        break;
      }
  }
  return active;
}

}  // namespace

GradientResult appendGradients(ir::Graph& g, Value* loss, std::span<Value* const> wrt, Value* seed) {
  checkRequest(g, loss, wrt, seed);
  std::unordered_set<const Value*> active = activeValues(g, wrt);
  std::unordered_map<const Value*, Value*> adjoint;

  if (active.count(loss)) {
    ad::Builder seedBuilder(g, locOf(loss));
    adjoint[loss] = seed != nullptr ? seed : ad::ones(seedBuilder, loss->type);
    // Snapshot: the sweep appends nodes, and must visit forward nodes only.
    std::vector<const ir::Node*> forward;
    for (const auto& n : g.nodes()) forward.push_back(n.get());
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      const ir::Node& node = **it;
      auto dy = adjoint.find(node.result);
      if (dy == adjoint.end() || !active.count(node.result)) continue;
      ad::Builder b(g, node.loc);
      ad::GradContext ctx{b, node, dy->second, {}, std::vector<Value*>(node.operands.size(), nullptr)};
      for (const Value* v : node.operands) ctx.needs.push_back(active.count(v) > 0);
      ad::GradRule rule = ad::findGradRule(node.op);
      KILN_ASSERT(rule != nullptr, "active op '{}' has no gradient rule", node.info().name);
      rule(ctx);
      for (size_t i = 0; i < node.operands.size(); ++i) {
        if (!ctx.needs[i]) continue;
        KILN_ASSERT(ctx.dx[i] != nullptr, "gradient rule of '{}' left operand {} without a gradient",
                    node.info().name, i);
        Value*& acc = adjoint[node.operands[i]];
        acc = acc == nullptr ? ctx.dx[i] : b.add(acc, ctx.dx[i]);
      }
    }
  }

  GradientResult result;
  for (Value* v : wrt) {
    auto it = adjoint.find(v);
    if (it != adjoint.end()) {
      result.grads.push_back(it->second);
      continue;
    }
    ad::Builder b(g, locOf(v));
    result.grads.push_back(ad::zeros(b, v->type));
    std::string at = locOf(v).known() ? " (" + locOf(v).str() + ")" : "";
    result.warnings.push_back(
        fmt::format("autodiff: {}{} does not influence the loss; its gradient is zero", describe(v), at));
  }
  return result;
}

void autodiff(ir::Graph& g, const PassContext& ctx) {
  decompose(g);
  const ir::Output* lossOut = g.findOutput("loss");
  if (lossOut == nullptr) {
    std::string names;
    for (const ir::Output& o : g.outputs()) names += (names.empty() ? "" : ", ") + o.name;
    KILN_THROW("autodiff: graph '{}' has no output named 'loss' (outputs: {})", g.name(),
               names.empty() ? "none" : names);
  }
  Value* loss = lossOut->value;
  std::vector<Value*> wrt;
  for (const ir::Param& p : g.params())
    if (isFloat(p.value->type.dtype)) wrt.push_back(p.value);
  GradientResult r = appendGradients(g, loss, wrt);
  for (size_t i = 0; i < wrt.size(); ++i) {
    std::string name = "grad." + wrt[i]->name;
    Value* grad = r.grads[i];
    // Naming the value too makes the backward half of a dump readable.
    if (grad->kind == ir::ValueKind::Result && grad->name.empty() && g.findValue(name) == nullptr)
      g.nameValue(grad, name);
    g.addOutput(name, grad);
  }
  for (const std::string& w : r.warnings) ctx.warning(w);
}

}  // namespace kiln::passes
