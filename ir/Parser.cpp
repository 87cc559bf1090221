// A hand-written recursive-descent parser for .kir (grammar in docs/IR.md). The grammar has no
// nesting beyond flat lists, so the parser never recurses on its input: stack use is constant and
// memory grows with the input only. Every node is type-checked as it is read, so a shape error
// points at the node's line in the .kir file, not at the loc(...) it carries.
#include "ir/Parser.h"

#include "support/File.h"

#include "ir/Lexer.h"
#include "ir/Verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <optional>
#include <unordered_map>

namespace kiln::ir {

namespace {

using text::Tok;
using text::Token;

class Parser {
 public:
  Parser(std::string_view src, std::string file) : lex_(src, std::move(file)) { bump(); }

  Graph parse() {
    expectWord("graph", "'graph'");
    if (tok_.kind != Tok::Global) fail(fmt::format("expected a graph name '@name', found {}", text::describe(tok_)));
    Graph g(tok_.text);
    bump();
    expect(Tok::LBrace, "'{' after the graph name");
    while (tok_.kind != Tok::RBrace) statement(g);
    bump();
    if (tok_.kind != Tok::End) fail(fmt::format("expected end of file after the graph, found {}", text::describe(tok_)));
    return g;
  }

 private:
  // ---- tokens --------------------------------------------------------------------------------
  void bump() { tok_ = lex_.next(); }
  SourceLoc here(const Token& t) const { return lex_.locAt(t.line, t.col); }
  [[noreturn]] void failAt(const Token& t, const std::string& message) const { throw Error(here(t), message); }
  [[noreturn]] void fail(const std::string& message) const { failAt(tok_, message); }
  bool isWord(std::string_view w) const { return tok_.kind == Tok::Word && tok_.text == w; }

  Token expect(Tok kind, std::string_view what) {
    if (tok_.kind != kind) fail(fmt::format("expected {}, found {}", what, text::describe(tok_)));
    Token t = tok_;
    bump();
    return t;
  }
  void expectWord(std::string_view word, std::string_view what) {
    if (!isWord(word)) fail(fmt::format("expected {}, found {}", what, text::describe(tok_)));
    bump();
  }

  // ---- statements ----------------------------------------------------------------------------
  void statement(Graph& g) {
    if (isWord("input")) return input(g);
    if (isWord("param")) return param(g);
    if (isWord("output")) return output(g);
    if (isWord("update")) return update(g);
    if (isWord("kernel")) return kernel(g);
    if (isWord("plan")) return plan(g);
    if (tok_.kind == Tok::Local) return node(g);
    fail(fmt::format("expected 'input', 'param', 'output', 'update', 'kernel', 'plan', '%name = op(...)' or '}}', "
                     "found {}",
                     text::describe(tok_)));
  }

  // kernel @name kind { nodes }
  void kernel(Graph& g) {
    bump();
    Token name = tok_;
    if (tok_.kind != Tok::Global) fail(fmt::format("expected a kernel name '@name', found {}", text::describe(tok_)));
    for (const KernelGroup& k : g.groups())
      if (k.name == name.text) failAt(name, fmt::format("duplicate kernel @{}", name.text));
    bump();
    KernelGroup group{name.text, KernelKind::Loop, {}};
    if (tok_.kind != Tok::Word || !kernelKindFromName(tok_.text, group.kind))
      fail(fmt::format("expected a kernel kind (loop, reduction, contraction, multi or op), found {}",
                       text::describe(tok_)));
    bump();
    expect(Tok::LBrace, "'{' after the kernel kind");
    int32_t index = g.addGroup(std::move(group));
    if (tok_.kind == Tok::RBrace) failAt(name, fmt::format("kernel @{} has no nodes", name.text));
    while (tok_.kind != Tok::RBrace) {
      if (tok_.kind != Tok::Local)
        fail(fmt::format("expected '%name = op(...)' or '}}' inside kernel @{}, found {}", name.text,
                         text::describe(tok_)));
      node(g);
      g.mutableNodes().back()->group = index;
    }
    bump();
  }

  // plan arena=N align=A { %value at offset ... }
  void plan(Graph& g) {
    Token start = tok_;
    bump();
    if (g.plan()) failAt(start, "a graph has at most one plan");
    MemoryPlan plan;
    expectWord("arena", "'arena='");
    expect(Tok::Equal, "'=' after 'arena'");
    plan.arenaBytes = parseInt("the arena size in bytes");
    expectWord("align", "'align='");
    expect(Tok::Equal, "'=' after 'align'");
    plan.alignment = parseInt("the alignment in bytes");
    expect(Tok::LBrace, "'{' after the plan's sizes");
    while (tok_.kind != Tok::RBrace) {
      Value* v = use();
      expectWord("at", "'at' and the buffer's byte offset");
      plan.slots.push_back({v, parseInt("a byte offset")});
    }
    bump();
    g.setPlan(std::move(plan));
  }

