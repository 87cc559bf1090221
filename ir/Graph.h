// The graph IR: SSA tensor values, each defined once — by a graph input, a parameter, or the single
// result of a node. Nodes are kept in a valid topological order (every operand is defined before
// its use). A graph's signature is its data inputs, its parameters (persistent state with an
// initializer and a PyTorch-style name such as `fc1.weight`) and its named outputs.
#pragma once

#include "ir/Attr.h"
#include "ir/OpInfo.h"
#include "ir/Type.h"
#include "support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::ir {

struct Node;

enum class ValueKind : uint8_t { Input, Param, Result };

struct Value {
  TensorType type;
  ValueKind kind = ValueKind::Result;
  /// The text name without '%'. Inputs and params always have one; node results may be unnamed
  /// (the printer then numbers them).
  std::string name;
  Node* producer = nullptr;  // set for ValueKind::Result
  /// Where an input or a parameter was declared (a node's location is Node::loc).
  SourceLoc loc;
};

struct Node {
  OpKind op;
  std::vector<Value*> operands;
  std::vector<AttrValue> attrs;  // schema order (opInfo(op).attrs)
  Value* result = nullptr;
  SourceLoc loc;
  /// The fusion group (index into Graph::groups()) this node's kernel computes; -1 before fusion.
  int32_t group = -1;

  const OpInfo& info() const { return opInfo(op); }
  const AttrValue& attr(std::string_view name) const;
  int64_t attrInt(std::string_view name) const { return std::get<int64_t>(attr(name)); }
  double attrFloat(std::string_view name) const { return std::get<double>(attr(name)); }
  const Ints& attrInts(std::string_view name) const { return std::get<Ints>(attr(name)); }
  const Floats& attrFloats(std::string_view name) const { return std::get<Floats>(attr(name)); }
  bool attrBool(std::string_view name) const { return std::get<bool>(attr(name)); }
  DType attrDType(std::string_view name) const { return std::get<DType>(attr(name)); }
  const std::string& attrStr(std::string_view name) const { return std::get<std::string>(attr(name)); }
};

/// How a parameter's first value is made. Drawn with the counter-based generator (support/Philox.h)
/// from `seed`, element i from counter i, so every backend initializes identically.
///   zeros | ones | constant(value) | uniform(low, high, seed) | normal(mean, std, seed)
struct Initializer {
  enum class Kind : uint8_t { Zeros, Ones, Constant, Uniform, Normal };
  Kind kind = Kind::Zeros;
  double a = 0;       // constant: value; uniform: low; normal: mean
  double b = 0;       // uniform: high; normal: std
  uint64_t seed = 0;  // uniform/normal

  bool operator==(const Initializer&) const = default;
};
std::string_view initializerKindName(Initializer::Kind k);

struct Param {
  Value* value;  // value->loc is where the parameter was declared
  Initializer init;
};

struct Output {
  std::string name;
  Value* value;
};

/// A parameter's new value at the end of a run (a training step's weight or optimizer-state
/// update). Every node of the run reads the parameter's old value; the update takes effect after.
struct Update {
  Value* param;  // ValueKind::Param
  Value* value;  // same type
};

/// How the nodes of a fusion group become one kernel (docs/KERNELS.md):
///   loop         elementwise ops and movement views over one iteration domain
///   reduction    reductions over the inner dimensions with elementwise prologue and epilogue
///                (softmax, log_softmax + NLL, layer norm, mean/variance)
///   contraction  one matmul/conv with its elementwise epilogue
///   multi        several independent loops launched as one kernel (the optimizer update)
///   op           one op with a dedicated implementation (gather, scatter_add, pooling, …)
enum class KernelKind : uint8_t { Loop, Reduction, Contraction, Multi, Op };
std::string_view kernelKindName(KernelKind k);
/// The kind called `name`, or false.
bool kernelKindFromName(std::string_view name, KernelKind& out);

