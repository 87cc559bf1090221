#include "ir/OpInfo.h"

#include "ir/ShapeRules.h"

#include <algorithm>
#include <charconv>

namespace kiln::ir {

std::string_view attrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Ints: return "ints";
    case AttrKind::Floats: return "floats";
    case AttrKind::Bool: return "bool";
    case AttrKind::DType: return "dtype";
    case AttrKind::Str: return "str";
  }
  return "?";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

int64_t parseIntLiteral(std::string_view s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_ASSERT(r.ec == std::errc() && r.ptr == s.data() + s.size(), "bad int default '{}' in Ops.def", s);
  return v;
}

double parseFloatLiteral(std::string_view s) {
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_ASSERT(r.ec == std::errc() && r.ptr == s.data() + s.size(), "bad float default '{}' in Ops.def", s);
  return v;
}

template <typename T, typename F>
std::vector<T> parseList(std::string_view s, F parseOne) {
  KILN_ASSERT(s.size() >= 2 && s.front() == '[' && s.back() == ']', "bad list default '{}'", s);
  s = s.substr(1, s.size() - 2);
  std::vector<T> out;
  while (!trim(s).empty()) {
    size_t comma = s.find(',');
    out.push_back(parseOne(trim(s.substr(0, comma))));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

AttrValue parseDefault(AttrKind kind, std::string_view s) {
  switch (kind) {
    case AttrKind::Int: return parseIntLiteral(s);
    case AttrKind::Float: return parseFloatLiteral(s);
    case AttrKind::Ints: return parseList<int64_t>(s, parseIntLiteral);
    case AttrKind::Floats: return parseList<double>(s, parseFloatLiteral);
    case AttrKind::Bool:
      KILN_ASSERT(s == "true" || s == "false", "bad bool default '{}'", s);
      return s == "true";
    case AttrKind::DType: {
      auto t = parseDType(s);
      KILN_ASSERT(t.has_value(), "bad dtype default '{}'", s);
      return *t;
    }
    case AttrKind::Str: return std::string(s);
  }
  return int64_t{0};
}

// Splits the Ops.def schema string "a:int,b:ints=[1,2],c:str{x|y}=x" at top-level commas.
std::vector<AttrSpec> parseSchema(std::string_view schema) {
  std::vector<AttrSpec> specs;
  size_t i = 0;
  while (i < schema.size()) {
    int depth = 0;
    size_t j = i;
    for (; j < schema.size(); ++j) {
      char c = schema[j];
      if (c == '[' || c == '{') ++depth;
      if (c == ']' || c == '}') --depth;
      if (c == ',' && depth == 0) break;
    }
    std::string_view item = trim(schema.substr(i, j - i));
    i = j + 1;
    AttrSpec spec;
    size_t colon = item.find(':');
    KILN_ASSERT(colon != std::string_view::npos, "bad attribute schema item '{}'", item);
    spec.name = std::string(item.substr(0, colon));
    std::string_view rest = item.substr(colon + 1);
    std::string_view defaultText;
    size_t eq = rest.find('=');
    if (eq != std::string_view::npos) {
      defaultText = rest.substr(eq + 1);
      rest = rest.substr(0, eq);
      spec.hasDefault = true;
    }
    size_t brace = rest.find('{');
    std::string_view kindText = rest.substr(0, brace);
    if (brace != std::string_view::npos) {
      std::string_view words = rest.substr(brace + 1, rest.size() - brace - 2);
      while (!words.empty()) {
        size_t bar = words.find('|');
        spec.choices.emplace_back(words.substr(0, bar));
        if (bar == std::string_view::npos) break;
        words.remove_prefix(bar + 1);
      }
    }
    bool found = false;
    for (AttrKind k : {AttrKind::Int, AttrKind::Float, AttrKind::Ints, AttrKind::Floats, AttrKind::Bool,
                       AttrKind::DType, AttrKind::Str}) {
      if (attrKindName(k) == kindText) {
        spec.kind = k;
        found = true;
      }
    }
    KILN_ASSERT(found, "unknown attribute kind '{}' in Ops.def", kindText);
    if (spec.hasDefault) spec.defaultValue = parseDefault(spec.kind, defaultText);
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
  std::string_view group;
#define KILN_OP_GROUP(title) group = title;
#define KILN_OP(Enum, Name, MinOps, MaxOps, Flags, Schema, Infer, Doc)                                       \
  table.push_back(OpInfo{OpKind::Enum, Name, MinOps, MaxOps, static_cast<uint32_t>(Flags), parseSchema(Schema), \
                         &rules::Infer, Doc, group});
#include "ir/Ops.def"
#undef KILN_OP
#undef KILN_OP_GROUP
  return table;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = buildTable();
  return t;
}

}  // namespace

int OpInfo::attrIndex(std::string_view attrName) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == attrName) return static_cast<int>(i);
  return -1;
}

const OpInfo& opInfo(OpKind k) { return table()[static_cast<size_t>(k)]; }
std::string_view opName(OpKind k) { return opInfo(k).name; }
std::span<const OpInfo> allOps() { return table(); }

