#include "ir/Printer.h"

#include "ir/Lexer.h"

#include <fmt/format.h>

#include <bit>

namespace kiln::ir {

namespace {

// Defaults are omitted only when the value is the same bits: -0.0 == 0.0 and NaN != NaN under
// operator==, but the text must round-trip exactly.
bool sameBits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

bool sameAttr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* d = std::get_if<double>(&a)) return sameBits(*d, std::get<double>(b));
  if (const auto* f = std::get_if<Floats>(&a)) {
    const Floats& g = std::get<Floats>(b);
    if (f->size() != g.size()) return false;
    for (size_t i = 0; i < f->size(); ++i)
      if (!sameBits((*f)[i], g[i])) return false;
    return true;
  }
  return a == b;
}

std::string printLoc(const SourceLoc& loc, const PrintOptions& opts) {
  if (!opts.locations || !loc.known()) return {};
  return fmt::format(" loc({}:{}:{})", text::quote(loc.file), loc.line, loc.col);
}

std::string printInitializer(const Initializer& init) {
  using K = Initializer::Kind;
  switch (init.kind) {
    case K::Zeros: return "zeros";
    case K::Ones: return "ones";
    case K::Constant: return fmt::format("constant(value={})", text::formatFloat(init.a));
    case K::Uniform:
      return fmt::format("uniform(low={}, high={}, seed={})", text::formatFloat(init.a), text::formatFloat(init.b),
                         init.seed);
    case K::Normal:
      return fmt::format("normal(mean={}, std={}, seed={})", text::formatFloat(init.a), text::formatFloat(init.b),
                         init.seed);
  }
  return "?";
}

std::string printAttrs(const Node& n) {
  const OpInfo& info = n.info();
  std::vector<std::string> parts;
  for (size_t i = 0; i < info.attrs.size() && i < n.attrs.size(); ++i) {
    const AttrSpec& spec = info.attrs[i];
    if (spec.hasDefault && sameAttr(n.attrs[i], spec.defaultValue)) continue;
    parts.push_back(fmt::format("{}={}", spec.name, printAttrValue(n.attrs[i])));
  }
  if (parts.empty()) return {};
  return fmt::format(" {{{}}}", fmt::join(parts, ", "));
}

}  // namespace

std::string printAttrValue(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return fmt::format("{}", x);
        } else if constexpr (std::is_same_v<T, double>) {
          return text::formatFloat(x);
        } else if constexpr (std::is_same_v<T, Ints>) {
          return fmt::format("[{}]", fmt::join(x, ","));
        } else if constexpr (std::is_same_v<T, Floats>) {
          std::vector<std::string> items;
          items.reserve(x.size());
          for (double d : x) items.push_back(text::formatFloat(d));
          return fmt::format("[{}]", fmt::join(items, ","));
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(dtypeName(x));
        } else {
          return text::quote(x);
        }
      },
      v);
}

std::string printGraph(const Graph& g, const PrintOptions& opts) {
  text::ValueNames names(g);
  auto ref = [&](const Value* v) { return v ? "%" + names.of(v) : std::string("%<null>"); };
  std::string out = fmt::format("graph @{} {{\n", g.name());
  for (const Value* v : g.inputs())
    out += fmt::format("  input {} : {}{}\n", ref(v), v->type.str(), printLoc(v->loc, opts));
  for (const Param& p : g.params())
    out += fmt::format("  param {} : {} = {}{}\n", ref(p.value), p.value->type.str(), printInitializer(p.init),
                       printLoc(p.value->loc, opts));
  // Nodes of one fusion group are consecutive (the verifier checks it); each group prints as a
  // `kernel` block with its notes as comments.
  int32_t openGroup = -1;
  auto closeGroup = [&] {
    if (openGroup >= 0) out += "  }\n";
    openGroup = -1;
  };
  for (const auto& n : g.nodes()) {
    if (n->group != openGroup) {
      closeGroup();
      if (n->group >= 0 && static_cast<size_t>(n->group) < g.groups().size()) {
        const KernelGroup& k = g.groups()[n->group];
        out += fmt::format("  kernel @{} {} {{\n", k.name, kernelKindName(k.kind));
        for (const std::string& note : k.notes) out += fmt::format("    # {}\n", note);
        openGroup = n->group;
      }
    }
    std::vector<std::string> operands;
    for (const Value* v : n->operands) operands.push_back(ref(v));
    std::string type = n->result ? n->result->type.str() : "?";
    out += fmt::format("{}  {} = {}({}){} : {}{}\n", openGroup >= 0 ? "  " : "", ref(n->result), n->info().name,
                       fmt::join(operands, ", "), printAttrs(*n), type, printLoc(n->loc, opts));
  }
  closeGroup();
  for (const Output& o : g.outputs()) out += fmt::format("  output %{} = {}\n", o.name, ref(o.value));
  for (const Update& u : g.updates()) out += fmt::format("  update {} = {}\n", ref(u.param), ref(u.value));
  if (const MemoryPlan* plan = g.plan()) {
    out += fmt::format("  plan arena={} align={} {{\n", plan->arenaBytes, plan->alignment);
    for (const BufferSlot& s : plan->slots) out += fmt::format("    {} at {}\n", ref(s.value), s.offset);
    out += "  }\n";
  }
  out += "}\n";
  return out;
}

}  // namespace kiln::ir
