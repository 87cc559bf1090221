// Internal to the canonicalize pass: the rewriter that rebuilds a graph node by node, the rule
// families it applies to each node before adding it (constant folding, algebraic identities,
// movement chains, transposes folded into matmul flags, ReLU masks moved through max pooling),
// and the constant literals the rules read.
// Not a public API; docs/PASSES.md lists the rules.
//
// A rule sees a Candidate — a node about to be added whose operands are already rewritten — and
// either returns the value that replaces it (an existing value, or one it builds through the
// rewriter, which simplifies recursively) or nullptr to leave the node as it is. Every rule keeps
// the interpreter's results bit for bit (NaN payloads aside).
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kiln::passes::canon {

/// A node about to be added to the rebuilt graph.
struct Candidate {
  ir::OpKind op;
  std::vector<ir::Value*> operands;  // values of the rebuilt graph
  std::vector<ir::AttrValue> attrs;  // schema order
  ir::TensorType type;               // the result type
  /// For each operand, whether this node is its only use (no other node, output or update reads
  /// it). Only known for the nodes of the graph being rebuilt; empty for nodes a rule builds.
  std::vector<bool> soleUse;

  const ir::AttrValue& attr(std::string_view name) const;
  bool attrBool(std::string_view name) const { return std::get<bool>(attr(name)); }
  const ir::Ints& attrInts(std::string_view name) const { return std::get<ir::Ints>(attr(name)); }
  DType attrDType(std::string_view name) const { return std::get<DType>(attr(name)); }
  bool isSoleUse(size_t operand) const { return operand < soleUse.size() && soleUse[operand]; }
};

/// Builds the nodes of one sweep into `out`: each node is first offered to the rules, then
/// deduplicated against the identical nodes already built (CSE), then added.
class Rewriter {
 public:
  explicit Rewriter(ir::Graph& out) : out_(out) {}

  /// The value computing `op(operands) {attrs}` (attributes by name, defaults filled in, result
  /// type inferred): a simplification, an identical existing node, or a new node.
  ir::Value* build(ir::OpKind op, std::vector<ir::Value*> operands, std::vector<ir::NamedAttr> attrs = {});
  /// The same for a candidate whose attributes and type are already resolved.
  ir::Value* build(Candidate c);
  /// A constant of `type` holding `values` (one value: a splat; otherwise one per element, which
  /// becomes a splat when they are all the same bits).
  ir::Value* constant(const ir::TensorType& type, ir::Floats values);

  /// The source location given to the nodes built from now on (the node being rewritten).
  void setLocation(SourceLoc loc) { loc_ = std::move(loc); }
  /// How many rules fired and how many nodes CSE merged since construction.
  int64_t rewrites() const { return rewrites_; }
  /// How many operands of the nodes built so far are `v`.
  int64_t usesBuilt(const ir::Value* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }

 private:
  struct Key {
    ir::OpKind op;
    std::vector<ir::Value*> operands;
    std::vector<ir::AttrValue> attrs;
    ir::TensorType type;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct KeyEqual {
    bool operator()(const Key& a, const Key& b) const;
  };

  ir::Graph& out_;
  SourceLoc loc_;
  std::unordered_map<Key, ir::Value*, KeyHash, KeyEqual> built_;
  std::unordered_map<const ir::Value*, int64_t> uses_;
  int64_t rewrites_ = 0;
};

// ---- constants ------------------------------------------------------------------------------------

/// Results of more elements than this are not folded into a constant unless they are a splat: a
/// bigger literal would bloat the IR text and the program for little gain.
inline constexpr int64_t kMaxFoldedElements = 4096;

/// A constant's elements exactly as the interpreter materializes them: floats rounded to the
/// dtype, integers and bools as their stored (truncated, saturated) int64 value. Holds one element
/// when the constant is a splat.
struct Literal {
  ir::TensorType type;
  std::vector<double> floats;  // float dtypes
  std::vector<int64_t> ints;   // integer and bool dtypes

  bool isFloat() const { return kiln::isFloat(type.dtype); }
  size_t size() const { return isFloat() ? floats.size() : ints.size(); }
  bool splat() const { return size() == 1; }
  double f(int64_t i) const { return floats[splat() ? 0 : static_cast<size_t>(i)]; }
  int64_t i(int64_t i) const { return ints[splat() ? 0 : static_cast<size_t>(i)]; }
};

/// The literal of `v` when a `constant` node produces it.
std::optional<Literal> literalOf(const ir::Value* v);
/// Whether every element of constant `v` equals `c`; for floats the sign of zero counts (a
/// -0.0 is not 0.0) and NaN equals nothing.
bool isConstantEqualTo(const ir::Value* v, double c);
/// The op that produces `v`, or nullptr for inputs and parameters.
const ir::Node* producerOf(const ir::Value* v);
/// `perm` is the identity permutation.
bool isIdentityPerm(const ir::Ints& perm);
/// `perm` swaps the last two of at least two dimensions and keeps every other one in place.
bool swapsLastTwo(const ir::Ints& perm);

// ---- rule families ----------------------------------------------------------------------------------

/// Fold.cpp: a node whose operands are all constants becomes one constant; a constant whose
/// elements are all the same bits becomes a splat.
ir::Value* foldConstants(Rewriter& rw, const Candidate& c);
ir::Value* splatConstant(Rewriter& rw, const Candidate& c);
/// Algebra.cpp: x*1, 1*x, x/1, x-0, x+(-0), neg(neg x), casts.
ir::Value* simplifyArithmetic(Rewriter& rw, const Candidate& c);
ir::Value* simplifyCast(Rewriter& rw, const Candidate& c);
/// Movement.cpp: identity reshape/broadcast/permute/slice and chains of them.
ir::Value* simplifyReshape(Rewriter& rw, const Candidate& c);
ir::Value* simplifyBroadcast(Rewriter& rw, const Candidate& c);
ir::Value* simplifyPermute(Rewriter& rw, const Candidate& c);
ir::Value* simplifySlice(Rewriter& rw, const Candidate& c);
/// slice_grad with unit steps → pad with 0.
ir::Value* sliceGradAsPad(Rewriter& rw, const Candidate& c);
/// MatMul.cpp: permutes of the last two dimensions become transpose flags.
ir::Value* foldTransposesIntoMatMul(Rewriter& rw, const Candidate& c);
ir::Value* foldPermuteOfMatMul(Rewriter& rw, const Candidate& c);
/// Pooling.cpp: a ReLU gradient mask applied after max_pool2d_grad applied before it, on the
/// pooled tensor.
ir::Value* maskBeforeMaxPoolGrad(Rewriter& rw, const Candidate& c);

}  // namespace kiln::passes::canon
