#include "codegen/cpu/Render.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/ElementwiseIR.h"
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/PhiloxIR.h"
#include "codegen/cpu/RenderKernel.h"
#include "codegen/cpu/RenderOps.h"
#include "kernels/Simplify.h"
#include "support/Error.h"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cpu {
namespace render {

/// Lane strides (in elements) up to which a load of a loop nest reads the lanes' span as one wide
/// vector and shuffles (load below) instead of gathering.
constexpr int64_t kStridedLoadMost = 4;

llvm::Function* KernelRenderer::render() {
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

llvm::Function* KernelRenderer::newFunction(const std::string& name, llvm::FunctionType* type,
                                            llvm::GlobalValue::LinkageTypes linkage) {
  KILN_CHECK(!m_.getFunction(name), "kernel '{}': the module already defines '{}'", k_.name, name);
  llvm::Function* fn = llvm::Function::Create(type, linkage, name, m_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

llvm::AllocaInst* KernelRenderer::entryAlloca(llvm::Type* t) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return eb.CreateAlloca(t);
}

llvm::Value* KernelRenderer::loop(llvm::Value* lo, llvm::Value* hi, int64_t step,
                                  const std::function<void(llvm::Value*)>& body) {
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

llvm::MDNode* KernelRenderer::loopMetadata() {
  llvm::Metadata* unroll = llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.disable"));
  llvm::Metadata* vectorize = llvm::MDNode::get(
      ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b_.getFalse())});
  llvm::TempMDTuple self = llvm::MDTuple::getTemporary(ctx_, {});
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, {self.get(), unroll, vectorize});
  md->replaceOperandWith(0, md);
  return md;
}

void KernelRenderer::laneLoop(llvm::Value* lo, llvm::Value* hi, int64_t span, bool whole,
                              const std::function<void(llvm::Value*, int)>& body) {
  llvm::Value* rest = lo;
  if (lanes_ > 1 && span >= lanes_) rest = loop(lo, hi, lanes_, [&](llvm::Value* iv) { body(iv, lanes_); });
  if (!whole || lanes_ == 1) loop(rest, hi, 1, [&](llvm::Value* iv) { body(iv, 1); });
}

void KernelRenderer::loopDims(const std::vector<size_t>& dims, size_t i, std::vector<llvm::Value*>& coords,
                              const std::function<void()>& body) {
  if (i == dims.size()) return body();
  loop(i64(0), i64(nest_->domain[dims[i]]), 1, [&](llvm::Value* iv) {
    coords[dims[i]] = iv;
    loopDims(dims, i + 1, coords, body);
  });
}

llvm::Value* KernelRenderer::bufferBase(int32_t buffer) {
  llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs_, static_cast<uint64_t>(buffer));
  return b_.CreateLoad(b_.getPtrTy(), slot, fmt::format("{}.base", k_.buffers[buffer].name));
}

KernelRenderer::Point KernelRenderer::point(std::vector<llvm::Value*> coords, int lanes) {
  Point p;
  p.coords = std::move(coords);
  p.lanes = lanes;
  p.memo.assign(nest_->exprs.size(), nullptr);
  return p;
}

std::pair<llvm::Value*, int64_t> KernelRenderer::affine(const Affine& a, const Point& p) {
  llvm::Value* v = i64(a.constant);
  for (size_t d = 0; d < a.coeff.size(); ++d)
    if (a.coeff[d] != 0) v = b_.CreateAdd(v, b_.CreateMul(p.coords[d], i64(a.coeff[d])));
  return {v, p.lanes > 1 ? a.coeff[lane_] : 0};
}

llvm::Value* KernelRenderer::laneVector(llvm::Value* base, int64_t step, int lanes) {
  std::vector<llvm::Constant*> steps;
  for (int l = 0; l < lanes; ++l) steps.push_back(b_.getInt64(static_cast<uint64_t>(step * l)));
  return b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(lanes), base), llvm::ConstantVector::get(steps));
}

