// nn::Module: the base of layers and models, shaped after torch.nn.Module. A module owns named
// children and parameter declarations; parameter names follow PyTorch's state_dict (`fc1.weight`,
// `blocks.0.attn.qkv.bias`): nested module names joined with '.', relative to the root module.
//
// Parameters are declared at construction (shape + initializer) and become graph parameters the
// first time any module of the tree is traced: then the whole tree's parameters are added to the
// tracer, in PyTorch's named_parameters() order, so a graph's parameter list does not depend on
// which layer happened to run first. Initializer seeds derive from the tracer's model seed and the
// parameter's full name (frontend/Init.h).
//
// Modules are not copyable or movable (children point at their parent); hold them by value as the
// root, or by std::shared_ptr when registered as children.
#pragma once

#include "frontend/Init.h"
#include "frontend/Ops.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::nn {

/// A parameter declaration (the graph value is made per Tracer).
struct ParamSlot {
  std::string name;  // local name, e.g. "weight"
  Shape shape;
  DType dtype = DType::f32;
  Init init;
};

struct NamedParam {
  std::string name;  // dotted name relative to the module asked
  const ParamSlot* slot;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The name under the parent ("" for a root).
  const std::string& name() const { return name_; }
  /// Dotted path from the root ("" for the root itself).
  std::string fullName() const;
  const Module* parent() const { return parent_; }
  /// A short type name for messages and printing ("Linear").
  virtual std::string typeName() const { return "Module"; }
  /// For messages: "Linear 'fc1'", or just "Linear" for a root.
  std::string label() const;

  /// Adds `m` as the child `name` (no dots; unique among this module's children and parameters).
  template <typename M>
  std::shared_ptr<M> registerModule(const std::string& name, std::shared_ptr<M> m) {
    attach(name, m);
    return m;
  }
  /// Declares parameter `name` of this module.
  const ParamSlot& registerParameter(const std::string& name, Shape shape, Init init, DType dtype = DType::f32);

  /// This module's and its descendants' parameters, PyTorch order: own (in registration order),
  /// then each child's, depth first.
  std::vector<NamedParam> namedParameters() const;
  /// Direct children in registration order.
  std::vector<std::pair<std::string, Module*>> children() const;
  /// The parameter `name` (dotted, relative to this module), or nullptr.
  const ParamSlot* findParameter(std::string_view name) const;
  /// Total number of parameter elements.
  int64_t numParameters() const;

  /// Training mode (the default) vs evaluation mode, recursively; affects Dropout.
  void train(bool on = true);
  void eval() { train(false); }
  bool isTraining() const { return training_; }

  /// The traced value of this module's own parameter `name` in `t` (declares the whole tree's
  /// parameters in `t` on first use).
  Tensor param(Tracer& t, std::string_view name) const;

 private:
  void attach(const std::string& name, std::shared_ptr<Module> m);
  void checkFreshName(const std::string& name) const;
  const Module& root() const;
  void collect(const std::string& prefix, std::vector<NamedParam>& out) const;

  std::string name_;
  Module* parent_ = nullptr;
  bool training_ = true;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::unique_ptr<ParamSlot>> params_;  // stable addresses: slots key the tracer's cache
};

/// A module with one tensor in and one out; what Sequential chains. forward() receives the
/// location of the user's call so errors inside a layer name the line that applied it.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) = 0;
  Tensor operator()(const Tensor& x, SrcLoc loc = SrcLoc::current()) { return forward(x, loc); }
};

/// Children named "0", "1", … applied in order.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  std::string typeName() const override { return "Sequential"; }

  /// Appends a module named by its index.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    std::shared_ptr<M> r = registerModule(std::to_string(layers_.size()), std::move(m));
    layers_.push_back(r);
    return r;
  }
  size_t size() const { return layers_.size(); }
  UnaryModule& operator[](size_t i) const;

  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

}  // namespace kiln::nn