  Token newName() {
    Token name = expect(Tok::Local, "a value name '%name'");
    auto it = defs_.find(name.text);
    if (it != defs_.end())
      failAt(name, fmt::format("redefinition of value %{} (first defined at line {})", name.text,
                               it->second.first.line));
    return name;
  }
  void define(const Token& name, Value* v) { defs_.emplace(name.text, std::make_pair(name, v)); }

  Value* use() {
    Token t = expect(Tok::Local, "a value '%name'");
    auto it = defs_.find(t.text);
    if (it == defs_.end()) failAt(t, fmt::format("use of undefined value %{}", t.text));
    return it->second.second;
  }

  void input(Graph& g) {
    bump();
    Token name = newName();
    expect(Tok::Colon, "':' and a type");
    TensorType type = parseType();
    SourceLoc loc = optLoc();
    define(name, g.addInput(name.text, type, loc));
  }

  void param(Graph& g) {
    bump();
    Token name = newName();
    expect(Tok::Colon, "':' and a type");
    TensorType type = parseType();
    expect(Tok::Equal, "'=' and an initializer");
    Token initTok = tok_;
    Initializer init = parseInitializer();
    std::string problem = text::initializerProblem(init, type);
    if (!problem.empty()) failAt(initTok, problem);
    SourceLoc loc = optLoc();
    define(name, g.addParam(name.text, type, init, loc));
  }

  void output(Graph& g) {
    bump();
    Token name = expect(Tok::Local, "an output name '%name'");
    if (g.findOutput(name.text)) failAt(name, fmt::format("duplicate output %{}", name.text));
    expect(Tok::Equal, "'=' and a value");
    g.addOutput(name.text, use());
  }

  void update(Graph& g) {
    bump();
    Token target = tok_;
    Value* param = use();
    expect(Tok::Equal, "'=' and the parameter's new value");
    Value* v = use();
    try {
      g.addUpdate(param, v);
    } catch (const Error& e) {
      failAt(target, e.what());
    }
  }

  void node(Graph& g) {
    Token name = newName();
    expect(Tok::Equal, "'=' after the value name");
    Token opTok = tok_;
    if (tok_.kind != Tok::Word) fail(fmt::format("expected an op name, found {}", text::describe(tok_)));
    std::optional<OpKind> op = opFromName(tok_.text);
    if (!op) fail(fmt::format("unknown op '{}'", text::excerpt(tok_.text)));
    const OpInfo& info = opInfo(*op);
    bump();
    expect(Tok::LParen, "'(' after the op name");
    std::vector<Value*> operands;
    if (tok_.kind != Tok::RParen) {
      operands.push_back(use());
      while (tok_.kind == Tok::Comma) {
        bump();
        operands.push_back(use());
      }
    }
    expect(Tok::RParen, "',' or ')' in the operand list");
    std::vector<NamedAttr> given;
    if (tok_.kind == Tok::LBrace) given = parseAttrs(info);
    std::vector<AttrValue> attrs = resolveAttrs(info, given, here(opTok));
    expect(Tok::Colon, "':' and the result type");
    Token typeTok = tok_;
    TensorType type = parseType();
    SourceLoc loc = optLoc();

    std::vector<TensorType> types;
    for (const Value* v : operands) types.push_back(v->type);
    TensorType inferred = inferType(info, types, attrs, here(name));
    if (!(inferred == type))
      failAt(typeTok, fmt::format("{}: result type {} does not match the inferred type {}", describeOp(info, types),
                                  type.str(), inferred.str()));
    // A purely numeric name is the printer's numbering of an unnamed value: keep the value
    // unnamed, so passes that add nodes get a clean sequential numbering when printed again.
    bool numbered = std::all_of(name.text.begin(), name.text.end(), [](char c) { return c >= '0' && c <= '9'; });
    define(name, g.addNodeRaw(*op, std::move(operands), std::move(attrs), type, loc, numbered ? "" : name.text));
  }

