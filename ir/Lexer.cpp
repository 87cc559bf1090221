#include "ir/Lexer.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace kiln::ir::text {

namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool isWordStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isWordChar(char c) { return isWordStart(c) || (c >= '0' && c <= '9'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool isValidName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!isNameChar(c)) return false;
  return true;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string formatFloat(double v) {
  if (std::isnan(v)) return "nan";
  return fmt::format("{}", v);
}

std::string excerpt(std::string_view s, size_t maxLen) {
  std::string out;
  for (char c : s.substr(0, maxLen)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return s.size() > maxLen ? out + "..." : out;
}

ValueNames::ValueNames(const Graph& g) {
  std::set<std::string, std::less<>> used;
  for (const Value* v : g.inputs())
    if (v) used.insert(v->name);
  for (const Param& p : g.params())
    if (p.value) used.insert(p.value->name);
  for (const auto& n : g.nodes())
    if (n && n->result && !n->result->name.empty()) used.insert(n->result->name);
  int64_t next = 0;
  for (const auto& n : g.nodes()) {
    if (!n || !n->result || !n->result->name.empty()) continue;
    std::string name;
    do name = std::to_string(next++);
    while (used.count(name));
    auto_[n->result] = std::move(name);
  }
}

const std::string& ValueNames::of(const Value* v) const {
  auto it = auto_.find(v);
  return it == auto_.end() ? v->name : it->second;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of file";
    case Tok::Global: return fmt::format("'@{}'", excerpt(t.text));
    case Tok::Local: return fmt::format("'%{}'", excerpt(t.text));
    case Tok::String: return fmt::format("string \"{}\"", excerpt(t.text));
    default: return fmt::format("'{}'", excerpt(t.text));
  }
}

void Lexer::fail(int line, int col, const std::string& message) const {
  throw Error(locAt(line, col), message);
}

void Lexer::advance() {
  if (text_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipTrivia() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '#') {
      while (!atEnd() && peek() != '\n') advance();
    } else {
      break;
    }
  }
}

std::string Lexer::lexName() {
  size_t start = pos_;
  while (!atEnd() && isNameChar(peek())) advance();
  return std::string(text_.substr(start, pos_ - start));
}

std::string Lexer::lexString(int line, int col) {
  advance();  // opening quote
  std::string out;
  while (true) {
    if (atEnd() || peek() == '\n') fail(line, col, "unterminated string");
    char c = peek();
    auto u = static_cast<unsigned char>(c);
    if (c == '"') {
      advance();
      return out;
    }
    if (u < 0x20 || u == 0x7f)
      fail(line_, col_, fmt::format("control character '\\x{:02x}' in string (write it as an escape)", u));
    if (c != '\\') {
      out += c;
      advance();
      continue;
    }
    int escLine = line_, escCol = col_;
    advance();
    char e = peek();
    if (e == '"' || e == '\\') {
      out += e;
      advance();
    } else if (e == 'n') {
      out += '\n';
      advance();
    } else if (e == 't') {
      out += '\t';
      advance();
    } else if (e == 'x' && hexValue(peek(1)) >= 0 && hexValue(peek(2)) >= 0) {
      out += static_cast<char>(hexValue(peek(1)) * 16 + hexValue(peek(2)));
      advance(), advance(), advance();
    } else {
      fail(escLine, escCol, "invalid escape in string (expected \\\" \\\\ \\n \\t or \\xHH)");
    }
  }
}

Token Lexer::lexNumber(int line, int col) {
  size_t start = pos_;
  if (peek() == '-') {
    advance();
    if (isWordStart(peek())) {
      size_t w = pos_;
      while (!atEnd() && isWordChar(peek())) advance();
      std::string_view word = text_.substr(w, pos_ - w);
      if (word != "inf" && word != "nan") fail(line, col, fmt::format("expected a number after '-', found '{}'", excerpt(word)));
      return Token{Tok::Number, std::string(text_.substr(start, pos_ - start)), line, col};
    }
    if (!isDigit(peek())) fail(line, col, "expected a number after '-'");
  }
  while (isDigit(peek())) advance();
  if (peek() == '.' && isDigit(peek(1))) {
    advance();
    while (isDigit(peek())) advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
    advance(), advance();
    while (isDigit(peek())) advance();
  }
  return Token{Tok::Number, std::string(text_.substr(start, pos_ - start)), line, col};
}

Token Lexer::next() {
  skipTrivia();
  int line = line_, col = col_;
  if (atEnd()) return Token{Tok::End, "", line, col};
  char c = peek();
  auto single = [&](Tok k) {
    advance();
    return Token{k, std::string(1, c), line, col};
  };
  switch (c) {
    case '{': return single(Tok::LBrace);
    case '}': return single(Tok::RBrace);
    case '(': return single(Tok::LParen);
    case ')': return single(Tok::RParen);
    case '[': return single(Tok::LBracket);
    case ']': return single(Tok::RBracket);
    case ',': return single(Tok::Comma);
    case ':': return single(Tok::Colon);
    case '=': return single(Tok::Equal);
    case '"': return Token{Tok::String, lexString(line, col), line, col};
    case '@':
    case '%': {
      advance();
      std::string name = lexName();
      if (name.empty()) fail(line, col, fmt::format("expected a name after '{}' (letters, digits, '_' or '.')", c));
      return Token{c == '@' ? Tok::Global : Tok::Local, std::move(name), line, col};
    }
    default: break;
  }
  if (c == '-' || isDigit(c)) return lexNumber(line, col);
  if (isWordStart(c)) {
    size_t start = pos_;
    while (!atEnd() && isWordChar(peek())) advance();
    return Token{Tok::Word, std::string(text_.substr(start, pos_ - start)), line, col};
  }
  fail(line, col, fmt::format("unexpected character '{}'", excerpt(std::string_view(&text_[pos_], 1))));
}

}  // namespace kiln::ir::text