std::optional<OpKind> opFromName(std::string_view name) {
  for (const OpInfo& info : table())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

std::vector<std::string_view> flagNames(uint32_t flags) {
  static constexpr std::pair<OpFlag, std::string_view> kNames[] = {
      {kElementwise, "elementwise"}, {kUnary, "unary"},       {kBinary, "binary"},         {kTernary, "ternary"},
      {kCommutative, "commutative"}, {kComparison, "comparison"}, {kReduction, "reduction"}, {kMovement, "movement"},
      {kContraction, "contraction"}, {kWindow, "window"},     {kSource, "source"},         {kRandom, "random"},
      {kComposite, "composite"},     {kLoss, "loss"}};
  std::vector<std::string_view> out;
  for (const auto& [flag, name] : kNames)
    if (flags & flag) out.push_back(name);
  return out;
}

std::string describeOp(const OpInfo& info, std::span<const TensorType> operands) {
  std::vector<std::string> types;
  for (const TensorType& t : operands) types.push_back(t.str());
  return fmt::format("op '{}' with operands ({})", info.name, fmt::join(types, ", "));
}

const AttrValue& InferContext::get(std::string_view n) const {
  int i = info.attrIndex(n);
  KILN_ASSERT(i >= 0 && static_cast<size_t>(i) < attrs.size(), "op '{}' has no attribute '{}'", info.name, n);
  return attrs[i];
}
int64_t InferContext::getInt(std::string_view n) const { return std::get<int64_t>(get(n)); }
double InferContext::getFloat(std::string_view n) const { return std::get<double>(get(n)); }
const Ints& InferContext::getInts(std::string_view n) const { return std::get<Ints>(get(n)); }
const Floats& InferContext::getFloats(std::string_view n) const { return std::get<Floats>(get(n)); }
bool InferContext::getBool(std::string_view n) const { return std::get<bool>(get(n)); }
DType InferContext::getDType(std::string_view n) const { return std::get<DType>(get(n)); }
const std::string& InferContext::getStr(std::string_view n) const { return std::get<std::string>(get(n)); }

void InferContext::fail(const std::string& message) const {
  throw Error(loc, describeOp(info, operands) + ": " + message);
}

std::vector<AttrValue> resolveAttrs(const OpInfo& info, std::span<const NamedAttr> given, const SourceLoc& loc) {
  std::vector<AttrValue> out(info.attrs.size());
  std::vector<bool> set(info.attrs.size(), false);
  for (const NamedAttr& a : given) {
    int i = info.attrIndex(a.name);
    if (i < 0) {
      std::vector<std::string_view> names;
      for (const AttrSpec& s : info.attrs) names.push_back(s.name);
      throw Error(loc, fmt::format("op '{}' has no attribute '{}' (it has: {})", info.name, a.name,
                                   names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
    }
    const AttrSpec& spec = info.attrs[i];
    if (set[i]) throw Error(loc, fmt::format("op '{}': attribute '{}' given twice", info.name, a.name));
    AttrValue v = a.value;
    // An integer literal is a valid float, and an int list a valid float list.
    if (spec.kind == AttrKind::Float && kindOf(v) == AttrKind::Int) v = static_cast<double>(std::get<int64_t>(v));
    if (spec.kind == AttrKind::Floats && kindOf(v) == AttrKind::Ints) {
      const Ints& iv = std::get<Ints>(v);
      v = Floats(iv.begin(), iv.end());
    }
    if (kindOf(v) != spec.kind)
      throw Error(loc, fmt::format("op '{}': attribute '{}' must be {}, got {}", info.name, a.name,
                                   attrKindName(spec.kind), attrKindName(kindOf(v))));
    if (!spec.choices.empty()) {
      const std::string& word = std::get<std::string>(v);
      if (std::find(spec.choices.begin(), spec.choices.end(), word) == spec.choices.end())
        throw Error(loc, fmt::format("op '{}': attribute '{}' is \"{}\", expected one of {}", info.name, a.name,
                                     word, fmt::join(spec.choices, ", ")));
    }
    out[i] = std::move(v);
    set[i] = true;
  }
  for (size_t i = 0; i < info.attrs.size(); ++i) {
    if (set[i]) continue;
    if (!info.attrs[i].hasDefault)
      throw Error(loc, fmt::format("op '{}': missing required attribute '{}' ({})", info.name, info.attrs[i].name,
                                   attrKindName(info.attrs[i].kind)));
    out[i] = info.attrs[i].defaultValue;
  }
  return out;
}

TensorType inferType(const OpInfo& info, std::span<const TensorType> operands, std::span<const AttrValue> attrs,
                     const SourceLoc& loc) {
  int n = static_cast<int>(operands.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands)) {
    std::string expected = info.minOperands == info.maxOperands ? fmt::format("{}", info.minOperands)
                           : info.maxOperands < 0 ? fmt::format("at least {}", info.minOperands)
                                                  : fmt::format("{} to {}", info.minOperands, info.maxOperands);
    throw Error(loc, fmt::format("{}: expects {} operand{}, got {}", describeOp(info, operands), expected,
                                 info.maxOperands == 1 && info.minOperands == 1 ? "" : "s", n));
  }
  KILN_ASSERT(attrs.size() == info.attrs.size(), "op '{}': {} attributes for a schema of {}", info.name,
              attrs.size(), info.attrs.size());
  InferContext ctx{info, operands, attrs, loc};
  TensorType result = info.infer(ctx);
  rules::checkResultSize(ctx, result);
  return result;
}

}  // namespace kiln::ir
