#include "codegen/cpu/Render.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/ElementwiseIR.h"
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/PhiloxIR.h"
#include "codegen/cpu/ReduceIR.h"
#include "codegen/cpu/RenderOps.h"
#include "kernels/Kernel.h"
#include "kernels/Simplify.h"
#include "support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace kiln::cpu {
namespace {

using kernels::Affine;
using kernels::Expr;
using kernels::Kernel;
using kernels::LoopNest;
using ir::OpKind;

/// Points of work below which a nest runs on the calling thread: waking the pool costs about a
/// microsecond, a few thousand vectorized expression evaluations.
constexpr int64_t kParallelWork = 1 << 16;
// Independent vector accumulators of a reduction along the lane dimension: one chain of adds
// waits out the add's latency (3-4 cycles) per vector; four chains keep loads and adds in flight.
constexpr int kReduceChains = 4;
// Steps ahead along the reduced dimension that column sums prefetch (reduceVectors).
constexpr int64_t kReduceAhead = 8;

class KernelRenderer {
 public:
  KernelRenderer(llvm::Module& m, const Kernel& k, const VectorIsa& isa)
      : m_(m), ctx_(m.getContext()), b_(ctx_), k_(k), isa_(isa), lanes_(isa.f32Lanes) {}

  llvm::Function* render() {
    if (k_.op) return renderOpKernel(m_, k_, isa_);
    if (k_.hasContraction) return renderContraction();
    llvm::Function* fn = newFunction(k_.name, kernelFunctionType(ctx_));
    llvm::Value* bufs = fn->getArg(0);
    llvm::Value* pool = fn->getArg(1);
    std::vector<std::pair<llvm::Function*, std::array<int64_t, 2>>> chunks;
    for (size_t i = 0; i < k_.nests.size(); ++i) chunks.push_back(renderNest(k_.nests[i], i));
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    for (auto& [chunk, sizes] : chunks) {
      auto [items, grain] = sizes;
      if (items < 2 * grain) {
        b_.CreateCall(chunk, {bufs, i64(0), i64(items)});
      } else {
        b_.CreateCall(declareParallelFor(m_), {pool, i64(0), i64(items), i64(grain), chunk, bufs});
      }
    }
    b_.CreateRetVoid();
    return fn;
  }

 private:
  // ---- small IR helpers --------------------------------------------------------------------

  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  llvm::Function* newFunction(const std::string& name, llvm::FunctionType* type,
                              llvm::GlobalValue::LinkageTypes linkage = llvm::GlobalValue::ExternalLinkage) {
    KILN_CHECK(!m_.getFunction(name), "kernel '{}': the module already defines '{}'", k_.name, name);
    llvm::Function* fn = llvm::Function::Create(type, linkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    return fn;
  }

  llvm::AllocaInst* entryAlloca(llvm::Type* t) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return eb.CreateAlloca(t);
  }

