// Typed op attributes. Each op's table entry declares its attributes (name, kind, optional default)
// in a schema; a node stores one value per schema entry, in schema order, so passes and backends
// read attributes by position or by name without parsing strings.
#pragma once

#include "support/DType.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kiln::ir {

enum class AttrKind : uint8_t { Int, Float, Ints, Floats, Bool, DType, Str };

std::string_view attrKindName(AttrKind k);

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;

/// One attribute value. The variant index order matches AttrKind.
using AttrValue = std::variant<int64_t, double, Ints, Floats, bool, DType, std::string>;

inline AttrKind kindOf(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

/// A named attribute as written by users of the builder: {"axes", Ints{1}}.
struct NamedAttr {
  std::string name;
  AttrValue value;
};

/// One entry of an op's attribute schema.
struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool hasDefault = false;
  AttrValue defaultValue;
  /// For Str attributes: the allowed words (empty = any string).
  std::vector<std::string> choices;
};

}  // namespace kiln::ir
