// The packed, register-blocked GEMM of contraction kernels, after BLIS (Van Zee and van de Geijn,
// "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", TOMS 2015), in LLVM IR.
//
// Work items. The product [batch, M, N] of the kernel's GEMM form (kernels/Gemm.h) is cut into
// C blocks of at most MB × NB. One work item computes one block over all of K into a tile in its
// thread's scratch slot and hands the tile to the epilogue, so every block is finished, and
// leaves the cache, exactly once. The chunks of one kiln_parallel_for each claim a slot, then
// claim items one at a time from a shared counter (both counters live in the scratch header), so
// a thread that starts late or runs slower simply takes fewer items. Which thread computes an
// item never changes its result: the output is the same for every thread count.
//
// One item, for each KC-deep slice of K:
//
//     pack B[slice, n block] into panels KC × NR           (GemmPack.cpp)
//     pack A[m block, slice] into panels MR × KC
//     for each B panel, for each A panel:
//         micro-kernel: tile[MR × NR] (+)= A panel · B panel
//
// Items run through the M blocks of one N block in turn, and when B over all of K fits
// kPackedBBudget, it is packed whole (K × NB) and kept in the slot: the next item of the same
// B block skips packing B. Packing converts f16/bf16 to f32 (i32 to i64) and absorbs transposes,
// broadcast batches and convolution windows (implicit GEMM, padding reads 0). Panels are
// zero-padded to full MR / NR and to a multiple of the K unroll, so the micro-kernel has no edge
// cases: an edge tile computes rows and columns in the tile's padding that the epilogue never
// reads. The micro-kernel keeps MR × NR/lanes vector accumulators in registers (explicit vector
// types, llvm.fmuladd), broadcasts A and loads B, and adds into the tile after the first slice.
//
// Blocking, f32 (f64 and i64 keep the byte sizes: half the elements per vector, NR and NB):
//
//   ISA       MR × NR   accumulators   KC    MB    NB
//   AVX2      6 × 16    12 ymm         256   144   512
//   AVX-512   12 × 32   24 zmm         192   144   512
//   SSE       4 × 8     8 xmm          256   144   512
//
//   - a B panel (KC × NR: 16 KiB on AVX2, 24 KiB on AVX-512) stays in L1 (32-48 KiB) while the
//     micro-kernel runs down all A panels of the block;
//   - the packed A block (MB × KC, 144 KiB) stays in L2 (512 KiB and up) and is read once per B
//     panel;
//   - the tile (MB × NB, 288 KiB) is read and written once per K slice (L2/L3), and is in cache
//     when the epilogue reads it;
//   - packed B (KC × NB = 512 KiB per slice, up to 4 MiB for all of K) streams from L3.
// A is packed ⌈N / NB⌉ times (2·NB flops per packed element); B once per thread and N block, or,
// when K is too deep to keep it, once per item (2·MB flops per packed element).
//
// Parallelism: GEMMs under kParallelFlops run on the calling thread (the grain is the item count,
// so kiln_parallel_for runs them inline). Larger ones split their blocks until there are at least
// 4 items, and an even number below 16, so two threads always both get work.
//
// f64 accumulates in f64 and integers in wrapping i64, with the same blocking and micro-kernel on
// their own vector types.
#include "codegen/cpu/Gemm.h"

#include "codegen/cpu/GemmEmitter.h"
#include "support/Error.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <array>

