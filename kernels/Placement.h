// Where a backend keeps each value its kernels, outputs and updates touch — the decision the CPU
// backend (cpu::ProgramLayout) and the CUDA backend (cuda::ProgramLayout) share: graph inputs and
// parameters where they are, values with a slot of the memory plan in the arena, the rest (and
// every constant, whose data is filled once) in buffers of the program's own.
#pragma once

#include "ir/Graph.h"
#include "kernels/Kernel.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>

namespace kiln::kernels {

/// `Location` is a backend's location type: an aggregate {kind, index, offset} whose Kind has
/// Input, Param, Arena and Own. `own(value, isConstant)` creates an owned buffer for a value and
/// returns its index. Each value is placed once; later calls return the same location.
template <typename Location, typename Own>
class ValuePlacer {
 public:
  ValuePlacer(const ir::Graph& graph, Own own) : graph_(graph), own_(std::move(own)) {
    if (const ir::MemoryPlan* plan = graph.plan()) {
      for (const ir::BufferSlot& s : plan->slots) slots_.emplace(s.value, s.offset);
      arenaBytes_ = plan->arenaBytes;
    }
  }

  /// Places `v` at `at` (before anything places it): an update value computed in its
  /// parameter's buffer (updatesInPlace).
  void placeAt(const ir::Value* v, Location at) { where_.emplace(v, at); }

  /// The memory plan's arena size (0 without a plan).
  int64_t arenaBytes() const { return arenaBytes_; }

  Location place(const ir::Value* v) {
    if (auto it = where_.find(v); it != where_.end()) return it->second;
    Location at{};
    const bool constant = v->producer && v->producer->op == ir::OpKind::Constant;
    if (v->kind == ir::ValueKind::Input) {
      const auto& ins = graph_.inputs();
      at = {Location::Kind::Input, static_cast<size_t>(std::find(ins.begin(), ins.end(), v) - ins.begin())};
    } else if (v->kind == ir::ValueKind::Param) {
      for (size_t i = 0; i < graph_.params().size(); ++i)
        if (graph_.params()[i].value == v) at = {Location::Kind::Param, i};
    } else if (auto it = slots_.find(v); it != slots_.end() && !constant) {
      at = {Location::Kind::Arena, 0, it->second};  // constant data is kept apart, filled once
    } else {
      at = {Location::Kind::Own, own_(v, constant)};
    }
    where_.emplace(v, at);
    return at;
  }

 private:
  const ir::Graph& graph_;
  Own own_;
  int64_t arenaBytes_ = 0;
  std::unordered_map<const ir::Value*, int64_t> slots_;
  std::unordered_map<const ir::Value*, Location> where_;
};

/// Per update of `graph` (run as `kernels`, in order): whether its new value may be computed
/// straight into its parameter's buffer instead of a buffer of its own that then trades places
/// with the parameter — half the parameter and optimizer-state bytes a training step touches.
/// It may when the value is a kernel's result of the parameter's type that updates this parameter
/// only; the parameter's old value is no output and no other update's value; no kernel after the
/// writer touches the parameter; and in the writer the parameter is no contraction operand and is
/// read only where the value is stored, at the same element (the store's map row-major over a nest
/// domain of the value's shape, once per element), by loads that the value's store or the stores
/// before it need: element i is read before it is overwritten.
std::vector<bool> updatesInPlace(const ir::Graph& graph, const std::vector<Kernel>& kernels);

/// Element `i` of a constant node's value (a single value broadcasts).
inline double constantElement(const ir::Value& v, int64_t i) {
  const std::vector<double>& values = v.producer->attrFloats("value");
  return values.size() == 1 ? values[0] : values[static_cast<size_t>(i)];
}

}  // namespace kiln::kernels
