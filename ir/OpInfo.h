// The op registry generated from ir/Ops.def: the OpKind enum, property flags as data, parsed
// attribute schemas and each op's shape/dtype rule. Passes and backends ask this table about ops
// (isElementwise, isComposite, …) instead of listing ops in switches.
#pragma once

#include "ir/Attr.h"
#include "ir/Type.h"
#include "support/Error.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir {

enum class OpKind : uint16_t {
#define KILN_OP(Enum, ...) Enum,
#include "ir/Ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(...) +1
#include "ir/Ops.def"
#undef KILN_OP
    ;

enum OpFlag : uint32_t {
  kElementwise = 1u << 0,   // output element i depends on operand elements at i (after broadcast)
  kUnary = 1u << 1,
  kBinary = 1u << 2,
  kTernary = 1u << 3,
  kCommutative = 1u << 4,
  kComparison = 1u << 5,    // produces bool
  kReduction = 1u << 6,     // reduces dimensions
  kMovement = 1u << 7,      // moves or copies elements without arithmetic
  kContraction = 1u << 8,   // matmul, conv
  kWindow = 1u << 9,        // pooling windows
  kSource = 1u << 10,       // no data operands: constants, iota, random (whose one operand is a step counter)
  kRandom = 1u << 11,       // draws from the counter-based generator
  kComposite = 1u << 12,    // decomposed into primitives before fusion; backends never see it
  kLoss = 1u << 13,         // a loss function
};

struct InferContext;
using InferFn = TensorType (*)(const InferContext&);

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int minOperands;
  int maxOperands;  // -1: any number >= minOperands
  uint32_t flags;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  std::string_view doc;
  std::string_view group;  // the KILN_OP_GROUP it is listed under


  bool has(uint32_t f) const { return (flags & f) == f; }
  /// Index of attribute `name` in the schema, or -1.
  int attrIndex(std::string_view attrName) const;
};

const OpInfo& opInfo(OpKind k);
std::string_view opName(OpKind k);
std::optional<OpKind> opFromName(std::string_view name);
/// All ops in table order.
std::span<const OpInfo> allOps();

/// What a shape rule sees. `fail` throws a kiln::Error naming the op, its operand types and the
/// source location, so every rule reports errors the same way.
struct InferContext {
  const OpInfo& info;
  std::span<const TensorType> operands;
  std::span<const AttrValue> attrs;  // schema order, defaults filled in
  SourceLoc loc;

  const TensorType& operand(size_t i) const { return operands[i]; }
  size_t numOperands() const { return operands.size(); }
  int64_t getInt(std::string_view n) const;
  double getFloat(std::string_view n) const;
  const Ints& getInts(std::string_view n) const;
  const Floats& getFloats(std::string_view n) const;
  bool getBool(std::string_view n) const;
  DType getDType(std::string_view n) const;
  const std::string& getStr(std::string_view n) const;

  [[noreturn]] void fail(const std::string& message) const;
  template <typename... A>
  void check(bool cond, fmt::format_string<A...> f, A&&... args) const {
    if (!cond) fail(fmt::format(f, std::forward<A>(args)...));
  }

 private:
  const AttrValue& get(std::string_view n) const;
};

/// The names of the flags set in `flags`, in bit order: {"elementwise", "unary", …}.
std::vector<std::string_view> flagNames(uint32_t flags);

/// Formats the standard error prefix: "op 'matmul' with operands (f32[2,3], f32[4,5])".
std::string describeOp(const OpInfo& info, std::span<const TensorType> operands);

/// Checks attribute values against `info`'s schema, fills defaults, and returns them in schema
/// order. Unknown names, missing required attributes, wrong kinds and words outside a Str
/// attribute's choices are errors at `loc`.
std::vector<AttrValue> resolveAttrs(const OpInfo& info, std::span<const NamedAttr> given,
                                    const SourceLoc& loc);

/// Runs the op's shape rule after checking the operand count.
TensorType inferType(const OpInfo& info, std::span<const TensorType> operands,
                     std::span<const AttrValue> attrs, const SourceLoc& loc);

}  // namespace kiln::ir