namespace kiln::cpu {
namespace gemm {
namespace {

constexpr double kParallelFlops = 2.0 * (1 << 20);  // below: one thread (≈ 30 µs of work)
constexpr int64_t kHeaderBytes = 64;                // scratch header: slot and item counters
constexpr int64_t kPackedBBudget = 4 << 20;         // bytes of B kept packed for all of K per thread

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }
int64_t align64(int64_t bytes) { return roundUp(bytes, 64); }

DType operandDType(const kernels::Kernel& k) { return k.buffers.at(k.contraction.a).type.dtype; }

/// Blocks of at most `most` (a multiple of `unit`) covering `size` evenly: the block size.
int64_t evenBlock(int64_t size, int64_t most, int64_t unit) {
  if (size == 0) return unit;
  return roundUp(ceilDiv(size, ceilDiv(size, most)), unit);
}

}  // namespace

Blocking blockingFor(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa) {
  Blocking p;
  const int bytes = accBytes(acc);
  p.lanes = isa.f32Lanes * 4 / bytes;
  p.mr = isa.avx512 ? 12 : isa.f32Lanes == 8 ? 6 : 4;
  p.nr = 2 * p.lanes;
  const int64_t kcMost = isa.avx512 ? 192 : 256, mbMost = 144, nbMost = 512 * 4 / bytes;
  p.kc = f.k == 0 ? 0 : roundUp(ceilDiv(f.k, ceilDiv(f.k, kcMost)), kUnroll);
  p.kBlocks = f.k == 0 ? 1 : ceilDiv(f.k, p.kc);
  p.mb = evenBlock(f.m, mbMost, p.mr);
  p.nb = evenBlock(f.n, nbMost, p.nr);
  // Keep B packed over all of K when that fits the budget with blocks of at least a quarter of
  // NB; the items of one B block then pack it once per thread instead of once each.
  const int64_t depth = std::max<int64_t>(p.kBlocks * p.kc, 1);
  const int64_t nbFits = kPackedBBudget / bytes / depth / p.nr * p.nr;
  p.reuseB = nbFits >= std::min(p.nb, nbMost / 4);
  if (p.reuseB && nbFits < p.nb) p.nb = evenBlock(f.n, nbFits, p.nr);
  auto count = [&] {
    p.mBlocks = f.m == 0 ? 0 : ceilDiv(f.m, p.mb);
    p.nBlocks = f.n == 0 ? 0 : ceilDiv(f.n, p.nb);
    p.items = f.batch * p.mBlocks * p.nBlocks;
  };
  count();
  const double flops = 2.0 * static_cast<double>(f.batch) * static_cast<double>(f.m) * static_cast<double>(f.n) *
                       static_cast<double>(f.k);
  if (flops < kParallelFlops) {
    p.grain = std::max<int64_t>(p.items, 1);
  } else {
    // Halve the blocks of the dimension with more register tiles per block.
    while (p.items < 4 || (p.items < 16 && p.items % 2 != 0)) {
      const bool splitN = p.nb / p.nr >= p.mb / p.mr;
      int64_t& block = splitN ? p.nb : p.mb;
      const int64_t size = splitN ? f.n : f.m, blocks = splitN ? p.nBlocks : p.mBlocks;
      const int64_t smaller = roundUp(ceilDiv(size, 2 * blocks), splitN ? p.nr : p.mr);
      if (smaller >= block) break;
      block = smaller;
      count();
    }
  }
  p.packBBytes = align64((p.reuseB ? p.kBlocks : 1) * p.kc * p.nb * bytes);
  p.packABytes = align64(p.mb * p.kc * bytes);
  p.tileBytes = align64(p.mb * p.nb * bytes);
  return p;
}

// ---- GemmBuilder ---------------------------------------------------------------------------------

GemmBuilder::GemmBuilder(llvm::Module& module, const std::string& kernelName, const kernels::Kernel& k,
                         const VectorIsa& target)
    : m(module), ctx(module.getContext()), b(ctx), name(kernelName), kernel(k), isa(target), form(kernels::gemmForm(k)),
      acc(accTypeOf(k)), plan(blockingFor(form, acc, target)), dtype(operandDType(k)),
      elt(acc == AccType::F32 ? b.getFloatTy() : acc == AccType::F64 ? b.getDoubleTy() : b.getInt64Ty()),
      vec(llvm::FixedVectorType::get(elt, static_cast<unsigned>(plan.lanes))) {}

llvm::Function* GemmBuilder::newFunction(const std::string& part, llvm::FunctionType* type) {
  const std::string full = name + "." + part;
  KILN_CHECK(!m.getFunction(full), "module already defines '{}'", full);
  auto* f = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, full, m);
  f->setDoesNotThrow();
  return f;
}

