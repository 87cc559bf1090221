#include "runtime/Json.h"

#include "support/Error.h"

#include <charconv>

namespace kiln::rt::json {

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

std::optional<uint64_t> Value::asUInt64() const {
  if (kind != Kind::number || text.empty() || text[0] == '-') return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> Value::asInt64() const {
  if (kind != Kind::number) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string_view Value::kindName() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return "boolean";
    case Kind::number: return "number";
    case Kind::string: return "string";
    case Kind::array: return "array";
    case Kind::object: return "object";
  }
  return "?";
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  Value document() {
    skipSpace();
    Value v = value(0);
    skipSpace();
    if (pos_ != s_.size()) fail("unexpected characters after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view reason) const {
    KILN_THROW("{}: invalid json at byte {}: {}", what_, pos_, reason);
  }
  bool atEnd() const { return pos_ >= s_.size(); }
  char peek() const { return atEnd() ? '\0' : s_[pos_]; }
  void skipSpace() {
    while (!atEnd() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c || atEnd()) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("unknown literal");
    pos_ += word.size();
  }

  Value value(int depth) {
    if (depth >= kMaxDepth) fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
    if (atEnd()) fail("unexpected end of input");
    Value v;
    switch (peek()) {
      case '{': v.kind = Value::Kind::object; object(v, depth); break;
      case '[': v.kind = Value::Kind::array; array(v, depth); break;
      case '"': v.kind = Value::Kind::string; v.text = string(); break;
      case 't': v.kind = Value::Kind::boolean; v.flag = true; literal("true"); break;
      case 'f': v.kind = Value::Kind::boolean; literal("false"); break;
      case 'n': literal("null"); break;
      default: v.kind = Value::Kind::number; v.text = number(); break;
    }
    return v;
  }

  void object(Value& v, int depth) {
    expect('{');
    skipSpace();
    if (peek() == '}' && !atEnd()) { ++pos_; return; }
    while (true) {
      skipSpace();
      if (peek() != '"' || atEnd()) fail("expected a string key");
      size_t keyPos = pos_;
      std::string key = string();
      for (const auto& m : v.members)
        if (m.first == key) {
          pos_ = keyPos;
          fail(fmt::format("duplicate key {}", quote(key)));
        }
      skipSpace();
      expect(':');
      skipSpace();
      Value member = value(depth + 1);
      v.members.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (peek() == ',' && !atEnd()) { ++pos_; continue; }
      expect('}');
      return;
    }
  }

  void array(Value& v, int depth) {
    expect('[');
    skipSpace();
    if (peek() == ']' && !atEnd()) { ++pos_; return; }
    while (true) {
      skipSpace();
      v.items.push_back(value(depth + 1));
      skipSpace();
      if (peek() == ',' && !atEnd()) { ++pos_; continue; }
      expect(']');
      return;
    }
  }

  std::string number() {
    size_t start = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (!atEnd() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == d) fail("expected a digit");
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0' && !atEnd()) {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') fail("leading zeros are not allowed");
    } else {
      digits();
    }
    if (peek() == '.' && !atEnd()) { ++pos_; digits(); }
    if ((peek() == 'e' || peek() == 'E') && !atEnd()) {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  unsigned hex4() {
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      if (atEnd()) fail("unterminated \\u escape");
      char c = s_[pos_++];
      u <<= 4;
      if (c >= '0' && c <= '9') u |= c - '0';
      else if (c >= 'a' && c <= 'f') u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') u |= c - 'A' + 10;
      else fail("invalid hex digit in \\u escape");
    }
    return u;
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Copies one raw UTF-8 sequence starting at pos_, rejecting overlong forms, surrogates and
  // code points beyond U+10FFFF.
  void rawUtf8(std::string& out) {
    auto b = [&](size_t i) { return static_cast<unsigned char>(s_[i]); };
    unsigned char lead = b(pos_);
    int len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (len == 0 || lead > 0xF4 || pos_ + len > s_.size()) fail("invalid utf-8 in a string");
    uint32_t cp = lead & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      if ((b(pos_ + i) & 0xC0) != 0x80) fail("invalid utf-8 in a string");
      cp = (cp << 6) | (b(pos_ + i) & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid utf-8 in a string");
    out.append(s_.substr(pos_, len));
    pos_ += len;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (atEnd()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') { ++pos_; return out; }
      if (c < 0x20) fail("control character in a string");
      if (c >= 0x80) { rawUtf8(out); continue; }
      ++pos_;
      if (c != '\\') { out += static_cast<char>(c); continue; }
      if (atEnd()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
            pos_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired high surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          appendUtf8(out, cp);
          break;
        }
        default: --pos_; fail("invalid escape");
      }
    }
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view what) { return Parser(text, what).document(); }

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  out += '"';
  return out;
}

}  // namespace kiln::rt::json