/// A fusion group: consecutive nodes that one kernel computes. The fuse pass sets them; the text
/// form prints them as `kernel @name kind { … }` blocks with `notes` (why ops were or were not
/// fused) as comments, which the parser skips.
struct KernelGroup {
  std::string name;
  KernelKind kind = KernelKind::Loop;
  std::vector<std::string> notes;
};

/// Where one buffer lives in the arena of a memory plan.
struct BufferSlot {
  Value* value;
  int64_t offset;  // bytes from the arena's start; a multiple of the plan's alignment
};

/// The plan pass's result: every intermediate buffer (a node result that crosses a kernel
/// boundary and is not a graph output) at an offset in one arena. Buffers whose lifetimes do not
/// overlap may share bytes; passes/Plan.h explains the rules and validates a plan.
struct MemoryPlan {
  int64_t arenaBytes = 0;
  int64_t alignment = 64;
  std::vector<BufferSlot> slots;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// Signature. Names must be unique among all named values and shapes valid (ir/Type.h
  /// shapeProblem); violations throw kiln::Error at `loc`.
  Value* addInput(const std::string& name, TensorType type, SourceLoc loc = {});
  Value* addParam(const std::string& name, TensorType type, Initializer init, SourceLoc loc = {});
  void addOutput(const std::string& name, Value* v);
  /// Sets `param`'s value after a run to `v`; at most one update per parameter, same type.
  void addUpdate(Value* param, Value* v);

  /// Appends a node after resolving attributes and inferring the result type; user errors (bad
  /// shapes, attributes) throw kiln::Error at `loc`.
  Value* addNode(OpKind op, std::vector<Value*> operands, std::span<const NamedAttr> attrs,
                 SourceLoc loc = {}, std::string resultName = {});
  /// Appends a node whose attributes are already resolved (schema order) and whose result type
  /// is given; used by the parser and passes. Does not infer — the verifier checks it.
  Value* addNodeRaw(OpKind op, std::vector<Value*> operands, std::vector<AttrValue> attrs,
                    TensorType resultType, SourceLoc loc = {}, std::string resultName = {});

  /// Names an unnamed node result (passes use it to keep a user's name on a replacement value).
  void nameValue(Value* v, const std::string& name);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Output>& outputs() const { return outputs_; }
  std::vector<Output>& mutableOutputs() { return outputs_; }
  const std::vector<Update>& updates() const { return updates_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  /// For passes that rebuild the node list (order must stay topological).
  std::vector<std::unique_ptr<Node>>& mutableNodes() { return nodes_; }

  Value* findValue(std::string_view name) const;
  const Value* findInput(std::string_view name) const;
  const Param* findParam(std::string_view name) const;
  const Output* findOutput(std::string_view name) const;

  /// Fusion groups (empty before the fuse pass); Node::group indexes them.
  const std::vector<KernelGroup>& groups() const { return groups_; }
  std::vector<KernelGroup>& mutableGroups() { return groups_; }
  /// Adds a group and returns its index.
  int32_t addGroup(KernelGroup group);
  /// The memory plan, when the plan pass has run.
  const MemoryPlan* plan() const { return plan_ ? &*plan_ : nullptr; }
  void setPlan(MemoryPlan plan) { plan_ = std::move(plan); }
  /// Drops the fusion groups and the memory plan: a pass that rewrites nodes after fusion calls
  /// it (the verifier rejects groups whose nodes are no longer consecutive).
  void clearSchedule();

  /// A deep copy with the same names, types, order, groups and plan.
  Graph clone() const;

 private:
  Value* newValue(TensorType type, ValueKind kind, std::string name);
  void claimName(const std::string& name, const SourceLoc& loc);
  static void checkDeclaredType(const std::string& what, const std::string& name, const TensorType& type,
                                const SourceLoc& loc);

  std::string name_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Param> params_;
  std::vector<Output> outputs_;
  std::vector<Update> updates_;
  std::vector<KernelGroup> groups_;
  std::optional<MemoryPlan> plan_;
  std::unordered_set<std::string> usedNames_;  // for uniqueness checks
};

}  // namespace kiln::ir
