#include "frontend/nn/Module.h"

#include <algorithm>

namespace kiln::nn {

std::string Module::fullName() const {
  if (parent_ == nullptr) return "";
  std::string p = parent_->fullName();
  return p.empty() ? name_ : p + "." + name_;
}

std::string Module::label() const {
  std::string n = fullName();
  return n.empty() ? typeName() : fmt::format("{} '{}'", typeName(), n);
}

void Module::checkFreshName(const std::string& name) const {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos,
             "{}: invalid member name '{}' (must be non-empty, without '.')", label(), name);
  bool taken = std::any_of(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; }) ||
               std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return p->name == name; });
  KILN_CHECK(!taken, "{} already has a member named '{}'", label(), name);
}

void Module::attach(const std::string& name, std::shared_ptr<Module> m) {
  KILN_CHECK(m != nullptr, "{}: cannot register a null module as '{}'", label(), name);
  checkFreshName(name);
  KILN_CHECK(m->parent_ == nullptr, "cannot register {} as '{}': it is already registered as '{}'", m->typeName(), name,
             m->fullName());
  for (const Module* a = this; a != nullptr; a = a->parent_)
    KILN_CHECK(a != m.get(), "registering '{}' would make a module its own ancestor", name);
  m->name_ = name;
  m->parent_ = this;
  m->train(training_);
  children_.emplace_back(name, std::move(m));
}

const ParamSlot& Module::registerParameter(const std::string& name, Shape shape, Init init, DType dtype) {
  checkFreshName(name);
  for (ir::Dim d : shape)
    KILN_CHECK(d >= 0, "parameter '{}' of {}: negative dimension in {}", name, label(),
               ir::shapeStr(shape));
  params_.push_back(std::make_unique<ParamSlot>(ParamSlot{name, std::move(shape), dtype, init}));
  return *params_.back();
}

void Module::collect(const std::string& prefix, std::vector<NamedParam>& out) const {
  for (const auto& p : params_) out.push_back({prefix + p->name, p.get()});
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", out);
}

std::vector<NamedParam> Module::namedParameters() const {
  std::vector<NamedParam> out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [n, c] : children_) out.emplace_back(n, c.get());
  return out;
}

const ParamSlot* Module::findParameter(std::string_view name) const {
  for (const NamedParam& p : namedParameters())
    if (p.name == name) return p.slot;
  return nullptr;
}

int64_t Module::numParameters() const {
  int64_t n = 0;
  for (const NamedParam& p : namedParameters()) n += ir::numElements(p.slot->shape);
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

const Module& Module::root() const {
  const Module* m = this;
  while (m->parent_ != nullptr) m = m->parent_;
  return *m;
}

Tensor Module::param(Tracer& t, std::string_view name) const {
  auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& p) { return p->name == name; });
  if (it == params_.end()) {
    std::vector<std::string_view> names;
    for (const auto& p : params_) names.push_back(p->name);
    KILN_THROW("{} has no parameter '{}' (its own parameters: {})", label(), name,
               names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  }
  const ParamSlot* slot = it->get();
  if (ir::Value* v = t.lookupParam(slot)) return Tensor(&t, v);
  // First use of this tree in `t`: declare every parameter of the tree, in PyTorch order.
  for (const NamedParam& p : root().namedParameters()) {
    if (t.lookupParam(p.slot) != nullptr) continue;
    // No source location: a parameter is declared by a constructor, which cannot see its caller.
    ir::Value* v = t.declareParameter(p.name, ir::TensorType{p.slot->dtype, p.slot->shape},
                                      p.slot->init.resolve(deriveSeed(t.seed(), p.name)), SourceLoc{});
    t.bindParam(p.slot, v);
  }
  ir::Value* v = t.lookupParam(slot);
  KILN_ASSERT(v != nullptr, "parameter '{}' was not declared", name);
  return Tensor(&t, v);
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules) {
  for (const auto& m : modules) push_back(m);
}

UnaryModule& Sequential::operator[](size_t i) const {
  KILN_CHECK(i < layers_.size(), "{}: index {} is out of range (size {})", label(), i,
             layers_.size());
  return *layers_[i];
}

Tensor Sequential::forward(const Tensor& x, SrcLoc loc) {
  Tensor y = x;
  for (const auto& m : layers_) y = m->forward(y, loc);
  return y;
}

}  // namespace kiln::nn