  // ---- pieces --------------------------------------------------------------------------------
  TensorType parseType() {
    if (tok_.kind != Tok::Word) fail(fmt::format("expected a type such as f32[2,3], found {}", text::describe(tok_)));
    std::optional<DType> dt = parseDType(tok_.text);
    if (!dt) fail(fmt::format("unknown element type '{}' (expected f32, f16, bf16, f64, i32, i64 or bool)",
                              text::excerpt(tok_.text)));
    bump();
    Token open = expect(Tok::LBracket, "'[' and the shape after the element type");
    Shape shape;
    if (tok_.kind != Tok::RBracket) {
      shape.push_back(parseInt("a dimension"));
      while (tok_.kind == Tok::Comma) {
        bump();
        shape.push_back(parseInt("a dimension"));
      }
    }
    expect(Tok::RBracket, "',' or ']' in the shape");
    std::string problem = shapeProblem(shape);
    if (!problem.empty()) failAt(open, problem);
    return TensorType{*dt, std::move(shape)};
  }

  SourceLoc optLoc() {
    if (!isWord("loc")) return {};
    bump();
    expect(Tok::LParen, "'(' after 'loc'");
    Token file = expect(Tok::String, "a quoted file name");
    expect(Tok::Colon, "':' and a line number");
    Token lineTok = tok_;
    int64_t line = parseInt("a line number");
    expect(Tok::Colon, "':' and a column number");
    Token colTok = tok_;
    int64_t col = parseInt("a column number");
    expect(Tok::RParen, "')' after the location");
    if (line < 1 || line > std::numeric_limits<int>::max()) failAt(lineTok, "line number out of range");
    if (col < 0 || col > std::numeric_limits<int>::max()) failAt(colTok, "column number out of range");
    return SourceLoc{file.text, static_cast<int>(line), static_cast<int>(col)};
  }

  int64_t parseInt(std::string_view what) {
    if (tok_.kind != Tok::Number) fail(fmt::format("expected {}, found {}", what, text::describe(tok_)));
    const std::string& s = tok_.text;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) fail(fmt::format("integer {} is out of range", text::excerpt(s)));
    if (ec != std::errc() || ptr != s.data() + s.size())
      fail(fmt::format("expected {} (an integer), found '{}'", what, text::excerpt(s)));
    bump();
    return v;
  }

  uint64_t parseSeed() {
    if (tok_.kind != Tok::Number) fail(fmt::format("expected a seed, found {}", text::describe(tok_)));
    const std::string& s = tok_.text;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size())
      fail(fmt::format("expected a seed (an integer from 0 to 2^64-1), found '{}'", text::excerpt(s)));
    bump();
    return v;
  }