void GemmBuilder::loop(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label,
                       const std::function<void(llvm::Value*)>& body) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* entry = b.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx, label, f);
  auto* exit = llvm::BasicBlock::Create(ctx, label + ".end", f);
  b.CreateCondBr(b.CreateICmpSLT(begin, end), head, exit);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, label + ".i");
  i->addIncoming(begin, entry);
  body(i);
  llvm::Value* next = b.CreateAdd(i, i64(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, end), head, exit)->setMetadata(llvm::LLVMContext::MD_loop, loopAsWritten());
  b.SetInsertPoint(exit);
}

// The loops here are vectorized and unrolled as written; letting LLVM unroll the packing loops of
// small shapes (whose trip counts are constants) only makes the code bigger and the compile slower.
llvm::MDNode* GemmBuilder::loopAsWritten() {
  llvm::Metadata* unroll = llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  llvm::Metadata* vectorize = llvm::MDNode::get(
      ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b.getFalse())});
  llvm::MDNode* self = llvm::MDNode::getDistinct(ctx, {nullptr, unroll, vectorize});
  self->replaceOperandWith(0, self);
  return self;
}

llvm::Type* GemmBuilder::storageType() {
  switch (dtype) {
    case DType::f32: return b.getFloatTy();
    case DType::f64: return b.getDoubleTy();
    case DType::f16:
    case DType::bf16: return b.getInt16Ty();
    case DType::i32: return b.getInt32Ty();
    case DType::i64: return b.getInt64Ty();
    case DType::boolean: return b.getInt8Ty();
  }
  KILN_ASSERT(false, "dtype {}", dtypeName(dtype));
  return nullptr;
}

llvm::Value* GemmBuilder::toAcc(llvm::Value* v, int lanes) {
  llvm::Type* i32 = withLanes(b.getInt32Ty(), lanes);
  llvm::Type* f32 = withLanes(b.getFloatTy(), lanes);
  auto bits = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::i64: return v;
    case DType::i32: return b.CreateSExt(v, withLanes(elt, lanes));
    case DType::boolean: return b.CreateZExt(v, withLanes(elt, lanes));
    case DType::bf16: return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, i32), bits(16)), f32);
    case DType::f16: {
      if (isa.f16c) return b.CreateFPExt(b.CreateBitCast(v, withLanes(b.getHalfTy(), lanes)), f32);
      // Without F16C (where fpext would become a library call): exponent and mantissa shifted into
      // place are the f32 value 2^112 times too small, subnormals included; infinities and NaNs
      // get the all-ones exponent instead.
      llvm::Value* h = b.CreateZExt(v, i32);
      llvm::Value* sign = b.CreateShl(b.CreateAnd(h, bits(0x8000)), bits(16));
      llvm::Value* magnitude = b.CreateAnd(h, bits(0x7fff));
      llvm::Value* shifted = b.CreateShl(magnitude, bits(13));
      llvm::Value* finite =
          b.CreateBitCast(b.CreateFMul(b.CreateBitCast(shifted, f32), llvm::ConstantFP::get(f32, 0x1p112)), i32);
      llvm::Value* special = b.CreateOr(shifted, bits(0x7f800000));
      llvm::Value* isSpecial = b.CreateICmpUGE(magnitude, bits(0x7c00));
      return b.CreateBitCast(b.CreateOr(b.CreateSelect(isSpecial, special, finite), sign), f32);
    }
  }
  KILN_ASSERT(false, "dtype {}", dtypeName(dtype));
  return nullptr;
}

namespace {

/// Emits the kernel function of one contraction (see the file comment).
class GemmEmitter {
 public:
  GemmEmitter(llvm::Module& m, const std::string& name, const kernels::Kernel& k, const VectorIsa& isa)
      : g_(m, name, k, isa), b_(g_.b) {}

