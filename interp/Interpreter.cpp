// The interpreter's driver: checks the caller's inputs and parameters against the graph signature,
// evaluates nodes in order through the evaluator table, and collects the outputs.
#include "interp/Interpreter.h"

#include "interp/Eval.h"
#include "passes/Decompose.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

namespace kiln::interp {
namespace {

using detail::HostTensor;

/// Values bound so far. Lookups only (never iterated), so keying by pointer is deterministic.
struct Environment {
  std::unordered_map<const ir::Value*, const HostTensor*> bound;
  std::deque<HostTensor> owned;  // results and initialized parameters; a deque keeps addresses stable

  void bind(const ir::Value* v, const HostTensor* t) { bound[v] = t; }
  void bindOwned(const ir::Value* v, HostTensor t) { bind(v, &owned.emplace_back(std::move(t))); }
  const HostTensor& get(const ir::Value* v) const {
    auto it = bound.find(v);
    KILN_ASSERT(it != bound.end(), "value '{}' used before it is defined", v->name);
    return *it->second;
  }
};

std::string typeOf(const HostTensor& t) {
  return t.data() == nullptr ? "an empty (default-constructed) tensor" : t.typeStr();
}

bool hasType(const HostTensor& t, const ir::TensorType& type) {
  return t.data() != nullptr && t.dtype() == type.dtype && t.shape() == type.shape;
}

std::string nameList(const std::vector<std::string>& names) {
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

void bindInputs(const ir::Graph& g, const TensorMap& given, Environment& env) {
  std::vector<std::string> names;
  for (const ir::Value* v : g.inputs()) {
    names.push_back(v->name);
    auto it = given.find(v->name);
    KILN_CHECK(it != given.end(), "missing graph input '{}' of type {}", v->name, v->type.str());
    KILN_CHECK(hasType(it->second, v->type), "graph input '{}' has type {}, expected {}", v->name,
               typeOf(it->second), v->type.str());
    env.bind(v, &it->second);
  }
  for (const auto& [name, tensor] : given) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    KILN_CHECK(g.findParam(name) == nullptr, "'{}' is a parameter, not a graph input; pass it in params", name);
    KILN_THROW("unknown graph input '{}' (the graph's inputs are: {})", name, nameList(names));
  }
}

void bindParams(const ir::Graph& g, const TensorMap& given, Environment& env) {
  std::vector<std::string> names;
  for (const ir::Param& p : g.params()) {
    names.push_back(p.value->name);
    auto it = given.find(p.value->name);
    if (it == given.end()) {
      env.bindOwned(p.value, initialize(p));
      continue;
    }
    KILN_CHECK(hasType(it->second, p.value->type), "parameter '{}' has type {}, expected {}", p.value->name,
               typeOf(it->second), p.value->type.str());
    env.bind(p.value, &it->second);
  }
  for (const auto& [name, tensor] : given)
    KILN_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
               "unknown parameter '{}' (the graph's parameters are: {})", name, nameList(names));
}

HostTensor evaluate(const ir::Node& node, const Environment& env) {
  KILN_ASSERT(!node.info().has(ir::kComposite),
              "composite op '{}' reached runPrimitives; composite ops must be decomposed first "
              "(interp::run runs passes::decompose)",
              node.info().name);
  detail::EvalFn fn = detail::findEvaluator(node.op);
  KILN_ASSERT(fn != nullptr, "the interpreter has no evaluator for primitive op '{}'", node.info().name);
  std::vector<const HostTensor*> operands;
  for (const ir::Value* v : node.operands) {
    const HostTensor& t = env.get(v);
    KILN_ASSERT(hasType(t, v->type), "op '{}': operand holds {}, its IR type is {}", node.info().name,
                t.typeStr(), v->type.str());
    operands.push_back(&t);
  }
  HostTensor result = fn(node, operands);
  KILN_ASSERT(hasType(result, node.result->type), "op '{}' evaluated to {}, its IR type is {}", node.info().name,
              result.typeStr(), node.result->type.str());
  return result;
}

}  // namespace

bool hasEvaluator(ir::OpKind op) { return detail::findEvaluator(op) != nullptr; }

TensorMap runPrimitives(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params,
                        TensorMap* updatedParams) {
  Environment env;
  bindInputs(graph, inputs, env);
  bindParams(graph, params, env);
  for (const auto& node : graph.nodes()) env.bindOwned(node->result, evaluate(*node, env));
  TensorMap outputs;
  for (const ir::Output& o : graph.outputs()) outputs.insert_or_assign(o.name, env.get(o.value));
  // Updates take effect after the whole run: every node above read the old values.
  if (updatedParams)
    for (const ir::Update& u : graph.updates()) updatedParams->insert_or_assign(u.param->name, env.get(u.value));
  return outputs;
}

TensorMap run(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params, TensorMap* updatedParams) {
  bool hasComposite = std::any_of(graph.nodes().begin(), graph.nodes().end(),
                                  [](const auto& n) { return n->info().has(ir::kComposite); });
  if (!hasComposite) return runPrimitives(graph, inputs, params, updatedParams);
  ir::Graph primitives = graph.clone();
  passes::decompose(primitives);
  return runPrimitives(primitives, inputs, params, updatedParams);
}

}  // namespace kiln::interp