  double parseFloat(std::string_view what) {
    bool word = tok_.kind == Tok::Word && (tok_.text == "inf" || tok_.text == "nan");
    if (tok_.kind != Tok::Number && !word) fail(fmt::format("expected {}, found {}", what, text::describe(tok_)));
    const std::string& s = tok_.text;
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) {
      // from_chars reports underflow to zero and overflow alike; only overflow is an error.
      errno = 0;
      v = std::strtod(s.c_str(), nullptr);
      if (std::isinf(v)) fail(fmt::format("number {} is out of range of f64", text::excerpt(s)));
    } else if (ec != std::errc() || ptr != s.data() + s.size()) {
      fail(fmt::format("expected {}, found '{}'", what, text::excerpt(s)));
    }
    bump();
    return v;
  }

  template <typename T, typename F>
  std::vector<T> parseList(F one) {
    expect(Tok::LBracket, "'['");
    std::vector<T> out;
    if (tok_.kind != Tok::RBracket) {
      out.push_back(one());
      while (tok_.kind == Tok::Comma) {
        bump();
        out.push_back(one());
      }
    }
    expect(Tok::RBracket, "',' or ']' in the list");
    return out;
  }

  AttrValue parseAttrValue(const AttrSpec& spec) {
    std::string what = fmt::format("a value of kind {} for '{}'", attrKindName(spec.kind), spec.name);
    switch (spec.kind) {
      case AttrKind::Int: return parseInt(what);
      case AttrKind::Float: return parseFloat(what);
      case AttrKind::Ints:
        if (tok_.kind != Tok::LBracket) break;
        return parseList<int64_t>([&] { return parseInt("an integer"); });
      case AttrKind::Floats:
        if (tok_.kind != Tok::LBracket) break;
        return parseList<double>([&] { return parseFloat("a number"); });
      case AttrKind::Bool:
        if (!isWord("true") && !isWord("false")) break;
        {
          bool b = tok_.text == "true";
          bump();
          return b;
        }
      case AttrKind::DType: {
        if (tok_.kind != Tok::Word) break;
        std::optional<DType> dt = parseDType(tok_.text);
        if (!dt) fail(fmt::format("unknown element type '{}' for '{}'", text::excerpt(tok_.text), spec.name));
        bump();
        return *dt;
      }
      case AttrKind::Str: {
        if (tok_.kind != Tok::String) break;
        if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), tok_.text) == spec.choices.end())
          fail(fmt::format("'{}' must be one of \"{}\", found \"{}\"", spec.name, fmt::join(spec.choices, "\", \""),
                           text::excerpt(tok_.text)));
        std::string s = tok_.text;
        bump();
        return s;
      }
    }
    fail(fmt::format("expected {}, found {}", what, text::describe(tok_)));
  }

  std::vector<NamedAttr> parseAttrs(const OpInfo& info) {
    bump();  // '{'
    std::vector<NamedAttr> out;
    while (tok_.kind != Tok::RBrace) {
      if (!out.empty()) expect(Tok::Comma, "',' or '}' in the attribute list");
      if (tok_.kind != Tok::Word) fail(fmt::format("expected an attribute name, found {}", text::describe(tok_)));
      int index = info.attrIndex(tok_.text);
      if (index < 0) {
        std::vector<std::string_view> names;
        for (const AttrSpec& s : info.attrs) names.push_back(s.name);
        fail(fmt::format("op '{}' has no attribute '{}' (it has: {})", info.name, text::excerpt(tok_.text),
                         names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
      }
      const AttrSpec& spec = info.attrs[index];
      for (const NamedAttr& a : out)
        if (a.name == spec.name) fail(fmt::format("attribute '{}' given twice", spec.name));
      bump();
      expect(Tok::Equal, "'=' after the attribute name");
      out.push_back(NamedAttr{spec.name, parseAttrValue(spec)});
    }
    bump();
    return out;
  }

  Initializer parseInitializer() {
    using K = Initializer::Kind;
    Initializer init;
    if (isWord("zeros") || isWord("ones")) {
      init.kind = tok_.text == "zeros" ? K::Zeros : K::Ones;
      bump();
      return init;
    }
    std::vector<std::string_view> keys;
    if (isWord("constant")) {
      init.kind = K::Constant, keys = {"value"};
    } else if (isWord("uniform")) {
      init.kind = K::Uniform, keys = {"low", "high", "seed"};
    } else if (isWord("normal")) {
      init.kind = K::Normal, keys = {"mean", "std", "seed"};
    } else {
      fail(fmt::format("expected an initializer (zeros, ones, constant, uniform or normal), found {}",
                       text::describe(tok_)));
    }
    std::string kindName = tok_.text;
    bump();
    expect(Tok::LParen, "'(' after the initializer");
    std::vector<bool> seen(keys.size(), false);
    while (tok_.kind != Tok::RParen) {
      if (std::find(seen.begin(), seen.end(), true) != seen.end()) expect(Tok::Comma, "',' or ')'");
      if (tok_.kind != Tok::Word) fail(fmt::format("expected an argument name, found {}", text::describe(tok_)));
      auto it = std::find(keys.begin(), keys.end(), tok_.text);
      if (it == keys.end())
        fail(fmt::format("'{}' has no argument '{}' (it has: {})", kindName, text::excerpt(tok_.text),
                         fmt::join(keys, ", ")));
      size_t i = it - keys.begin();
      if (seen[i]) fail(fmt::format("argument '{}' given twice", keys[i]));
      seen[i] = true;
      bump();
      expect(Tok::Equal, "'=' after the argument name");
      if (keys[i] == "seed")
        init.seed = parseSeed();
      else
        (i == 0 ? init.a : init.b) = parseFloat("a number");
    }
    for (size_t i = 0; i < keys.size(); ++i)
      if (!seen[i]) fail(fmt::format("'{}' needs argument '{}'", kindName, keys[i]));
    bump();
    return init;
  }

  text::Lexer lex_;
  Token tok_;
  std::unordered_map<std::string, std::pair<Token, Value*>> defs_;
};

}  // namespace

Graph parseGraph(std::string_view src, std::string_view fileName) {
  Graph g = Parser(src, std::string(fileName)).parse();
  // The parser checked every statement at its own line; this catches anything it missed.
  std::vector<std::string> problems = verifyGraph(g);
  if (!problems.empty())
    throw Error(fmt::format("{}: invalid graph:\n{}", fileName, fmt::join(problems, "\n")));
  return g;
}

Graph parseGraphFile(const std::string& path) { return parseGraph(readTextFile(path), path); }

}  // namespace kiln::ir