  llvm::Function* emit(llvm::Function* epilogue) {
    llvm::Function* kernel =
        llvm::Function::Create(kernelFunctionType(g_.ctx), llvm::GlobalValue::ExternalLinkage, g_.name, g_.m);
    kernel->setDoesNotThrow();
    b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", kernel));
    if (g_.plan.items > 0) {
      llvm::Function* chunk = chunkFunction(itemFunction(epilogue));
      b_.SetInsertPoint(&kernel->getEntryBlock());
      llvm::Value* bufs = kernel->getArg(0);
      llvm::Value* scratch = scratchOf(bufs);
      b_.CreateAlignedStore(g_.i64(0), scratch, llvm::Align(8));
      b_.CreateAlignedStore(g_.i64(0), b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), scratch, 8), llvm::Align(8));
      if (g_.plan.parallel())
        b_.CreateCall(declareParallelFor(g_.m),
                      {kernel->getArg(1), g_.i64(0), g_.i64(g_.plan.items), g_.i64(g_.plan.grain), chunk, bufs});
      else
        b_.CreateCall(chunk, {bufs, g_.i64(0), g_.i64(g_.plan.items)});
    }
    b_.CreateRetVoid();
    return kernel;
  }

 private:
  llvm::Value* scratchOf(llvm::Value* bufs) {
    llvm::Value* at = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs, g_.kernel.buffers.size());
    return b_.CreateAlignedLoad(b_.getPtrTy(), at, llvm::Align(8), "scratch");
  }

  llvm::Value* byteOffset(llvm::Value* base, int64_t bytes) {
    return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, static_cast<uint64_t>(bytes));
  }

  /// x·y + z on accumulator values (fused where the target has FMA; wrapping for integers).
  llvm::Value* mulAdd(llvm::Value* x, llvm::Value* y, llvm::Value* z) {
    if (g_.acc == AccType::I64) return b_.CreateAdd(b_.CreateMul(x, y), z);
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
  }

  llvm::Value* add(llvm::Value* x, llvm::Value* y) {
    return g_.acc == AccType::I64 ? b_.CreateAdd(x, y) : b_.CreateFAdd(x, y);
  }

  /// void ukernel(i64 kc, const ACC* a, const ACC* b, ACC* c, i64 ldc, i1 accumulate):
  /// c[MR × NR] (row stride ldc) = (accumulate ? c : 0) + A panel · B panel over kc steps
  /// (a multiple of kUnroll).
  llvm::Function* microKernel() {
    llvm::Type* i64t = b_.getInt64Ty();
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Function* f = g_.newFunction(
        "ukernel", llvm::FunctionType::get(b_.getVoidTy(), {i64t, ptr, ptr, ptr, i64t, b_.getInt1Ty()}, false));
    llvm::Value *kc = f->getArg(0), *a = f->getArg(1), *bp = f->getArg(2), *c = f->getArg(3), *ldc = f->getArg(4);
    const int mr = g_.plan.mr, nr = g_.plan.nr, lanes = g_.plan.lanes, nv = nr / lanes;
    const llvm::Align vecAlign(static_cast<uint64_t>(lanes * accBytes(g_.acc)));
    auto* entry = llvm::BasicBlock::Create(g_.ctx, "entry", f);
    auto* body = llvm::BasicBlock::Create(g_.ctx, "k", f);
    auto* done = llvm::BasicBlock::Create(g_.ctx, "k.end", f);
    auto* addStore = llvm::BasicBlock::Create(g_.ctx, "accumulate", f);
    auto* store = llvm::BasicBlock::Create(g_.ctx, "store", f);
    b_.SetInsertPoint(entry);
    llvm::Value* zero = llvm::Constant::getNullValue(g_.vec);
    b_.CreateCondBr(b_.CreateICmpSGT(kc, g_.i64(0)), body, done);

    b_.SetInsertPoint(body);
    llvm::PHINode* kk = b_.CreatePHI(i64t, 2, "kk");
    llvm::PHINode* pa = b_.CreatePHI(ptr, 2, "pa");
    llvm::PHINode* pb = b_.CreatePHI(ptr, 2, "pb");
    kk->addIncoming(g_.i64(0), entry);
    pa->addIncoming(a, entry);
    pb->addIncoming(bp, entry);
    std::vector<llvm::PHINode*> phis;
    std::vector<llvm::Value*> acc;
    for (int i = 0; i < mr * nv; ++i) {
      phis.push_back(b_.CreatePHI(g_.vec, 2, "acc"));
      phis.back()->addIncoming(zero, entry);
      acc.push_back(phis.back());
    }
    auto element = [&](llvm::Value* base, int offset) {
      return b_.CreateConstInBoundsGEP1_64(g_.elt, base, static_cast<uint64_t>(offset));
    };
    for (int u = 0; u < kUnroll; ++u) {
      std::vector<llvm::Value*> bv;
      for (int j = 0; j < nv; ++j)
        bv.push_back(b_.CreateAlignedLoad(g_.vec, element(pb, u * nr + j * lanes), vecAlign));
      for (int i = 0; i < mr; ++i) {
        llvm::Value* av = g_.splat(lanes, b_.CreateAlignedLoad(g_.elt, element(pa, u * mr + i), g_.eltAlign()));
        for (int j = 0; j < nv; ++j) acc[i * nv + j] = mulAdd(av, bv[j], acc[i * nv + j]);
      }
    }
    llvm::Value* nextK = b_.CreateAdd(kk, g_.i64(kUnroll), "", /*HasNUW=*/true, /*HasNSW=*/true);
    kk->addIncoming(nextK, body);
    pa->addIncoming(element(pa, kUnroll * mr), body);
    pb->addIncoming(element(pb, kUnroll * nr), body);
    for (int i = 0; i < mr * nv; ++i) phis[i]->addIncoming(acc[i], body);
    b_.CreateCondBr(b_.CreateICmpSLT(nextK, kc), body, done)
        ->setMetadata(llvm::LLVMContext::MD_loop, g_.loopAsWritten());

    b_.SetInsertPoint(done);
    std::vector<llvm::Value*> sums;
    for (int i = 0; i < mr * nv; ++i) {
      llvm::PHINode* phi = b_.CreatePHI(g_.vec, 2, "sum");
      phi->addIncoming(zero, entry);
      phi->addIncoming(acc[i], body);
      sums.push_back(phi);
    }
    b_.CreateCondBr(f->getArg(5), addStore, store);
    auto at = [&](int i, int j) {
      return b_.CreateInBoundsGEP(g_.elt, c, b_.CreateAdd(b_.CreateMul(g_.i64(i), ldc), g_.i64(j * lanes)));
    };
    b_.SetInsertPoint(addStore);
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j)
        b_.CreateAlignedStore(add(b_.CreateAlignedLoad(g_.vec, at(i, j), vecAlign), sums[i * nv + j]), at(i, j),
                              vecAlign);
    b_.CreateRetVoid();
    b_.SetInsertPoint(store);
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j) b_.CreateAlignedStore(sums[i * nv + j], at(i, j), vecAlign);
    b_.CreateRetVoid();
    return f;
  }

  /// void item(void** bufs, i8* slot, i64 item): one C block over all of K, then its epilogue.
  llvm::Function* itemFunction(llvm::Function* epilogue) {
    llvm::Function* ukernel = microKernel();
    llvm::Function* packA = emitPackFunction(g_, true);
    llvm::Function* packB = emitPackFunction(g_, false);
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Function* f =
        g_.newFunction("item", llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, b_.getInt64Ty()}, false));
    b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", f));
    llvm::Value *bufs = f->getArg(0), *slot = f->getArg(1), *item = f->getArg(2);
    const Blocking& p = g_.plan;
    const kernels::GemmForm& form = g_.form;
    // Items run through the M blocks of one B block (b, n block) first.
    llvm::Value* bBlock = b_.CreateUDiv(item, g_.i64(p.mBlocks), "bblock");
    llvm::Value* batch = b_.CreateUDiv(bBlock, g_.i64(p.nBlocks), "b");
    llvm::Value* m0 = b_.CreateMul(b_.CreateURem(item, g_.i64(p.mBlocks)), g_.i64(p.mb), "m0");
    llvm::Value* n0 = b_.CreateMul(b_.CreateURem(bBlock, g_.i64(p.nBlocks)), g_.i64(p.nb), "n0");
    llvm::Value* rows = g_.min(g_.i64(p.mb), b_.CreateSub(g_.i64(form.m), m0));
    llvm::Value* cols = g_.min(g_.i64(p.nb), b_.CreateSub(g_.i64(form.n), n0));
    llvm::Value* mPanels = b_.CreateUDiv(b_.CreateAdd(rows, g_.i64(p.mr - 1)), g_.i64(p.mr));
    llvm::Value* nPanels = b_.CreateUDiv(b_.CreateAdd(cols, g_.i64(p.nr - 1)), g_.i64(p.nr));
    llvm::Value* packedB = byteOffset(slot, kSlotHeaderBytes);
    llvm::Value* packedA = byteOffset(packedB, p.packBBytes);
    llvm::Value* tile = byteOffset(packedA, p.packABytes);
    // K slice kb: its first k, its depth, and its depth padded to the micro-kernel's unroll.
    auto slice = [&](llvm::Value* kb) {
      llvm::Value* k0 = b_.CreateMul(kb, g_.i64(p.kc));
      llvm::Value* kc = g_.min(g_.i64(p.kc), b_.CreateSub(g_.i64(form.k), k0));
      return std::array<llvm::Value*, 3>{k0, kc, b_.CreateAnd(b_.CreateAdd(kc, g_.i64(kUnroll - 1)), g_.i64(-kUnroll))};
    };
    auto bSlice = [&](llvm::Value* kb) {
      return p.reuseB ? b_.CreateInBoundsGEP(g_.elt, packedB, b_.CreateMul(kb, g_.i64(p.kc * p.nb))) : packedB;
    };
    if (p.reuseB) {  // pack all of K unless the slot holds this B block already
      auto* pack = llvm::BasicBlock::Create(g_.ctx, "packb", f);
      auto* packed = llvm::BasicBlock::Create(g_.ctx, "packed", f);
      llvm::Value* held = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8));
      b_.CreateCondBr(b_.CreateICmpEQ(held, bBlock), packed, pack);
      b_.SetInsertPoint(pack);
      g_.loop(g_.i64(0), g_.i64(p.kBlocks), 1, "packb.slice", [&](llvm::Value* kb) {
        auto [k0, kc, kcPad] = slice(kb);
        b_.CreateCall(packB, {bufs, batch, n0, cols, k0, kc, kcPad, bSlice(kb)});
      });
      b_.CreateAlignedStore(bBlock, slot, llvm::Align(8));
      b_.CreateBr(packed);
      b_.SetInsertPoint(packed);
    }
    g_.loop(g_.i64(0), g_.i64(p.kBlocks), 1, "kslice", [&](llvm::Value* kb) {
      auto [k0, kc, kcPad] = slice(kb);
      llvm::Value* packedBSlice = bSlice(kb);
      if (!p.reuseB) b_.CreateCall(packB, {bufs, batch, n0, cols, k0, kc, kcPad, packedBSlice});
      b_.CreateCall(packA, {bufs, batch, m0, rows, k0, kc, kcPad, packedA});
      llvm::Value* accumulate = b_.CreateICmpNE(kb, g_.i64(0));
      g_.loop(g_.i64(0), nPanels, 1, "jp", [&](llvm::Value* jp) {
        llvm::Value* bPanel =
            b_.CreateInBoundsGEP(g_.elt, packedBSlice, b_.CreateMul(jp, b_.CreateMul(kcPad, g_.i64(p.nr))));
        g_.loop(g_.i64(0), mPanels, 1, "ip", [&](llvm::Value* ip) {
          llvm::Value* aPanel =
              b_.CreateInBoundsGEP(g_.elt, packedA, b_.CreateMul(ip, b_.CreateMul(kcPad, g_.i64(p.mr))));
          llvm::Value* c = b_.CreateInBoundsGEP(
              g_.elt, tile, b_.CreateAdd(b_.CreateMul(ip, g_.i64(p.mr * p.nb)), b_.CreateMul(jp, g_.i64(p.nr))));
          b_.CreateCall(ukernel, {kcPad, aPanel, bPanel, c, g_.i64(p.nb), accumulate});
        });
      });
    });
    // The block in the result-level view: the group moves from the batch into M (kernels/Gemm.h).
    llvm::Value* group = b_.CreateURem(batch, g_.i64(form.groups));
    llvm::Value* resultBatch = b_.CreateUDiv(batch, g_.i64(form.groups));
    llvm::Value* resultM0 = b_.CreateAdd(b_.CreateMul(group, g_.i64(form.m)), m0);
    b_.CreateCall(epilogue, {bufs, tile, g_.i64(p.nb), resultBatch, resultM0, b_.CreateAdd(resultM0, rows), n0,
                             b_.CreateAdd(n0, cols)});
    b_.CreateRetVoid();
    return f;
  }

  /// void chunk(void** bufs, i64, i64): claims a scratch slot, then items until none are left.
  /// The range kiln_parallel_for hands over only decides how many chunks run.
  llvm::Function* chunkFunction(llvm::Function* item) {
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Type* i64t = b_.getInt64Ty();
    llvm::Function* f = g_.newFunction("chunk", llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64t, i64t}, false));
    b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", f));
    llvm::Value* bufs = f->getArg(0);
    llvm::Value* scratch = scratchOf(bufs);
    llvm::Value* index = b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, scratch, g_.i64(1), llvm::Align(8),
                                            llvm::AtomicOrdering::Monotonic);
    llvm::Value* slot = b_.CreateInBoundsGEP(
        b_.getInt8Ty(), scratch, b_.CreateAdd(g_.i64(kHeaderBytes), b_.CreateMul(index, g_.i64(g_.plan.slotBytes()))));
    b_.CreateAlignedStore(g_.i64(-1), slot, llvm::Align(8));  // its packed B holds no block yet
    auto* claim = llvm::BasicBlock::Create(g_.ctx, "claim", f);
    auto* work = llvm::BasicBlock::Create(g_.ctx, "work", f);
    auto* done = llvm::BasicBlock::Create(g_.ctx, "done", f);
    b_.CreateBr(claim);
    b_.SetInsertPoint(claim);
    llvm::Value* i = b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, byteOffset(scratch, 8), g_.i64(1), llvm::Align(8),
                                        llvm::AtomicOrdering::Monotonic);
    b_.CreateCondBr(b_.CreateICmpULT(i, g_.i64(g_.plan.items)), work, done);
    b_.SetInsertPoint(work);
    b_.CreateCall(item, {bufs, slot, i});
    b_.CreateBr(claim);
    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
    return f;
  }

  GemmBuilder g_;
  llvm::IRBuilder<>& b_;
};

}  // namespace
}  // namespace gemm

AccType accTypeOf(const kernels::Kernel& k) {
  switch (gemm::operandDType(k)) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return AccType::F32;
    case DType::f64: return AccType::F64;
    default: return AccType::I64;
  }
}

int64_t contractionScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads) {
  const gemm::Blocking p = gemm::blockingFor(kernels::gemmForm(k), accTypeOf(k), isa);
  if (p.items == 0) return 0;
  return gemm::kHeaderBytes + (p.parallel() ? std::max(threads, 1) : 1) * p.slotBytes();
}

llvm::Function* emitContraction(llvm::Module& m, const std::string& name, const kernels::Kernel& k,
                                llvm::Function* epilogue, const VectorIsa& isa) {
  return gemm::GemmEmitter(m, name, k, isa).emit(epilogue);
}

}  // namespace kiln::cpu