  /// for (iv = lo; iv + step <= hi; iv += step) body(iv); returns the first iv that failed.
  llvm::Value* loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::function<void(llvm::Value*)>& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    llvm::BasicBlock* bodyBlock = llvm::BasicBlock::Create(ctx_, "body", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2);
    iv->addIncoming(lo, pre);
    llvm::Value* cond = step == 1 ? b_.CreateICmpSLT(iv, hi) : b_.CreateICmpSLE(b_.CreateAdd(iv, i64(step)), hi);
    b_.CreateCondBr(cond, bodyBlock, exit);
    b_.SetInsertPoint(bodyBlock);
    body(iv);
    llvm::Value* next = b_.CreateAdd(iv, i64(step));
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header)->setMetadata(llvm::LLVMContext::MD_loop, loopMetadata());
    b_.SetInsertPoint(exit);
    return iv;
  }

  /// Our loops are vectorized already and their trip counts are often constants: LLVM must
  /// neither vectorize nor unroll them (unrolling a 1000-point loop makes compiles take seconds).
  llvm::MDNode* loopMetadata() {
    llvm::Metadata* unroll = llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.disable"));
    llvm::Metadata* vectorize = llvm::MDNode::get(
        ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b_.getFalse())});
    llvm::TempMDTuple self = llvm::MDTuple::getTemporary(ctx_, {});
    llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, {self.get(), unroll, vectorize});
    md->replaceOperandWith(0, md);
    return md;
  }

  /// Lane loop over [lo, hi): whole vectors first, then one point at a time.
  /// `span` is the most points [lo, hi) can hold and `whole` whether hi - lo is always a multiple
  /// of the lane count, so loops that never run are not emitted.
  void laneLoop(llvm::Value* lo, llvm::Value* hi, int64_t span, bool whole,
                const std::function<void(llvm::Value*, int)>& body) {
    llvm::Value* rest = lo;
    if (lanes_ > 1 && span >= lanes_) rest = loop(lo, hi, lanes_, [&](llvm::Value* iv) { body(iv, lanes_); });
    if (!whole || lanes_ == 1) loop(rest, hi, 1, [&](llvm::Value* iv) { body(iv, 1); });
  }

  /// Nested loops over the dimensions `dims` of the current nest, setting coords[d].
  void loopDims(const std::vector<size_t>& dims, size_t i, std::vector<llvm::Value*>& coords,
                const std::function<void()>& body) {
    if (i == dims.size()) return body();
    loop(i64(0), i64(nest_->domain[dims[i]]), 1, [&](llvm::Value* iv) {
      coords[dims[i]] = iv;
      loopDims(dims, i + 1, coords, body);
    });
  }

  llvm::Value* bufferBase(int32_t buffer) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs_, static_cast<uint64_t>(buffer));
    return b_.CreateLoad(b_.getPtrTy(), slot, fmt::format("{}.base", k_.buffers[buffer].name));
  }

  // ---- points ------------------------------------------------------------------------------

  /// Where expressions are being evaluated: one coordinate per domain dimension (the lane
  /// dimension's is the first lane), the lane count, and memoized values.
  struct Point {
    std::vector<llvm::Value*> coords;
    int lanes = 1;
    std::vector<llvm::Value*> memo;
    std::vector<llvm::Value*>* reduced = nullptr;
    llvm::Value* acc = nullptr;  // contraction epilogues: the product at this point (lanes wide)
  };

  Point point(std::vector<llvm::Value*> coords, int lanes) {
    Point p;
    p.coords = std::move(coords);
    p.lanes = lanes;
    p.memo.assign(nest_->exprs.size(), nullptr);
    return p;
  }

  /// An affine function at p: the scalar value at the first lane and the per-lane step.
  std::pair<llvm::Value*, int64_t> affine(const Affine& a, const Point& p) {
    llvm::Value* v = i64(a.constant);
    for (size_t d = 0; d < a.coeff.size(); ++d)
      if (a.coeff[d] != 0) v = b_.CreateAdd(v, b_.CreateMul(p.coords[d], i64(a.coeff[d])));
    return {v, p.lanes > 1 ? a.coeff[lane_] : 0};
  }

  /// base + step * <0, 1, …, lanes-1>.
  llvm::Value* laneVector(llvm::Value* base, int64_t step, int lanes) {
    std::vector<llvm::Constant*> steps;
    for (int l = 0; l < lanes; ++l) steps.push_back(b_.getInt64(static_cast<uint64_t>(step * l)));
    return b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(lanes), base), llvm::ConstantVector::get(steps));
  }

  llvm::Value* load(const kernels::Load& l, Point& p) {
    const kernels::Buffer& buf = k_.buffers[l.buffer];
    DType t = buf.type.dtype;
    llvm::Type* st = storageType(b_, t);
    llvm::Align align(static_cast<uint64_t>(dtypeSize(t)));
    llvm::Value* base = bases_.at(l.buffer);
    auto [index, step] = affine(l.map.index, p);
    llvm::Value* inside = nullptr;  // scalar condition
    llvm::Value* mask = nullptr;    // per-lane condition
    for (const auto& bound : l.map.bounds) {
      auto [v, s] = affine(bound.value, p);
      if (s == 0) {
        llvm::Value* c = b_.CreateICmpULT(v, i64(bound.limit));
        inside = inside ? b_.CreateAnd(inside, c) : c;
      } else {
        llvm::Value* c = b_.CreateICmpULT(laneVector(v, s, p.lanes), llvm::ConstantInt::get(withLanes(b_.getInt64Ty(), p.lanes), static_cast<uint64_t>(bound.limit)));
        mask = mask ? b_.CreateAnd(mask, c) : c;
      }
    }
    llvm::Value* pad = constant(b_, t, l.map.padValue, 1);
    if (p.lanes == 1 || (step == 0 && !mask)) {  // one element, splat later if needed
      llvm::Value* at = inside ? b_.CreateSelect(inside, index, i64(0)) : index;
      llvm::Value* v = fromStorage(b_, t, b_.CreateAlignedLoad(st, b_.CreateInBoundsGEP(st, base, at), align));
      return inside ? b_.CreateSelect(inside, v, pad) : v;
    }
    if (inside && !mask && step == 1) {
      // A row wholly inside or wholly padding (a pad of leading dimensions: the gradients of
      // slices stacked into one tensor): a branch on the row, which the loop over the row's
      // vectors does not change, instead of a load per vector whose lanes are all masked off.
      llvm::Function* f = b_.GetInsertBlock()->getParent();
      auto* read = llvm::BasicBlock::Create(b_.getContext(), "pad.read", f);
      auto* join = llvm::BasicBlock::Create(b_.getContext(), "pad.join", f);
      llvm::BasicBlock* from = b_.GetInsertBlock();
      llvm::Value* padding = splat(b_, pad, p.lanes);
      b_.CreateCondBr(inside, read, join);
      b_.SetInsertPoint(read);
      llvm::Value* v = fromStorage(b_, t, b_.CreateAlignedLoad(withLanes(st, p.lanes), b_.CreateInBoundsGEP(st, base, index), align));
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
      llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, read);
      phi->addIncoming(padding, from);
      return phi;
    }
    if (inside) {
      llvm::Value* all = b_.CreateVectorSplat(static_cast<unsigned>(p.lanes), inside);
      mask = mask ? b_.CreateAnd(mask, all) : all;
    }
    llvm::Type* vt = withLanes(st, p.lanes);
    llvm::Value* v;
    if (step == 1 && !mask) {
      v = b_.CreateAlignedLoad(vt, b_.CreateInBoundsGEP(st, base, index), align);
    } else if (step == 1) {
      // Consecutive elements, some lanes padding (a padded view, a pad's rows outside the data):
      // one masked load. A row wholly outside loads from the buffer's start instead: masked-off
      // lanes never fault, but on an unmapped page they cost an AMD core a microcode assist (a
      // pad of whole rows ran 6× slower than with gathers).
      llvm::Value* at = inside ? b_.CreateSelect(inside, index, i64(0)) : index;
      v = b_.CreateMaskedLoad(vt, b_.CreateGEP(st, base, at), align, mask, llvm::Constant::getNullValue(vt));
    } else {
      // Masked-off lanes may point anywhere: they are never dereferenced.
      llvm::Value* ptrs = b_.CreateGEP(st, base, laneVector(index, step, p.lanes));
      if (!mask) mask = llvm::ConstantInt::getTrue(withLanes(b_.getInt1Ty(), p.lanes));
      v = b_.CreateMaskedGather(vt, ptrs, align, mask, llvm::Constant::getNullValue(vt));
    }
    v = fromStorage(b_, t, v);
    return mask ? b_.CreateSelect(mask, v, splat(b_, pad, p.lanes)) : v;
  }

  void store(const kernels::Store& s, Point& p) {
    const kernels::Buffer& buf = k_.buffers[s.buffer];
    DType t = buf.type.dtype;
    llvm::Type* st = storageType(b_, t);
    llvm::Align align(static_cast<uint64_t>(dtypeSize(t)));
    llvm::Value* v = toStorage(b_, t, splat(b_, eval(s.expr, p), p.lanes));
    auto [index, step] = affine(s.map.index, p);
    llvm::Value* base = bases_.at(s.buffer);
    if (p.lanes == 1) {
      b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(st, base, index), align);
    } else if (step == 1) {
      b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(st, base, index), align);
    } else {
      for (int l = 0; l < p.lanes; ++l)
        b_.CreateAlignedStore(b_.CreateExtractElement(v, static_cast<uint64_t>(l)),
                              b_.CreateInBoundsGEP(st, base, b_.CreateAdd(index, i64(step * l))), align);
    }
  }

  // ---- expressions -------------------------------------------------------------------------

  llvm::Value* eval(int32_t i, Point& p) {
    if (p.memo[i]) return p.memo[i];
    const Expr& e = nest_->exprs[i];
    llvm::Value* v = nullptr;
    switch (e.kind) {
      case Expr::Kind::Load: v = load(nest_->loads[e.load], p); break;
      case Expr::Kind::Constant: v = constant(b_, e.dtype, e.value, 1); break;
      case Expr::Kind::Coord: {
        auto [index, step] = affine(e.index, p);
        llvm::Value* x = step != 0 ? laneVector(index, step, p.lanes) : index;
        x = b_.CreateSRem(b_.CreateSDiv(x, splat(b_, i64(e.divisor), lanesOf(x))), splat(b_, i64(e.modulus), lanesOf(x)));
        v = convert(b_, DType::i64, e.dtype, x);
        break;
      }
      case Expr::Kind::Random: {
        auto [index, step] = affine(e.index, p);
        llvm::Value* x = step != 0 ? laneVector(index, step, p.lanes) : index;
        v = random(e, x);
        break;
      }
      case Expr::Kind::Reduced: v = (*p.reduced)[e.reduction]; break;
      case Expr::Kind::Acc:
        KILN_ASSERT(p.acc, "kernel '{}': Acc outside a contraction epilogue", k_.name);
        v = p.acc;
        break;
      case Expr::Kind::Op: {
        std::vector<llvm::Value*> args;
        int lanes = 1;
        for (int32_t a : e.args) {
          args.push_back(eval(a, p));
          lanes = std::max(lanes, lanesOf(args.back()));
        }
        for (llvm::Value*& a : args) a = splat(b_, a, lanes);
        v = op(e, args);
        break;
      }
    }
    p.memo[i] = v;
    return v;
  }


  llvm::Value* op(const Expr& e, const std::vector<llvm::Value*>& a) {
    DType argType = e.args.empty() ? e.dtype : nest_->exprs[e.args[0]].dtype;
    llvm::Value* r = emitElementwise(b_, m_, e.op, argType, e.dtype, a);
    KILN_CHECK(r, "kernel '{}': the CPU backend cannot compute '{}' in a loop nest", k_.name, ir::opName(e.op));
    return r;
  }

  /// The `random` op's draw for counter offset + x (x: i64 scalar or vector), at step 0.
  llvm::Value* random(const Expr& e, llvm::Value* x) {
    llvm::Value* counter = b_.CreateAdd(x, splat(b_, i64(static_cast<int64_t>(e.offset)), lanesOf(x)));
    return convert(b_, DType::f32, e.dtype, emitPhiloxDraw(b_, e.seed, counter, i64(0), e.normal));
  }

  // ---- reductions --------------------------------------------------------------------------

  /// The accumulator of reduction r: its identity (lanes wide) and combine.
  DType accumulatorType(const kernels::Reduction& r) const {
    DType body = nest_->exprs[r.body].dtype;
    KILN_CHECK(body != DType::boolean, "kernel '{}': the CPU backend cannot reduce bool values", k_.name);
    return body;
  }

  llvm::Value* identity(const kernels::Reduction& r, int lanes) {
    return reductionIdentity(b_, r.op, accumulatorType(r), lanes);
  }
  llvm::Value* combine(const kernels::Reduction& r, llvm::Value* acc, llvm::Value* x) {
    return reductionCombine(b_, r.op, accumulatorType(r), acc, x);
  }
  /// The lanes of a vector accumulator combined into one value.
  llvm::Value* horizontal(const kernels::Reduction& r, llvm::Value* acc) {
    return reductionHorizontal(b_, r.op, accumulatorType(r), acc);
  }

  /// The finished reduction as the reduction's dtype.
  llvm::Value* finish(const kernels::Reduction& r, llvm::Value* acc) {
    return convert(b_, accumulatorType(r), r.dtype, acc);
  }

  // ---- nests -------------------------------------------------------------------------------

  /// Loads buffer bases at the top of the current function (the first argument is bufs).
  void loadBases() {
    bases_.clear();
    for (size_t i = 0; i < k_.buffers.size(); ++i) bases_.push_back(bufferBase(static_cast<int32_t>(i)));
  }

  /// Runs the reductions along the lane dimension (reduced) for the current outer point (coords
  /// hold it; the other reduced dims are looped over `reducedDims`, the lane dimension innermost),
  /// filling `reduced`.
  void reduceAlongLanes(std::vector<llvm::Value*>& coords, const std::vector<size_t>& reducedDims,
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

  /// The reductions over the reduced dimensions `reducedDims` (the lane dimension kept) at the
  /// vectors of n lanes starting at `xs`, all at once: one accumulator per vector and reduction,
  /// the reduced dimensions looped over once for all of them, so a row's vectors are read
  /// together. reduced[v] gets vector v's results.
  /// With `storeInside`, the first reduction's pass also makes the full stores (none reads a
  /// reduction's result), so the rows are read once.
  void reduceVectors(std::vector<llvm::Value*>& coords, const std::vector<llvm::Value*>& xs, int n,
                     const std::vector<size_t>& reducedDims, std::vector<std::vector<llvm::Value*>>& reduced,
                     bool storeInside = false) {
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

  /// Prefetches the lines that the loads (and, with `withStores`, the full stores) of the point
  /// kReduceAhead steps further along dimension `dim` will touch. Column sums walk rows a row
  /// stride apart, a few vectors of each, where the hardware prefetchers barely look ahead:
  /// simplenet's ReLU gradient with its bias sums (10000 rows of 256 columns in bands of 64, a 1 KB
  /// stride; `kiln explain simplenet --train --optimizer adam --batch 10000 --measure`, Emerald
  /// Rapids VM, six interleaved pairs) 1109–1231 → 940–1083 µs; 24 steps ahead, the same.
  void prefetchAhead(const std::vector<llvm::Value*>& coords, size_t dim, bool withStores) {
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

  void stores(Point& p, bool outer) {
    for (const kernels::Store& s : nest_->stores)
      if (s.outer == outer) store(s, p);
  }

  /// Emits the chunk function of nest `index`: `void(void* bufs, i64 begin, i64 end)` over the
  /// nest's work items. Returns it with the item count and the grain for the thread pool.
  std::pair<llvm::Function*, std::array<int64_t, 2>> renderNest(const LoopNest& source, size_t index) {
    std::vector<int> group(source.domain.size(), 0);
    LoopNest nest = kernels::simplifyNest(source, group);
    if (nest.domain.empty()) {  // a single point
      nest.domain = {1};
      nest.reduced = {false};
      kernels::forEachAffine(nest, [](Affine& a) { a.coeff = {0}; });
    }
    nest_ = &nest;
    lane_ = nest.domain.size() - 1;
    // A reduction along a dimension shorter than a vector (a softmax over 10 classes) would run
    // one element at a time: the lanes go along the innermost kept dimension instead, a vector
    // of rows reduced at once (their loads gathered), when it fills a vector.
    if (nest.reduced[lane_] && nest.domain[lane_] < lanes_)
      for (size_t d = lane_; d-- > 0;)
        if (!nest.reduced[d]) {
          if (nest.domain[d] >= lanes_) lane_ = d;
          break;
        }
    const bool laneReduced = nest.reduced[lane_];
    const int64_t laneSize = nest.domain[lane_];
    const bool hasInnerStores =
        std::any_of(nest.stores.begin(), nest.stores.end(), [](const kernels::Store& st) { return !st.outer; });
    std::vector<size_t> itemDims, reducedDims;
    for (size_t d = 0; d < nest.domain.size(); ++d) {
      if (nest.reduced[d]) {
        if (d != lane_) reducedDims.push_back(d);
      } else if (d != lane_) {
        itemDims.push_back(d);
      }
    }
    int64_t outerItems = 1;
    for (size_t d : itemDims) outerItems *= nest.domain[d];
    // Without a reduced lane dimension the lane dimension is cut into blocks that are items too,
    // so a one-dimensional loop still splits across threads.
    int64_t laneBlock = laneSize, blocks = 1;
    // Sums over rows (a bias gradient's column sums) keep blocks of kReduceChains vectors, whose
    // row pieces are read together, and make the full stores in the same pass when they can.
    const bool columnSums = !laneReduced && !reducedDims.empty() && !nest.reductions.empty();
    if (!laneReduced && outerItems < 8 && laneSize > 4 * lanes_) {
      laneBlock = (laneSize / 8 + lanes_ - 1) / lanes_ * lanes_;
      if (columnSums) laneBlock = std::min(std::max<int64_t>(laneBlock, kReduceChains * lanes_), laneSize);
      blocks = (laneSize + laneBlock - 1) / laneBlock;
    }
    const bool storeInside = columnSums && hasInnerStores && !kernels::fullStoresReadReductions(nest);
    const int64_t items = laneReduced ? outerItems : outerItems * blocks;
    int64_t work = ir::numElements(nest.domain) * static_cast<int64_t>(std::max<size_t>(nest.exprs.size(), 1));
    int64_t perItem = std::max<int64_t>(work / std::max<int64_t>(items, 1), 1);
    int64_t grain = std::max<int64_t>(1, kParallelWork / perItem);

    llvm::FunctionType* chunkType =
        llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getInt64Ty(), b_.getInt64Ty()}, false);
    fn_ = newFunction(fmt::format("{}.nest{}", k_.name, index), chunkType, llvm::GlobalValue::InternalLinkage);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    bufs_ = fn_->getArg(0);
    loadBases();
    loop(fn_->getArg(1), fn_->getArg(2), 1, [&](llvm::Value* item) {
      std::vector<llvm::Value*> coords(nest.domain.size(), i64(0));
      llvm::Value* rest = item;
      llvm::Value* block = nullptr;
      if (!laneReduced) {
        block = b_.CreateURem(rest, i64(blocks));
        rest = b_.CreateUDiv(rest, i64(blocks));
      }
      for (size_t i = itemDims.size(); i-- > 0;) {
        size_t d = itemDims[i];
        coords[d] = b_.CreateURem(rest, i64(nest.domain[d]));
        rest = b_.CreateUDiv(rest, i64(nest.domain[d]));
      }
      if (laneReduced) {
        std::vector<llvm::Value*> reduced;
        reduceAlongLanes(coords, reducedDims, reduced);
        Point outer = point(coords, 1);
        outer.reduced = &reduced;
        stores(outer, true);
        if (!hasInnerStores) return;  // no empty loops: LLVM may not delete them
        std::vector<size_t> full = reducedDims;
        loopDims(full, 0, coords, [&] {
          laneLoop(i64(0), i64(laneSize), laneSize, laneSize % lanes_ == 0, [&](llvm::Value* x, int n) {
            std::vector<llvm::Value*> c = coords;
            c[lane_] = x;
            Point p = point(c, n);
            p.reduced = &reduced;
            stores(p, false);
          });
        });
        return;
      }
      llvm::Value* lo = b_.CreateMul(block, i64(laneBlock));
      llvm::Value* hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(lo, i64(laneBlock)), i64(laneSize));
      // The stores of the vector at lane coordinate c[lane_] once its reductions are done.
      auto storeVector = [&](std::vector<llvm::Value*>& c, int n, std::vector<llvm::Value*>& reduced) {
        if (!nest.reductions.empty()) {
          Point outer = point(c, n);
          outer.reduced = &reduced;
          stores(outer, true);
        }
        if (reducedDims.empty()) {
          Point p = point(c, n);
          p.reduced = &reduced;
          stores(p, false);
          return;
        }
        if (!hasInnerStores || storeInside) return;  // no empty loops: LLVM may not delete them
        loopDims(reducedDims, 0, c, [&] {
          Point p = point(c, n);
          p.reduced = &reduced;
          stores(p, false);
        });
      };
      // Reductions over outer dimensions take kReduceChains vectors of the lane dimension at a
      // time: a row's vectors are read together, each into its own accumulator.
      llvm::Value* from = lo;
      if (!nest.reductions.empty() && !reducedDims.empty() && lanes_ > 1 && laneBlock >= kReduceChains * lanes_)
        from = loop(lo, hi, kReduceChains * lanes_, [&](llvm::Value* x) {
          std::vector<llvm::Value*> c = coords, xs;
          for (int v = 0; v < kReduceChains; ++v) xs.push_back(b_.CreateAdd(x, i64(v * lanes_)));
          std::vector<std::vector<llvm::Value*>> reduced;
          reduceVectors(c, xs, lanes_, reducedDims, reduced, storeInside);
          for (size_t v = 0; v < xs.size(); ++v) {
            c[lane_] = xs[v];
            storeVector(c, lanes_, reduced[v]);
          }
        });
      laneLoop(from, hi, laneBlock, laneBlock % lanes_ == 0 && laneSize % lanes_ == 0, [&](llvm::Value* x, int n) {
        std::vector<llvm::Value*> c = coords;
        c[lane_] = x;
        std::vector<std::vector<llvm::Value*>> reduced(1);
        if (!nest.reductions.empty()) reduceVectors(c, {x}, n, reducedDims, reduced, storeInside);
        storeVector(c, n, reduced[0]);
      });
    });
    b_.CreateRetVoid();
    nest_ = nullptr;
    return {fn_, {items, grain}};
  }

  // ---- contractions ------------------------------------------------------------------------

  /// How many leading dimensions of the contraction's result form its batch and M parts
  /// (kernels/Gemm.h: the result is row-major [batch, M, N]).
  std::array<int, 3> resultSplit() const {
    int rank = static_cast<int>(k_.contraction.result.shape.size());
    switch (k_.contraction.op) {
      case OpKind::MatMul: return {rank - 2, 1, 1};
      case OpKind::Conv2d:
      case OpKind::Conv2dGradInput: return {1, 1, 2};
      case OpKind::Conv2dGradWeight: return {0, 1, 3};
      default: KILN_THROW("kernel '{}': '{}' is not a contraction", k_.name, ir::opName(k_.contraction.op));
    }
  }

  /// The epilogue `void(void** bufs, const ACC* tile, i64 ldt, i64 b, i64 m0, i64 m1, i64 n0,
  /// i64 n1)` (Gemm.h): the kernel's nest over one finished block of the product.
  llvm::Function* renderEpilogue() {
    KILN_CHECK(k_.nests.size() == 1 && k_.nests[0].reductions.empty(),
               "kernel '{}': a contraction epilogue is one nest without reductions", k_.name);
    const LoopNest& source = k_.nests[0];
    std::array<int, 3> split = resultSplit();
    std::vector<int> group;
    for (int g = 0; g < 3; ++g) group.insert(group.end(), static_cast<size_t>(split[g]), g);
    KILN_CHECK(group.size() == source.domain.size(), "kernel '{}': epilogue domain rank {} != result rank {}",
               k_.name, source.domain.size(), group.size());
    LoopNest nest = kernels::simplifyNest(source, group);
    nest_ = &nest;
    lane_ = nest.domain.empty() ? 0 : nest.domain.size() - 1;
    std::array<std::vector<size_t>, 3> dims;
    for (size_t d = 0; d < nest.domain.size(); ++d) dims[static_cast<size_t>(group[d])].push_back(d);
    const DType acc = dtypeOf(accTypeOf(k_));
    llvm::Type* accType = computeType(b_, acc);

    llvm::Type* i64t = b_.getInt64Ty();
    llvm::FunctionType* type = llvm::FunctionType::get(
        b_.getVoidTy(), {b_.getPtrTy(), b_.getPtrTy(), i64t, i64t, i64t, i64t, i64t, i64t}, false);
    fn_ = newFunction(k_.name + ".epilogue", type, llvm::GlobalValue::InternalLinkage);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    bufs_ = fn_->getArg(0);
    llvm::Value* tile = fn_->getArg(1);
    llvm::Value* ldt = fn_->getArg(2);
    llvm::Value* batch = fn_->getArg(3);
    llvm::Value *m0 = fn_->getArg(4), *m1 = fn_->getArg(5), *n0 = fn_->getArg(6), *n1 = fn_->getArg(7);
    loadBases();
    // Coordinates of a group's flat index (row-major over its dimensions).
    auto unravel = [&](size_t g, llvm::Value* flat, std::vector<llvm::Value*>& coords) {
      for (size_t i = dims[g].size(); i-- > 0;) {
        size_t d = dims[g][i];
        coords[d] = i == 0 ? flat : b_.CreateURem(flat, i64(nest.domain[d]));
        flat = b_.CreateUDiv(flat, i64(nest.domain[d]));
      }
    };
    // The lane dimension is N's only dimension when N merged into one; otherwise one point at a time.
    const bool vectorN = dims[2].size() == 1;
    loop(m0, m1, 1, [&](llvm::Value* m) {
      std::vector<llvm::Value*> coords(nest.domain.size(), i64(0));
      unravel(0, batch, coords);
      unravel(1, m, coords);
      llvm::Value* row = b_.CreateMul(b_.CreateSub(m, m0), ldt);
      auto body = [&](llvm::Value* n, int lanes) {
        std::vector<llvm::Value*> c = coords;
        unravel(2, n, c);
        Point p = point(c, lanes);
        llvm::Value* at = b_.CreateInBoundsGEP(accType, tile, b_.CreateAdd(row, b_.CreateSub(n, n0)));
        p.acc = b_.CreateAlignedLoad(withLanes(accType, lanes), at, llvm::Align(static_cast<uint64_t>(dtypeSize(acc))));
        for (const Expr& e : nest.exprs)
          if (e.kind == Expr::Kind::Acc) {
            p.acc = convert(b_, acc, e.dtype, p.acc);
            break;
          }
        stores(p, false);
      };
      if (vectorN) {
        laneLoop(n0, n1, std::numeric_limits<int64_t>::max(), false, body);
      } else {
        loop(n0, n1, 1, [&](llvm::Value* n) { body(n, 1); });
      }
    });
    b_.CreateRetVoid();
    nest_ = nullptr;
    return fn_;
  }

  llvm::Function* renderContraction() {
    llvm::Function* epilogue = renderEpilogue();
    return emitContraction(m_, k_.name, k_, epilogue, isa_);
  }

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  const VectorIsa& isa_;
  const int lanes_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* bufs_ = nullptr;
  std::vector<llvm::Value*> bases_;
  const LoopNest* nest_ = nullptr;
  size_t lane_ = 0;
};

}  // namespace

llvm::Function* renderKernel(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa) {
  return KernelRenderer(m, k, isa).render();
}

int64_t kernelScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads) {
  if (k.op) return opKernelScratchBytes(k);
  return k.hasContraction ? contractionScratchBytes(k, isa, threads) : 0;
}

}  // namespace kiln::cpu
