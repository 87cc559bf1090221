// Simplification of a loop nest's iteration domain, shared by the CPU and CUDA renderers: drop
// dimensions of size 1 and merge neighbours that every affine map of the nest walks contiguously
// (coeff[d] == coeff[d+1] * size[d+1]), so an elementwise kernel over contiguous tensors becomes
// one long dimension and fewer index computations are emitted.
#pragma once

#include "kernels/Kernel.h"

#include <vector>

namespace kiln::kernels {

/// Calls f(Affine&) on every affine function of `n`: load indices and bounds, Coord and Random
/// expressions, store indices.
template <typename F>
void forEachAffine(LoopNest& n, F&& f) {
  for (Load& l : n.loads) {
    f(l.map.index);
    for (auto& b : l.map.bounds) f(b.value);
  }
  for (Expr& e : n.exprs)
    if (e.kind == Expr::Kind::Coord || e.kind == Expr::Kind::Random) f(e.index);
  for (Store& s : n.stores) f(s.map.index);
}

/// `in` with size-1 dimensions dropped and contiguous neighbours merged. `group` has one entry per
/// dimension of `in`; dimensions of different groups never merge (a contraction epilogue keeps its
/// batch, M and N dimensions apart). On return it has one entry per dimension of the result. A
/// nest of a single point keeps no dimension at all.
LoopNest simplifyNest(const LoopNest& in, std::vector<int>& group);

/// Whether a full (not outer) store of `nest` reads a reduction's result, so that it must wait for
/// the reductions of its outer point.
bool fullStoresReadReductions(const LoopNest& nest);

}  // namespace kiln::kernels
