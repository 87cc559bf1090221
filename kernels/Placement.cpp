#include "kernels/Placement.h"

#include <algorithm>
#include <functional>

namespace kiln::kernels {

namespace {

/// Whether `store` writes each element of `v` at one point of `nest` only, after every read of it:
/// its map has no bounds and is row-major over the nest's non-reduced dimensions, which are `v`'s
/// shape, 0 on the reduced ones. In a reduction nest every store is then an outer one, made once
/// all of the outer point's reductions are done: the codegen makes full stores during the first
/// reduction's pass, before the others read the same elements.
bool writesEachElementOnce(const LoopNest& nest, const Store& store, const ir::Value* v) {
  const std::vector<int64_t>& dims = nest.domain;
  auto reduced = [&](size_t d) { return d < nest.reduced.size() && nest.reduced[d]; };
  bool reduction = false;
  for (size_t d = 0; d < dims.size(); ++d) reduction = reduction || reduced(d);
  if (reduction && !std::all_of(nest.stores.begin(), nest.stores.end(), [](const Store& s) { return s.outer; }))
    return false;
  const Affine& a = store.map.index;
  if (!store.map.bounds.empty() || a.constant != 0 || a.coeff.size() != dims.size()) return false;
  std::vector<int64_t> shape;
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (reduced(d)) {
      if (a.coeff[d] != 0) return false;
      continue;
    }
    if (dims[d] != 1 && a.coeff[d] != stride) return false;
    stride *= dims[d];
    shape.insert(shape.begin(), dims[d]);
  }
  return shape == v->type.shape;
}

/// Whether every load of `p` (per load index: `isP`) that the stores after store `at` of `nest`
/// need was evaluated by the stores up to `at`: a point's stores are made in order, each
/// expression evaluated once per point when a store first needs it, so a load first needed after
/// `at` would read the element `at` has overwritten.
bool loadsBeforeStore(const LoopNest& nest, size_t at, const std::function<bool(int32_t)>& isP) {
  std::vector<bool> seen(nest.exprs.size(), false);
  bool late = false;
  auto visit = [&](int32_t root, bool after) {
    std::vector<int32_t> stack{root};
    while (!stack.empty()) {
      const int32_t e = stack.back();
      stack.pop_back();
      if (seen[static_cast<size_t>(e)]) continue;
      seen[static_cast<size_t>(e)] = true;
      const Expr& x = nest.exprs[static_cast<size_t>(e)];
      if (x.kind == Expr::Kind::Load && isP(nest.loads[static_cast<size_t>(x.load)].buffer)) late = late || after;
      for (int32_t a : x.args) stack.push_back(a);
    }
  };
  for (size_t i = 0; i < nest.stores.size(); ++i) visit(nest.stores[i].expr, i > at);
  return !late;
}

/// Whether kernel `k`, which writes `v`, may write it over `p`: `v` is stored once per element, in
/// one nest, and every read of `p` in the kernel is in that nest at the store's own map — of the
/// element the store writes at the same point — and made before the store.
bool writesOverInPlace(const Kernel& k, const ir::Value* p, const ir::Value* v) {
  if (k.nests.empty()) return false;  // an op kernel: its code is not ours to inspect
  std::vector<int32_t> ps, vs;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (k.buffers[b].value == p) ps.push_back(static_cast<int32_t>(b));
    if (k.buffers[b].value == v) vs.push_back(static_cast<int32_t>(b));
  }
  if (vs.size() != 1) return false;
  auto isP = [&](int32_t b) { return std::find(ps.begin(), ps.end(), b) != ps.end(); };
  if (k.hasContraction && (isP(k.contraction.a) || isP(k.contraction.b))) return false;
  int stores = 0;
  for (const LoopNest& nest : k.nests) {
    const Store* store = nullptr;
    size_t at = 0;
    for (size_t i = 0; i < nest.stores.size(); ++i)
      if (nest.stores[i].buffer == vs[0]) store = &nest.stores[i], at = i, ++stores;
    for (const Load& l : nest.loads)
      if (isP(l.buffer) && (!store || !(l.map == store->map))) return false;
    if (store && (!writesEachElementOnce(nest, *store, v) || !loadsBeforeStore(nest, at, isP))) return false;
  }
  return stores == 1;
}

}  // namespace

std::vector<bool> updatesInPlace(const ir::Graph& graph, const std::vector<Kernel>& kernels) {
  const std::vector<ir::Update>& updates = graph.updates();
  std::vector<bool> inPlace(updates.size(), false);
  auto touches = [](const Kernel& k, const ir::Value* x) {
    return std::any_of(k.buffers.begin(), k.buffers.end(), [&](const Buffer& b) { return b.value == x; });
  };
  for (size_t u = 0; u < updates.size(); ++u) {
    const ir::Value *p = updates[u].param, *v = updates[u].value;
    if (v->kind != ir::ValueKind::Result || !v->producer || v->producer->op == ir::OpKind::Constant) continue;
    if (v->type.dtype != p->type.dtype || v->type.shape != p->type.shape) continue;
    // The parameter's old value is read by nothing after the run (an output or another update),
    // and the new value updates this parameter only.
    bool alone = true;
    for (const ir::Update& other : updates)
      alone = alone && other.value != p && (other.value != v || other.param == p);
    for (const ir::Output& o : graph.outputs()) alone = alone && o.value != p;
    if (!alone) continue;
    // The kernel that writes the new value is the last to touch the parameter.
    size_t writer = kernels.size();
    for (size_t i = 0; i < kernels.size(); ++i)
      for (int32_t b : kernels[i].outputs)
        if (kernels[i].buffers[static_cast<size_t>(b)].value == v) writer = std::min(writer, i);
    if (writer == kernels.size()) continue;
    bool later = false;
    for (size_t i = writer + 1; i < kernels.size(); ++i) later = later || touches(kernels[i], p);
    inPlace[u] = !later && writesOverInPlace(kernels[writer], p, v);
  }
  return inPlace;
}

}  // namespace kiln::kernels
