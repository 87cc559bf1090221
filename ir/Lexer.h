// The lexical syntax of the .kir text form (docs/IR.md) and the checks the parser and the verifier
// share, so that what the printer writes the parser reads and both reject the same things: names,
// quoted strings, numbers, the printer's numbering of unnamed values, shape and initializer
// validity. Internal to kiln_ir (not a public contract).
#pragma once

#include "ir/Graph.h"
#include "support/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kiln::ir::text {

/// A value, graph or output name: `[A-Za-z0-9_.]+`.
bool isValidName(std::string_view name);
/// `"..."` with `\"`, `\\`, `\n`, `\t` and `\xHH` (other control bytes) escapes; other bytes are
/// copied, so UTF-8 passes through unchanged.
std::string quote(std::string_view s);
/// Shortest text that reads back as the same double: fmt's `{}`, with `nan` for every NaN.
std::string formatFloat(double v);
/// A short, printable rendering of untrusted text for error messages (escaped, truncated).
std::string excerpt(std::string_view s, size_t maxLen = 32);

/// Why `init` cannot initialize a parameter of type `type`, or "" when it can. Shared by the
/// verifier and the parser (which reports it at the parameter's line).
std::string initializerProblem(const Initializer& init, const TensorType& type);


/// The names the printer gives values: a value's own name, or for an unnamed node result the next
/// number 0, 1, 2… (in node order) that no value uses as its name.
class ValueNames {
 public:
  explicit ValueNames(const Graph& g);
  const std::string& of(const Value* v) const;

 private:
  std::unordered_map<const Value*, std::string> auto_;
};

enum class Tok : uint8_t {
  End,       // end of input
  Word,      // [A-Za-z_][A-Za-z0-9_]*  (keywords, op names, dtypes, true/false, inf/nan)
  Global,    // @name (text holds the name without '@')
  Local,     // %name (text holds the name without '%')
  Number,    // -?digits[.digits][e[+-]digits], -inf, -nan
  String,    // "..." (text holds the unescaped contents)
  LBrace, RBrace, LParen, RParen, LBracket, RBracket, Comma, Colon, Equal,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int line = 1;
  int col = 1;
};

/// Splits .kir text into tokens; skips whitespace and `#` comments. Malformed input (a stray
/// byte, an unterminated string, a bad escape) throws kiln::Error at its position.
class Lexer {
 public:
  Lexer(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}
  Token next();
  const std::string& file() const { return file_; }
  SourceLoc locAt(int line, int col) const { return SourceLoc{file_, line, col}; }

 private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool atEnd() const { return pos_ >= text_.size(); }
  void advance();
  void skipTrivia();
  std::string lexName();
  std::string lexString(int line, int col);
  Token lexNumber(int line, int col);
  [[noreturn]] void fail(int line, int col, const std::string& message) const;

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

/// "'word'", "end of file", "'%x'", … for "expected X, found Y" messages.
std::string describe(const Token& t);

}  // namespace kiln::ir::text
