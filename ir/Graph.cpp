#include "ir/Graph.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::ir {

std::string_view initializerKindName(Initializer::Kind k) {
  switch (k) {
    case Initializer::Kind::Zeros: return "zeros";
    case Initializer::Kind::Ones: return "ones";
    case Initializer::Kind::Constant: return "constant";
    case Initializer::Kind::Uniform: return "uniform";
    case Initializer::Kind::Normal: return "normal";
  }
  return "?";
}

const AttrValue& Node::attr(std::string_view name) const {
  int i = info().attrIndex(name);
  KILN_ASSERT(i >= 0 && static_cast<size_t>(i) < attrs.size(), "op '{}' has no attribute '{}'", info().name, name);
  return attrs[i];
}

namespace {
bool validName(const std::string& n) {
  if (n.empty()) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}
}  // namespace

void Graph::claimName(const std::string& name, const SourceLoc& loc) {
  if (!validName(name))
    throw Error(loc, fmt::format("invalid value name '{}' (use letters, digits, '_' and '.')", name));
  if (!usedNames_.insert(name).second)
    throw Error(loc, fmt::format("the name '%{}' is already defined in graph '{}'", name, name_));
}

Value* Graph::newValue(TensorType type, ValueKind kind, std::string name) {
  values_.push_back(std::make_unique<Value>(Value{std::move(type), kind, std::move(name), nullptr, {}}));
  return values_.back().get();
}

void Graph::checkDeclaredType(const std::string& what, const std::string& name, const TensorType& type,
                              const SourceLoc& loc) {
  std::string problem = shapeProblem(type.shape);
  if (!problem.empty()) throw Error(loc, fmt::format("{} '{}': {}", what, name, problem));
}

Value* Graph::addInput(const std::string& name, TensorType type, SourceLoc loc) {
  checkDeclaredType("input", name, type, loc);
  claimName(name, loc);
  Value* v = newValue(std::move(type), ValueKind::Input, name);
  v->loc = std::move(loc);
  inputs_.push_back(v);
  return v;
}

Value* Graph::addParam(const std::string& name, TensorType type, Initializer init, SourceLoc loc) {
  checkDeclaredType("parameter", name, type, loc);
  claimName(name, loc);
  Value* v = newValue(std::move(type), ValueKind::Param, name);
  v->loc = std::move(loc);
  params_.push_back(Param{v, init});
  return v;
}

void Graph::addOutput(const std::string& name, Value* v) {
  KILN_ASSERT(v != nullptr, "null output value");
  KILN_CHECK(validName(name), "invalid output name '{}' (use letters, digits, '_' and '.')", name);
  KILN_CHECK(findOutput(name) == nullptr, "graph '{}' already has an output named '{}'", name_, name);
  outputs_.push_back(Output{name, v});
}

void Graph::addUpdate(Value* param, Value* v) {
  KILN_ASSERT(param != nullptr && v != nullptr, "null update");
  KILN_CHECK(param->kind == ValueKind::Param, "update of %{}: only parameters can be updated", param->name);
  KILN_CHECK(param->type == v->type, "update of %{}: the new value has type {}, the parameter {}", param->name,
             v->type.str(), param->type.str());
  for (const Update& u : updates_)
    KILN_CHECK(u.param != param, "parameter %{} is updated twice", param->name);
  updates_.push_back(Update{param, v});
}

Value* Graph::addNode(OpKind op, std::vector<Value*> operands, std::span<const NamedAttr> attrs, SourceLoc loc,
                      std::string resultName) {
  const OpInfo& info = opInfo(op);
  std::vector<AttrValue> resolved = resolveAttrs(info, attrs, loc);
  std::vector<TensorType> types;
  for (Value* v : operands) {
    KILN_ASSERT(v != nullptr, "null operand of op '{}'", info.name);
    types.push_back(v->type);
  }
  TensorType result = inferType(info, types, resolved, loc);
  return addNodeRaw(op, std::move(operands), std::move(resolved), std::move(result), std::move(loc),
                    std::move(resultName));
}

Value* Graph::addNodeRaw(OpKind op, std::vector<Value*> operands, std::vector<AttrValue> attrs,
                         TensorType resultType, SourceLoc loc, std::string resultName) {
  if (!resultName.empty()) claimName(resultName, loc);
  auto node = std::make_unique<Node>();
  node->op = op;
  node->operands = std::move(operands);
  node->attrs = std::move(attrs);
  node->loc = std::move(loc);
  node->result = newValue(std::move(resultType), ValueKind::Result, std::move(resultName));
  node->result->producer = node.get();
  nodes_.push_back(std::move(node));
  return nodes_.back()->result;
}

void Graph::nameValue(Value* v, const std::string& name) {
  KILN_ASSERT(v->kind == ValueKind::Result && v->name.empty(), "only an unnamed node result can be named ('{}')",
              name);
  claimName(name, v->producer ? v->producer->loc : SourceLoc{});
  v->name = name;
}

Value* Graph::findValue(std::string_view name) const {
  for (const auto& v : values_)
    if (v->name == name) return v.get();
  return nullptr;
}

const Value* Graph::findInput(std::string_view name) const {
  for (const Value* v : inputs_)
    if (v->name == name) return v;
  return nullptr;
}

const Param* Graph::findParam(std::string_view name) const {
  for (const Param& p : params_)
    if (p.value->name == name) return &p;
  return nullptr;
}

const Output* Graph::findOutput(std::string_view name) const {
  for (const Output& o : outputs_)
    if (o.name == name) return &o;
  return nullptr;
}

Graph Graph::clone() const {
  Graph g(name_);
  std::unordered_map<const Value*, Value*> map;
  for (Value* v : inputs_) map[v] = g.addInput(v->name, v->type, v->loc);
  for (const Param& p : params_) map[p.value] = g.addParam(p.value->name, p.value->type, p.init, p.value->loc);
  for (const auto& n : nodes_) {
    std::vector<Value*> ops;
    for (Value* v : n->operands) {
      auto it = map.find(v);
      KILN_ASSERT(it != map.end(), "operand of '{}' is not defined before use", n->info().name);
      ops.push_back(it->second);
    }
    map[n->result] = g.addNodeRaw(n->op, std::move(ops), n->attrs, n->result->type, n->loc, n->result->name);
    g.nodes_.back()->group = n->group;
  }
  for (const Output& o : outputs_) g.addOutput(o.name, map.at(o.value));
  for (const Update& u : updates_) g.addUpdate(map.at(u.param), map.at(u.value));
  g.groups_ = groups_;
  if (plan_) {
    MemoryPlan plan = *plan_;
    for (BufferSlot& s : plan.slots) s.value = map.at(s.value);
    g.plan_ = std::move(plan);
  }
  return g;
}

int32_t Graph::addGroup(KernelGroup group) {
  groups_.push_back(std::move(group));
  return static_cast<int32_t>(groups_.size() - 1);
}

void Graph::clearSchedule() {
  groups_.clear();
  plan_.reset();
  for (auto& n : nodes_) n->group = -1;
}

std::string_view kernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::Loop: return "loop";
    case KernelKind::Reduction: return "reduction";
    case KernelKind::Contraction: return "contraction";
    case KernelKind::Multi: return "multi";
    case KernelKind::Op: return "op";
  }
  return "?";
}

bool kernelKindFromName(std::string_view name, KernelKind& out) {
  for (KernelKind k : {KernelKind::Loop, KernelKind::Reduction, KernelKind::Contraction, KernelKind::Multi,
                       KernelKind::Op})
    if (kernelKindName(k) == name) {
      out = k;
      return true;
    }
  return false;
}

}  // namespace kiln::ir
