// The tracing front end: a Tracer owns the ir::Graph being built, and a Tensor is a light handle
// (tracer + SSA value). Every op called on Tensors appends one node to the tracer's graph at once,
// so a shape mistake throws kiln::Error at the call that made it, naming the user's file:line.
//
// Source locations: every user-facing function takes a trailing
// `std::source_location loc = std::source_location::current()`. Overloaded operators cannot have
// default arguments, so they take their left operand as a `LocatedOperand`, whose converting
// constructors capture the location of the expression being converted — the user's operator.
#pragma once

#include "ir/Graph.h"
#include "support/DType.h"
#include "support/Error.h"

#include <cstdint>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

using ir::Shape;
using SrcLoc = std::source_location;

class Tracer;

/// A traced tensor: a value of the tracer's graph. Cheap to copy. A default-constructed Tensor is
/// "undefined" (used for optional operands such as a missing bias).
class Tensor {
 public:
  Tensor() = default;
  Tensor(Tracer* tracer, ir::Value* value) : tracer_(tracer), value_(value) {}

  bool defined() const { return value_ != nullptr; }
  Tracer& tracer() const;
  ir::Value* value() const { return value_; }
  const ir::TensorType& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int64_t rank() const { return type().rank(); }
  int64_t numel() const { return type().numel(); }
  /// Size of dimension `d` (negative counts from the end); out of range is a kiln::Error.
  int64_t size(int64_t d) const;
  /// "f32[2,3]"
  std::string str() const { return type().str(); }

 private:
  Tracer* tracer_ = nullptr;
  ir::Value* value_ = nullptr;
};

/// A tensor or a scalar: the operand type of binary ops, so `x * 2.0` and `1 - x` work. A scalar
/// becomes a rank-0 `constant` of the other operand's element type.
class Operand {
 public:
  Operand(const Tensor& t) : tensor_(t) {}  // NOLINT: implicit by design
  Operand(double v) : scalar_(v) {}         // NOLINT: implicit by design
  bool isTensor() const { return tensor_.defined(); }
  const Tensor& tensor() const { return tensor_; }
  double scalar() const { return scalar_; }

 private:
  Tensor tensor_;
  double scalar_ = 0;
};

/// The left operand of an overloaded operator, with the location of the user's expression.
struct LocatedOperand {
  Operand operand;
  SrcLoc loc;
  LocatedOperand(const Tensor& t, SrcLoc l = SrcLoc::current()) : operand(t), loc(l) {}  // NOLINT
  LocatedOperand(double v, SrcLoc l = SrcLoc::current()) : operand(v), loc(l) {}         // NOLINT
};

/// Builds one graph. Not copyable; Tensors keep a pointer to it, so it must outlive them.
class Tracer {
 public:
  /// `seed` is the model seed: parameter initializers and dropout masks derive from it.
  explicit Tracer(std::string graphName = "main", uint64_t seed = 0);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// Declares a data input of the graph.
  Tensor input(const std::string& name, DType dtype, Shape shape, SrcLoc loc = SrcLoc::current());
  /// Declares a parameter with an explicit initializer (modules use nn::Module::registerParameter).
  Tensor parameter(const std::string& name, DType dtype, Shape shape, ir::Initializer init,
                   SrcLoc loc = SrcLoc::current());
  /// Marks `t` as the graph output `name`.
  void output(const std::string& name, const Tensor& t, SrcLoc loc = SrcLoc::current());
  /// Verifies and returns the graph; the tracer (and every Tensor from it) is unusable afterwards.
  ir::Graph finish();

  const ir::Graph& graph() const;
  uint64_t seed() const { return seed_; }
  /// A fresh seed for a random op (dropout, random_*): distinct per call, deterministic per trace.
  uint64_t nextRandomSeed();
  /// For a random stream with a fixed seed (keyed by its owner, e.g. a Dropout module): the offset
  /// of the next `count` draws, then advances it. Per trace, so tracing a module twice draws alike.
  uint64_t claimRandomOffset(const void* stream, uint64_t count);

  /// Appends one node. Operands must come from this tracer; errors name `loc`.
  Tensor emit(ir::OpKind op, std::span<const Tensor> operands, std::vector<ir::NamedAttr> attrs,
              const SrcLoc& loc);
  Tensor emit(ir::OpKind op, std::initializer_list<Tensor> operands, std::vector<ir::NamedAttr> attrs,
              const SrcLoc& loc) {
    return emit(op, std::span<const Tensor>(operands.begin(), operands.size()), std::move(attrs), loc);
  }
  /// A rank-0 constant of `dtype` (how scalar operands enter the graph).
  Tensor scalar(double value, DType dtype, const SrcLoc& loc);

  /// Adds a graph parameter at a given (possibly unknown) location.
  ir::Value* declareParameter(const std::string& name, ir::TensorType type, ir::Initializer init, SourceLoc loc);
  /// Parameter cache used by nn::Module: a module's parameter slot → its graph value.
  ir::Value* lookupParam(const void* slot) const;
  void bindParam(const void* slot, ir::Value* v);

 private:
  ir::Graph& mutableGraph();

  std::unique_ptr<ir::Graph> graph_;
  uint64_t seed_;
  uint64_t randomCounter_ = 0;
  std::unordered_map<const void*, ir::Value*> params_;  // lookup only, never iterated
  std::unordered_map<const void*, uint64_t> randomOffsets_;  // lookup only, never iterated
};

}  // namespace kiln
