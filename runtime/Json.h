// A small, strict JSON reader (RFC 8259) and string quoting, enough for the safetensors header and
// other small metadata files. Strict on purpose: headers of files from the internet are untrusted,
// so duplicate keys, invalid UTF-8, trailing garbage and absurd nesting are errors, not guesses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::rt::json {

struct Value {
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind = Kind::null;
  bool flag = false;     // boolean
  std::string text;      // string: the decoded UTF-8 contents; number: the literal as written
  std::vector<Value> items;                             // array
  std::vector<std::pair<std::string, Value>> members;   // object, in source order, keys unique

  bool isObject() const { return kind == Kind::object; }
  bool isArray() const { return kind == Kind::array; }
  bool isString() const { return kind == Kind::string; }
  bool isNumber() const { return kind == Kind::number; }

  /// Object member by key, or nullptr (also when this is not an object).
  const Value* find(std::string_view key) const;
  /// A number literal that is an integer written without fraction or exponent and fits, or nullopt.
  /// Exact: "9007199254740993" is not rounded through a double.
  std::optional<int64_t> asInt64() const;
  std::optional<uint64_t> asUInt64() const;
  /// "object", "array", ... for error messages.
  std::string_view kindName() const;
};

/// Parses one JSON document: optional whitespace, one value, optional whitespace, end. Throws
/// kiln::Error "WHAT: invalid json at byte N: REASON" on any deviation; never recurses deeper than
/// kMaxDepth.
Value parse(std::string_view text, std::string_view what);
inline constexpr int kMaxDepth = 64;

/// `s` as a JSON string literal with quotes; escapes `"`, `\` and control characters, passes other
/// bytes through (the caller supplies UTF-8).
std::string quote(std::string_view s);

}  // namespace kiln::rt::json
