#include "ir/Verifier.h"

#include "ir/Lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {

namespace text {

std::string initializerProblem(const Initializer& init, const TensorType& type) {
  using K = Initializer::Kind;
  switch (init.kind) {
    case K::Zeros:
    case K::Ones:
    case K::Constant: return {};
    case K::Uniform:
    case K::Normal: break;
    default: return "unknown initializer kind";
  }
  std::string_view kind = initializerKindName(init.kind);
  if (!isFloat(type.dtype))
    return fmt::format("a {} initializer needs a float parameter, not {}", kind, dtypeName(type.dtype));
  if (!std::isfinite(init.a) || !std::isfinite(init.b)) return fmt::format("{} arguments must be finite", kind);
  if (init.kind == K::Uniform && init.a > init.b)
    return fmt::format("uniform low {} is greater than high {}", formatFloat(init.a), formatFloat(init.b));
  if (init.kind == K::Normal && init.b < 0) return fmt::format("normal std {} is negative", formatFloat(init.b));
  return {};
}

}  // namespace text

namespace {

std::string prefix(const SourceLoc& loc) { return loc.known() ? loc.str() + ": " : std::string(); }

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), names_(g) {}

  std::vector<std::string> run() {
    if (!text::isValidName(g_.name()))
      problem(fmt::format("graph name '{}' is not a valid name (letters, digits, '_' and '.')",
                          text::excerpt(g_.name())));
    for (const Value* v : g_.inputs())
      if (v) all_.insert(v);
    for (const Param& p : g_.params())
      if (p.value) all_.insert(p.value);
    for (const auto& n : g_.nodes())
      if (n && n->result) all_.insert(n->result);

    for (const Value* v : g_.inputs()) signatureValue(v, ValueKind::Input, "input", v ? v->loc : SourceLoc{});
    for (const Param& p : g_.params()) {
      if (!signatureValue(p.value, ValueKind::Param, "param", p.value ? p.value->loc : SourceLoc{})) continue;
      std::string why = text::initializerProblem(p.init, p.value->type);
      if (!why.empty()) problem(fmt::format("{}param %{} : {}: {}", prefix(p.value->loc), p.value->name, p.value->type.str(), why));
    }
    for (const auto& n : g_.nodes()) {
      if (!n) {
        problem("null node in the node list");
        continue;
      }
      node(*n);
    }
    std::unordered_set<std::string> outputNames;
    for (const Output& o : g_.outputs()) {
      if (!text::isValidName(o.name))
        problem(fmt::format("output name '{}' is not a valid name", text::excerpt(o.name)));
      if (!outputNames.insert(o.name).second) problem(fmt::format("duplicate output %{}", o.name));
      if (!o.value)
        problem(fmt::format("output %{} has no value", o.name));
      else if (!defined_.count(o.value))
        problem(fmt::format("output %{} refers to a value that is not defined in this graph", o.name));
    }
    std::unordered_set<const Value*> updated;
    for (const Update& u : g_.updates()) {
      if (!u.param || !u.value || !defined_.count(u.param) || !defined_.count(u.value)) {
        problem("an update refers to a value that is not defined in this graph");
        continue;
      }
      if (u.param->kind != ValueKind::Param) problem(fmt::format("update of %{}: not a parameter", u.param->name));
      if (!(u.param->type == u.value->type))
        problem(fmt::format("update of %{}: the new value has type {}, the parameter {}", u.param->name,
                            u.value->type.str(), u.param->type.str()));
      if (!updated.insert(u.param).second) problem(fmt::format("parameter %{} is updated twice", u.param->name));
    }
    groups();
    plan();
    return std::move(problems_);
  }

 private:
  void problem(std::string message) { problems_.push_back(std::move(message)); }

  // Checks a value's name (valid, unique) and records it; unnamed results are numbered by the printer.
  void claim(const Value* v, const std::string& what) {
    if (v->name.empty()) return;
    if (!text::isValidName(v->name))
      problem(fmt::format("{}: invalid name '{}'", what, text::excerpt(v->name)));
    else if (!usedNames_.insert(v->name).second)
      problem(fmt::format("{}: the name %{} is defined twice", what, v->name));
  }

  bool signatureValue(const Value* v, ValueKind kind, std::string_view what, const SourceLoc& loc) {
    if (!v) {
      problem(fmt::format("null {} value", what));
      return false;
    }
    std::string desc = fmt::format("{}{} %{} : {}", prefix(loc), what, v->name, v->type.str());
    if (v->kind != kind) problem(fmt::format("{}: the value is not marked as {}", desc, what));
    if (v->name.empty()) problem(fmt::format("{}: {} without a name", desc, what));
    claim(v, desc);
    std::string why = shapeProblem(v->type.shape);
    if (!why.empty()) problem(fmt::format("{}: {}", desc, why));
    defined_.insert(v);
    return why.empty();
  }

  void node(const Node& n) {
    if (static_cast<size_t>(n.op) >= static_cast<size_t>(kNumOps)) {
      problem(fmt::format("{}node with an invalid op kind {}", prefix(n.loc), static_cast<int>(n.op)));
      return;
    }
    const OpInfo& info = n.info();
    std::vector<TensorType> types;
    for (const Value* v : n.operands)
      if (v) types.push_back(v->type);
    std::string resultName = n.result ? "%" + names_.of(n.result) : std::string("<no result>");
    std::string desc = fmt::format("{}{} = {}", prefix(n.loc), resultName, describeOp(info, types));
    auto bad = [&](const std::string& why) { problem(fmt::format("{}: {}", desc, why)); };

    bool ok = true;
    for (size_t i = 0; i < n.operands.size(); ++i) {
      const Value* v = n.operands[i];
      if (!v) {
        bad(fmt::format("operand {} is null", i));
        ok = false;
      } else if (!all_.count(v)) {
        bad(fmt::format("operand {} (%{}) does not belong to this graph", i, names_.of(v)));
        ok = false;
      } else if (!defined_.count(v)) {
        bad(fmt::format("operand {} (%{}) is used before it is defined", i, names_.of(v)));
        ok = false;
      }
    }
    if (!attrsOk(n, bad)) ok = false;
    if (!n.result) {
      bad("the node has no result value");
      return;
    }
    if (n.result->producer != &n || n.result->kind != ValueKind::Result)
      bad("the result value does not point back to this node");
    claim(n.result, desc);
    defined_.insert(n.result);
    if (!ok) return;
    try {
      TensorType inferred = inferType(info, types, n.attrs, {});
      if (!(inferred == n.result->type))
        bad(fmt::format("result type {} does not match the inferred type {}", n.result->type.str(), inferred.str()));
    } catch (const Error& e) {
      // inferType's message already names the op and its operands.
      problem(fmt::format("{}{} = {}", prefix(n.loc), resultName, e.what()));
    }
  }

  template <typename Bad>
  bool attrsOk(const Node& n, Bad&& bad) {
    const OpInfo& info = n.info();
    if (n.attrs.size() != info.attrs.size()) {
      bad(fmt::format("{} attributes for a schema of {}", n.attrs.size(), info.attrs.size()));
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      const AttrSpec& spec = info.attrs[i];
      if (kindOf(n.attrs[i]) != spec.kind) {
        bad(fmt::format("attribute '{}' must be {}, got {}", spec.name, attrKindName(spec.kind),
                        attrKindName(kindOf(n.attrs[i]))));
        ok = false;
      } else if (!spec.choices.empty()) {
        const std::string& word = std::get<std::string>(n.attrs[i]);
        if (std::find(spec.choices.begin(), spec.choices.end(), word) == spec.choices.end()) {
          bad(fmt::format("attribute '{}' is \"{}\", expected one of {}", spec.name, text::excerpt(word),
                          fmt::join(spec.choices, ", ")));
          ok = false;
        }
      }
    }
    return ok;
  }

  // Fusion groups: valid indices, unique names, each group's nodes consecutive and non-empty.
  void groups() {
    const auto& groups = g_.groups();
    std::unordered_set<std::string> names;
    for (const KernelGroup& k : groups)
      if (!text::isValidName(k.name) || !names.insert(k.name).second)
        problem(fmt::format("kernel name '{}' is invalid or used twice", text::excerpt(k.name)));
    std::vector<int> seen(groups.size(), 0);  // 0: not yet, 1: open, 2: closed
    int32_t open = -1;
    for (const auto& n : g_.nodes()) {
      if (!n) continue;
      if (n->group != open && open >= 0) seen[open] = 2;
      if (n->group < -1 || n->group >= static_cast<int32_t>(groups.size())) {
        problem(fmt::format("{}%{}: kernel group {} does not exist", prefix(n->loc), names_.of(n->result), n->group));
        open = -1;
        continue;
      }
      if (n->group >= 0 && n->group != open) {
        if (seen[n->group] == 2)
          problem(fmt::format("{}%{}: the nodes of kernel @{} are not consecutive", prefix(n->loc),
                              names_.of(n->result), groups[n->group].name));
        seen[n->group] = 1;
      }
      open = n->group;
    }
    for (size_t i = 0; i < groups.size(); ++i)
      if (!seen[i]) problem(fmt::format("kernel @{} has no nodes", groups[i].name));
  }

  // Memory plan: slots name defined node results once, at aligned offsets inside the arena. Whether
  // live buffers overlap is the plan pass's validator's business (it needs liveness).
  void plan() {
    const MemoryPlan* plan = g_.plan();
    if (!plan) return;
    if (plan->alignment <= 0 || (plan->alignment & (plan->alignment - 1)) != 0)
      problem(fmt::format("plan: alignment {} is not a power of two", plan->alignment));
    if (plan->arenaBytes < 0) problem(fmt::format("plan: negative arena size {}", plan->arenaBytes));
    std::unordered_set<const Value*> placed;
    for (const BufferSlot& s : plan->slots) {
      if (!s.value || !defined_.count(s.value)) {
        problem("plan: a slot refers to a value that is not defined in this graph");
        continue;
      }
      std::string what = "%" + names_.of(s.value);
      if (s.value->kind != ValueKind::Result) problem(fmt::format("plan: {} is not a node result", what));
      if (!placed.insert(s.value).second) problem(fmt::format("plan: {} is placed twice", what));
      int64_t bytes = s.value->type.numel() * static_cast<int64_t>(dtypeSize(s.value->type.dtype));
      if (s.offset < 0 || s.offset > plan->arenaBytes - bytes)
        problem(fmt::format("plan: {} ({} bytes at offset {}) lies outside the arena of {} bytes", what, bytes,
                            s.offset, plan->arenaBytes));
      else if (plan->alignment > 0 && s.offset % plan->alignment != 0)
        problem(fmt::format("plan: {} at offset {} is not {}-byte aligned", what, s.offset, plan->alignment));
    }
  }

  const Graph& g_;
  text::ValueNames names_;
  std::unordered_set<const Value*> all_;
  std::unordered_set<const Value*> defined_;
  std::unordered_set<std::string> usedNames_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> verifyGraph(const Graph& g) { return Verifier(g).run(); }

void verifyOrThrow(const Graph& g) {
  std::vector<std::string> problems = verifyGraph(g);
  if (problems.empty()) return;
  throw Error(fmt::format("{}", fmt::join(problems, "\n")));
}

}  // namespace kiln::ir
