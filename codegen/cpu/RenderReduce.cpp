// The kernel renderer's reductions: along the lane dimension (a row's sum, kReduceChains
// accumulators) and over outer dimensions with the lanes kept (column sums, a vector of columns
// read together), with the prefetches the latter need.
#include "codegen/cpu/Elements.h"
#include "codegen/cpu/ReduceIR.h"
#include "codegen/cpu/RenderKernel.h"
#include "support/Error.h"

#include <llvm/IR/Intrinsics.h>

namespace kiln::cpu::render {

// Steps ahead along the reduced dimension that column sums prefetch (reduceVectors).
constexpr int64_t kReduceAhead = 8;

DType KernelRenderer::accumulatorType(const kernels::Reduction& r) const {
  DType body = nest_->exprs[r.body].dtype;
  KILN_CHECK(body != DType::boolean, "kernel '{}': the CPU backend cannot reduce bool values", k_.name);
  return body;
}

llvm::Value* KernelRenderer::identity(const kernels::Reduction& r, int lanes) {
  return reductionIdentity(b_, r.op, accumulatorType(r), lanes);
}

llvm::Value* KernelRenderer::combine(const kernels::Reduction& r, llvm::Value* acc, llvm::Value* x) {
  return reductionCombine(b_, r.op, accumulatorType(r), acc, x);
}

llvm::Value* KernelRenderer::horizontal(const kernels::Reduction& r, llvm::Value* acc) {
  return reductionHorizontal(b_, r.op, accumulatorType(r), acc);
}

llvm::Value* KernelRenderer::finish(const kernels::Reduction& r, llvm::Value* acc) {
  return convert(b_, accumulatorType(r), r.dtype, acc);
}

void KernelRenderer::reduceAlongLanes(std::vector<llvm::Value*>& coords, const std::vector<size_t>& reducedDims,
                                      std::vector<llvm::Value*>& reduced) {
  const int64_t span = nest_->domain[lane_];
  // Vectors take turns among kReduceChains accumulators when the span holds a whole round; the
  // rest goes to the first, single elements to `tail`.
  const int chains = lanes_ > 1 && span >= kReduceChains * lanes_ ? kReduceChains : 1;
  for (const kernels::Reduction& r : nest_->reductions) {
    llvm::Value* init = identity(r, lanes_);
    std::vector<llvm::AllocaInst*> accs;
    for (int i = 0; i < chains; ++i) {
      accs.push_back(entryAlloca(init->getType()));
      b_.CreateStore(init, accs.back());
    }
    llvm::Value* one = identity(r, 1);
    llvm::AllocaInst* tail = entryAlloca(one->getType());
    b_.CreateStore(one, tail);
    loopDims(reducedDims, 0, coords, [&] {
      auto body = [&](llvm::Value* laneCoord, int n, int chain) {
        std::vector<llvm::Value*> c = coords;
        c[lane_] = laneCoord;
        Point p = point(c, n);
        p.reduced = &reduced;
        llvm::Value* x = splat(b_, eval(r.body, p), n);
        llvm::AllocaInst* into = n == 1 ? tail : accs[static_cast<size_t>(chain)];
        llvm::Value* cur = b_.CreateLoad(into->getAllocatedType(), into);
        b_.CreateStore(combine(r, cur, x), into);
      };
      llvm::Value* rest = i64(0);
      if (chains > 1)
        rest = loop(i64(0), i64(span), chains * lanes_, [&](llvm::Value* x) {
          for (int i = 0; i < chains; ++i) body(b_.CreateAdd(x, i64(i * lanes_)), lanes_, i);
        });
      laneLoop(rest, i64(span), span, span % lanes_ == 0, [&](llvm::Value* x, int n) { body(x, n, 0); });
    });
    llvm::Value* v = b_.CreateLoad(accs[0]->getAllocatedType(), accs[0]);
    for (size_t i = 1; i < accs.size(); ++i) v = combine(r, v, b_.CreateLoad(accs[i]->getAllocatedType(), accs[i]));
    v = combine(r, horizontal(r, v), b_.CreateLoad(tail->getAllocatedType(), tail));
    reduced.push_back(finish(r, v));
  }
}

void KernelRenderer::reduceVectors(std::vector<llvm::Value*>& coords, const std::vector<llvm::Value*>& xs, int n,
                                   const std::vector<size_t>& reducedDims, std::vector<std::vector<llvm::Value*>>& reduced,
                                   bool storeInside) {
  reduced.assign(xs.size(), {});
  for (const kernels::Reduction& r : nest_->reductions) {
    const bool storeHere = storeInside && &r == &nest_->reductions.front();
    llvm::Value* init = identity(r, n);
    std::vector<llvm::AllocaInst*> accs;
    for (size_t v = 0; v < xs.size(); ++v) {
      accs.push_back(entryAlloca(init->getType()));
      b_.CreateStore(init, accs.back());
    }
    loopDims(reducedDims, 0, coords, [&] {
      for (size_t v = 0; v < xs.size(); ++v) {
        std::vector<llvm::Value*> c = coords;
        c[lane_] = xs[v];
        if (&r == &nest_->reductions.front() && !reducedDims.empty())
          prefetchAhead(c, reducedDims.back(), storeHere);
        Point p = point(c, n);
        p.reduced = &reduced[v];
        llvm::Value* x = splat(b_, eval(r.body, p), n);
        b_.CreateStore(combine(r, b_.CreateLoad(accs[v]->getAllocatedType(), accs[v]), x), accs[v]);
        if (storeHere) stores(p, false);
      }
    });
    for (size_t v = 0; v < xs.size(); ++v)
      reduced[v].push_back(finish(r, b_.CreateLoad(accs[v]->getAllocatedType(), accs[v])));
  }
}

void KernelRenderer::prefetchAhead(const std::vector<llvm::Value*>& coords, size_t dim, bool withStores) {
  std::vector<llvm::Value*> c = coords;
  c[dim] = b_.CreateAdd(c[dim], i64(kReduceAhead));
  const Point p = point(c, 1);
  auto fetch = [&](int32_t buffer, const kernels::IndexMap& map, bool write) {
    if (map.index.coeff[dim] == 0) return;  // the same element every step
    llvm::Type* st = storageType(b_, k_.buffers[buffer].type.dtype);
    // Not `inbounds`: past the last row the address lies outside the buffer (prefetches never fault).
    llvm::Value* at = b_.CreateGEP(st, bases_.at(buffer), affine(map.index, p).first);
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                       {at, b_.getInt32(write ? 1 : 0), /*locality: L1*/ b_.getInt32(3), /*data*/ b_.getInt32(1)});
  };
  for (const kernels::Load& l : nest_->loads) fetch(l.buffer, l.map, false);
  if (withStores)
    for (const kernels::Store& st : nest_->stores)
      if (!st.outer) fetch(st.buffer, st.map, true);
}

}  // namespace kiln::cpu::render