llvm::Value* KernelRenderer::load(const kernels::Load& l, Point& p) {
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
  } else if (!mask && step >= 2 && step <= kStridedLoadMost) {
    // Lanes a few elements apart (a row of a transposed thin operand, a 256 × 2 weight read as its
    // transpose): the lanes' span loaded as one wide vector and every step-th element picked by a
    // shuffle (vpermt2ps) instead of a gather, which is slow on the Xeon with AMX (likely the
    // microcode of the GDS mitigation): a 10000×2 · (256×2)ᵀ product as outer products took 704 µs
    // with gathers, 461 µs this way. The span's last step − 1 elements, past the last lane, are
    // masked off: they may lie past the buffer's end.
    const int span = static_cast<int>(step) * p.lanes;
    llvm::Type* wide = withLanes(st, span);
    std::vector<llvm::Constant*> read;
    std::vector<int> pick;
    for (int e = 0; e < span; ++e) read.push_back(b_.getInt1(e <= static_cast<int>(step) * (p.lanes - 1)));
    for (int l = 0; l < p.lanes; ++l) pick.push_back(l * static_cast<int>(step));
    llvm::Value* all = b_.CreateMaskedLoad(wide, b_.CreateInBoundsGEP(st, base, index), align,
                                           llvm::ConstantVector::get(read), llvm::Constant::getNullValue(wide));
    v = b_.CreateShuffleVector(all, pick);
  } else {
    // Masked-off lanes may point anywhere: they are never dereferenced.
    llvm::Value* ptrs = b_.CreateGEP(st, base, laneVector(index, step, p.lanes));
    if (!mask) mask = llvm::ConstantInt::getTrue(withLanes(b_.getInt1Ty(), p.lanes));
    v = b_.CreateMaskedGather(vt, ptrs, align, mask, llvm::Constant::getNullValue(vt));
  }
  v = fromStorage(b_, t, v);
  return mask ? b_.CreateSelect(mask, v, splat(b_, pad, p.lanes)) : v;
}

void KernelRenderer::store(const kernels::Store& s, Point& p) {
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

llvm::Value* KernelRenderer::eval(int32_t i, Point& p) {
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

llvm::Value* KernelRenderer::op(const Expr& e, const std::vector<llvm::Value*>& a) {
  DType argType = e.args.empty() ? e.dtype : nest_->exprs[e.args[0]].dtype;
  llvm::Value* r = emitElementwise(b_, m_, e.op, argType, e.dtype, a);
  KILN_CHECK(r, "kernel '{}': the CPU backend cannot compute '{}' in a loop nest", k_.name, ir::opName(e.op));
  return r;
}

llvm::Value* KernelRenderer::random(const Expr& e, llvm::Value* x) {
  llvm::Value* counter = b_.CreateAdd(x, splat(b_, i64(static_cast<int64_t>(e.offset)), lanesOf(x)));
  return convert(b_, DType::f32, e.dtype, emitPhiloxDraw(b_, e.seed, counter, i64(0), e.normal));
}

void KernelRenderer::loadBases() {
  bases_.clear();
  for (size_t i = 0; i < k_.buffers.size(); ++i) bases_.push_back(bufferBase(static_cast<int32_t>(i)));
}

void KernelRenderer::stores(Point& p, bool outer) {
  for (const kernels::Store& s : nest_->stores)
    if (s.outer == outer) store(s, p);
}

std::pair<llvm::Function*, std::array<int64_t, 2>> KernelRenderer::renderNest(const LoopNest& source, size_t index) {
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

}  // namespace render

llvm::Function* renderKernel(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa) {
  return render::KernelRenderer(m, k, isa).render();
}

int64_t kernelScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads) {
  if (k.op) return opKernelScratchBytes(k);
  return k.hasContraction ? contractionScratchBytes(k, isa, threads) : 0;
}

}  // namespace kiln::cpu
