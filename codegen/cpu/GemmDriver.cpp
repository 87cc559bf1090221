// The work items of contraction kernels (GemmEmitter.h), shared by every contraction of a module:
// what a kernel knows about its shape (sizes, blocking, strides, the routines that pack its
// operands, its epilogue) is in its descriptor, a constant the drivers read at run time, so the
// drivers are optimized and compiled once per module.
//
// The chunk function that kiln_parallel_for runs claims a scratch slot (a counter in the scratch
// header), then claims items one at a time by their flags (a byte per item after the header): first
// the range of items the pool handed it, in order, then, once that is done, whatever is left of the
// others' ranges from their ends. So a thread that starts late or runs slower simply takes fewer
// items, and otherwise each thread computes the same items step after step: the blocks of a result
// (and the packed operands and results of the kernels around it, which the pool splits the same
// way) stay in the caches of the core that wrote them. Claiming from one shared counter instead
// handed consecutive items to alternating threads, and every kernel then read and wrote lines the
// other core held: cnn's first convolution ran slower on two threads than on one (Zen 5:
// 698 µs on one, 930 on two). Which thread computes an item never changes its result.
//
// Packed path, one item = one C block over all of K (see Gemm.cpp's file comment):
//
//     for each K slice: pack B (unless kept packed), pack A (unless kept packed; with its rows read in
//     place only the last, partial register tile of rows), micro-kernel over the panels; on the
//     last slice, epilogue(block) after its last panel, or after each panel's columns where the
//     one slice is shallow (Blocking::epiloguePanels)
//
// Split-K path, one item = one part of K × one block of N columns × all of M, then a second
// phase whose items sum the parts' partial products in order (see Gemm.cpp's file comment):
//
//     for each K slice of the part: pack B; for each M block: pack A (or its last, partial tile of
//     rows), micro-kernel over the panels
//     then, per block: partial[0] += partial[1], then += partial[2], …; epilogue(block)
//
// Small path, one item = M rows × one block of N columns (emitSmallItem; see GemmSmall.cpp's file
// comment):
//
//     convert A into rows (unless in place or held), the row-group kernels, epilogue(block)
//     (none where the block's whole vectors of columns went straight into the result)
#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/Module.h>

#include <fmt/format.h>

namespace kiln::cpu::gemm {

namespace desc {

llvm::StructType* type(llvm::LLVMContext& ctx) {
  const char* name = "kiln.gemm.desc";
  if (llvm::StructType* t = llvm::StructType::getTypeByName(ctx, name)) return t;
  return llvm::StructType::create(ctx,
                                  {llvm::ArrayType::get(llvm::Type::getInt64Ty(ctx), Count),
                                   llvm::ArrayType::get(llvm::PointerType::getUnqual(ctx), Pointers)},
                                  name);
}

llvm::Value* field(llvm::IRBuilder<>& b, llvm::Value* desc, int field) {
  return b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), desc, static_cast<uint64_t>(field));
}

llvm::Value* load(llvm::IRBuilder<>& b, llvm::Value* desc, int f) {
  return b.CreateAlignedLoad(b.getInt64Ty(), field(b, desc, f), llvm::Align(8));
}

llvm::Value* pointer(llvm::IRBuilder<>& b, llvm::Value* desc, Pointer p) {
  llvm::Value* at = b.CreateConstInBoundsGEP2_32(type(b.getContext()), desc, 0, 1);
  return b.CreateAlignedLoad(b.getPtrTy(), b.CreateConstInBoundsGEP1_64(b.getPtrTy(), at, static_cast<uint64_t>(p)),
                             llvm::Align(8));
}

}  // namespace desc

llvm::Value* batchOffset(GemmBuilder& g, llvm::Value* operand, llvm::Value* batch) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Type* i64t = b.getInt64Ty();
  llvm::Value* constant = desc::load(b, operand, desc::Constant);
  llvm::Value* rank = desc::load(b, operand, desc::Rank);
  // The batch coordinates from the last on (one division each); plain matrices (rank 0, the
  // common case) skip the loop.
  llvm::BasicBlock* entry = b.GetInsertBlock();
  llvm::Function* f = entry->getParent();
  auto* body = llvm::BasicBlock::Create(g.ctx, "batch.dim", f);
  auto* done = llvm::BasicBlock::Create(g.ctx, "batch.done", f);
  b.CreateCondBr(b.CreateICmpEQ(rank, g.i64(0)), done, body);
  b.SetInsertPoint(body);
  llvm::PHINode* d = b.CreatePHI(i64t, 2, "d");
  llvm::PHINode* rest = b.CreatePHI(i64t, 2, "rest");
  llvm::PHINode* sum = b.CreatePHI(i64t, 2, "sum");
  d->addIncoming(g.i64(desc::kMaxBatchRank - 1), entry);
  rest->addIncoming(batch, entry);
  sum->addIncoming(constant, entry);
  llvm::Value* size =
      b.CreateAlignedLoad(i64t, b.CreateInBoundsGEP(i64t, desc::field(b, operand, desc::Sizes), d), llvm::Align(8));
  llvm::Value* coeff =
      b.CreateAlignedLoad(i64t, b.CreateInBoundsGEP(i64t, desc::field(b, operand, desc::Coeffs), d), llvm::Align(8));
  llvm::Value* quotient = b.CreateUDiv(rest, size);
  llvm::Value* coord = b.CreateSub(rest, b.CreateMul(quotient, size));
  llvm::Value* next = b.CreateAdd(sum, b.CreateMul(coord, coeff));
  llvm::Value* nextD = b.CreateSub(d, g.i64(1));
  d->addIncoming(nextD, body);
  rest->addIncoming(quotient, body);
  sum->addIncoming(next, body);
  b.CreateCondBr(b.CreateICmpSGE(nextD, b.CreateSub(g.i64(desc::kMaxBatchRank), rank)), body, done)
      ->setMetadata(llvm::LLVMContext::MD_loop, g.loopAsWritten());
  b.SetInsertPoint(done);
  llvm::PHINode* offset = b.CreatePHI(i64t, 2, "offset");
  offset->addIncoming(constant, entry);
  offset->addIncoming(next, body);
  return offset;
}

std::pair<llvm::Value*, llvm::Value*> directTarget(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d,
                                                   llvm::Value* batch) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* direct = desc::load(b, d, desc::Direct);
  llvm::Value* hasDirect = b.CreateICmpSGT(direct, g.i64(0));
  llvm::Value* buffer = b.CreateSelect(hasDirect, b.CreateSub(direct, g.i64(1)), g.i64(0));
  llvm::Value* result =
      b.CreateAlignedLoad(b.getPtrTy(), b.CreateInBoundsGEP(b.getPtrTy(), bufs, buffer), llvm::Align(8), "result");
  // The result-level view [batch, M, N] in row-major order (groups of one, kernels/Gemm.h). Not
  // `inbounds`: without desc::Direct the pointer is never used.
  llvm::Value* batchElements = b.CreateMul(batch, b.CreateMul(desc::load(b, d, desc::M), desc::load(b, d, desc::N)));
  return {hasDirect, b.CreateGEP(g.elt, result, batchElements, "result.batch")};
}

/// The block of batch `batch` in the result-level view: the group moves from the batch into M
/// (kernels/Gemm.h); calls the epilogue on rows [m0, m0 + rows) and columns [n0, n0 + cols).
void callEpilogue(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d, llvm::Value* tile, llvm::Value* batch,
                  llvm::Value* m0, llvm::Value* rows, llvm::Value* n0, llvm::Value* cols) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* groups = desc::load(b, d, desc::Groups);
  llvm::Value* resultM0 = b.CreateAdd(b.CreateMul(b.CreateURem(batch, groups), desc::load(b, d, desc::M)), m0);
  auto* type = llvm::FunctionType::get(b.getVoidTy(),
                                       {b.getPtrTy(), b.getPtrTy(), b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty(),
                                        b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty()},
                                       false);
  b.CreateCall(type, desc::pointer(b, d, desc::Epilogue),
               {bufs, tile, desc::load(b, d, desc::Ldt), b.CreateUDiv(batch, groups), resultM0,
                b.CreateAdd(resultM0, rows), n0, b.CreateAdd(n0, cols)});
}

namespace {

llvm::FunctionType* itemType(llvm::LLVMContext& ctx) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  return llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, ptr, llvm::Type::getInt64Ty(ctx)}, false);
}

/// K slice kb of depth at most kcMost: its first k, its depth, and its depth padded to the
/// micro-kernel's k per iteration (Blocking::kUnit).
std::array<llvm::Value*, 3> kSlice(GemmBuilder& g, llvm::Value* kb, llvm::Value* kcMost, llvm::Value* k) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* k0 = b.CreateMul(kb, kcMost);
  llvm::Value* kc = g.min(kcMost, b.CreateSub(k, k0));
  const int unit = g.plan.kUnit;
  return {k0, kc, b.CreateAnd(b.CreateAdd(kc, g.i64(unit - 1)), g.i64(-unit))};
}

/// Where an item reads A's panels of one K slice: with desc::AInPlace, its whole register tiles of
/// rows in place and only the last, partial one packed; otherwise every panel packed.
struct APanels {
  llvm::Value* inPlace;     // i1: desc::AInPlace
  llvm::Value* rows;        // A at the block's first row and the slice's first k, in place
  llvm::Value* rowBytes;    // A's row stride in bytes
  llvm::Value* lda;         // the micro-kernel's stride in elements: of A's rows (of its k: Blocking::aColumns)
  llvm::Value* fullPanels;  // the panels read in place (0 unless inPlace)
};

/// APanels of the block of `rows` rows from m0 and the K slice from k0 of batch `batch`, A's
/// offset `offsetA`.
APanels aPanels(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d, llvm::Value* offsetA, llvm::Value* m0,
                llvm::Value* rows, llvm::Value* k0) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* inPlace = b.CreateICmpNE(desc::load(b, d, desc::AInPlace), g.i64(0));
  llvm::Value* lda = desc::load(b, d, desc::A + desc::RowStride);
  llvm::Value* kStride = desc::load(b, d, desc::A + desc::KStride);  // 1 unless Blocking::aColumns
  llvm::Value* buffer = b.CreateAlignedLoad(
      b.getPtrTy(), b.CreateInBoundsGEP(b.getPtrTy(), bufs, desc::load(b, d, desc::A + desc::Buffer)), llvm::Align(8));
  // k0's offset: with A in runs of k (desc::ARun), the run's start plus k0's place in it (a slice
  // never crosses a run).
  llvm::Value* run = desc::load(b, d, desc::ARun);
  llvm::Value* inRuns = b.CreateICmpSGT(run, g.i64(0));
  llvm::Value* divisor = b.CreateSelect(inRuns, run, g.i64(1));
  llvm::Value* runs = b.CreateUDiv(k0, divisor);
  llvm::Value* kOffset = b.CreateSelect(
      inRuns,
      b.CreateAdd(b.CreateMul(runs, desc::load(b, d, desc::ARunStride)), b.CreateSub(k0, b.CreateMul(runs, divisor))),
      k0);
  // Not `inbounds`: with A packed, the offset may lie outside its buffer. In bytes: the drivers
  // serve every operand type of their accumulator (bf16 and f32 alike).
  llvm::Value* elementBytes = desc::load(b, d, desc::ElementBytes);
  llvm::Value* at = b.CreateGEP(
      b.getInt8Ty(), buffer,
      b.CreateMul(b.CreateAdd(offsetA, b.CreateAdd(b.CreateMul(m0, lda), b.CreateMul(kOffset, kStride))),
                  elementBytes));
  llvm::Value* full = b.CreateSelect(inPlace, b.CreateUDiv(rows, g.i64(g.plan.mr)), g.i64(0));
  return {inPlace, at, b.CreateMul(lda, elementBytes), g.plan.aColumns ? kStride : lda, full};
}

/// Where, on AMX tiles, the in-place panels' last, partial steps are packed (one step of kAmxK k
/// per panel, after the first panel of A packed with kcPad k).
llvm::Value* aTails(GemmBuilder& g, llvm::Value* packedA, llvm::Value* kcPad) {
  return g.b.CreateInBoundsGEP(g.elt, packedA,
                               g.b.CreateAdd(g.b.CreateMul(kcPad, g.i64(g.plan.mr)), g.i64(g.plan.lanes)));
}

/// The packing of rows [r0, r0 + rows) and k [k0, k0 + kc) of A into panels of kcPad k at dst.
using PackA = std::function<void(llvm::Value* r0, llvm::Value* rows, llvm::Value* k0, llvm::Value* kc,
                                 llvm::Value* kcPad, llvm::Value* dst)>;

/// PackA as a call of the packing routine `routine` (packFunctionType) with its first four
/// arguments `leading` (the buffers, the operand's fields, the batch and its offset).
PackA packingOf(GemmBuilder& g, llvm::Value* routine, std::array<llvm::Value*, 4> leading) {
  return [&g, routine, leading](llvm::Value* r0, llvm::Value* rows, llvm::Value* k0, llvm::Value* kc,
                                llvm::Value* kcPad, llvm::Value* dst) {
    g.b.CreateCall(packFunctionType(g.ctx), routine,
                   {leading[0], leading[1], leading[2], leading[3], r0, rows, k0, kc, kcPad, dst});
  };
}

/// Packs what the micro-kernels do not read of A in place, for the K slice from k0 of depth kc:
/// the panels from m0 + fullPanels · MR on (every panel when A is not in place) into `packedA`,
/// and on AMX tiles, where kc is not a whole number of tile products, the in-place panels' last kc
/// mod kAmxK k, into aTails.
void packAPanels(GemmBuilder& g, const APanels& a, llvm::Value* m0, llvm::Value* rows, llvm::Value* k0,
                 llvm::Value* kc, llvm::Value* kcPad, llvm::Value* packedA, const PackA& pack) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* first = b.CreateMul(a.fullPanels, g.i64(g.plan.mr));
  llvm::Value* left = b.CreateSub(rows, first);
  llvm::Function* f = b.GetInsertBlock()->getParent();
  auto* packing = llvm::BasicBlock::Create(g.ctx, "packa.rows", f);
  auto* packed = llvm::BasicBlock::Create(g.ctx, "packa.rows.done", f);
  b.CreateCondBr(b.CreateICmpSGT(left, g.i64(0)), packing, packed);
  b.SetInsertPoint(packing);
  pack(b.CreateAdd(m0, first), left, k0, kc, kcPad, packedA);
  b.CreateBr(packed);
  b.SetInsertPoint(packed);
  if (!nativeAmx(g)) return;
  llvm::Value* whole = b.CreateAnd(kc, g.i64(-kAmxK));
  auto* tails = llvm::BasicBlock::Create(g.ctx, "packa.tails", f);
  auto* tailsDone = llvm::BasicBlock::Create(g.ctx, "packa.tails.done", f);
  b.CreateCondBr(b.CreateAnd(b.CreateICmpSGT(first, g.i64(0)), b.CreateICmpNE(whole, kc)), tails, tailsDone);
  b.SetInsertPoint(tails);
  pack(m0, first, b.CreateAdd(k0, whole), b.CreateSub(kc, whole), g.i64(kAmxK), aTails(g, packedA, kcPad));
  b.CreateBr(tailsDone);
  b.SetInsertPoint(tailsDone);
}

/// The micro-kernel call for A's panel `ip` (of MR rows; the block has `rows`) against one B
/// panel into c: in place while ip < fullPanels, else the packed panel ip − fullPanels from
/// `packedA`.
void callPanel(GemmBuilder& g, const APanels& a, llvm::Value* ip, llvm::Value* rows, llvm::Value* columns,
               llvm::Value* kc, llvm::Value* kcPad, llvm::Value* packedA, llvm::Value* bPanel, llvm::Value* c,
               llvm::Value* ldc, llvm::Value* accumulate) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* panelElements = b.CreateAdd(b.CreateMul(kcPad, g.i64(g.plan.mr)), g.i64(g.plan.lanes));
  llvm::Value* panelRows = b.CreateSub(rows, b.CreateMul(ip, g.i64(g.plan.mr)));
  auto packedCall = [&] {
    llvm::Value* aPanel =
        b.CreateInBoundsGEP(g.elt, packedA, b.CreateMul(b.CreateSub(ip, a.fullPanels), panelElements));
    b.CreateCall(microKernel(g)->getFunctionType(), panelKernel(g, columns, false, panelRows),
                 {kcPad, aPanel, bPanel, c, ldc, accumulate});
  };
  const bool amxRows = nativeAmx(g);
  if (g.pairs && !amxRows) return packedCall();  // in place only on f32 and AMX tiles (GemmBlocking.cpp)
  llvm::Function* f = b.GetInsertBlock()->getParent();
  auto* inPlace = llvm::BasicBlock::Create(g.ctx, "panel.rows", f);
  auto* packed = llvm::BasicBlock::Create(g.ctx, "panel.packed", f);
  auto* done = llvm::BasicBlock::Create(g.ctx, "panel.done", f);
  b.CreateCondBr(b.CreateICmpSLT(ip, a.fullPanels), inPlace, packed);
  b.SetInsertPoint(inPlace);
  llvm::Value* first = b.CreateGEP(b.getInt8Ty(), a.rows, b.CreateMul(b.CreateMul(ip, g.i64(g.plan.mr)), a.rowBytes));
  std::vector<llvm::Value*> args{kc, first, bPanel, c, ldc, accumulate, a.lda};
  if (amxRows) {
    const int64_t tailElements = int64_t{kAmxK} * g.plan.mr + g.plan.lanes;  // a panel of one step
    args.push_back(b.CreateInBoundsGEP(g.elt, aTails(g, packedA, kcPad), b.CreateMul(ip, g.i64(tailElements))));
  }
  b.CreateCall(microKernel(g, 0, true)->getFunctionType(), panelKernel(g, columns, true, nullptr, g.plan.aColumns),
               args);
  b.CreateBr(done);
  b.SetInsertPoint(packed);
  packedCall();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

/// void item(void** bufs, const Desc* d, i8* slot, i64 item) of the packed path.
void emitPackedItem(GemmBuilder& g, llvm::Function* f) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value *bufs = f->getArg(0), *d = f->getArg(1), *slot = f->getArg(2), *item = f->getArg(3);
  auto get = [&](int field) { return desc::load(b, d, field); };
  llvm::Value *mBlocks = get(desc::MBlocks), *nBlocks = get(desc::NBlocks), *mb = get(desc::Mb), *nb = get(desc::Nb);
  llvm::Value *kcMost = get(desc::Kc), *kBlocks = get(desc::KBlocks), *ldt = get(desc::Ldt), *k = get(desc::K);
  llvm::Value* reuseB = b.CreateICmpNE(get(desc::ReuseB), g.i64(0));
  llvm::Value* reuseA = b.CreateICmpNE(get(desc::ReuseA), g.i64(0));
  llvm::Value* packA = desc::pointer(b, d, desc::PackA);
  llvm::Value* packB = desc::pointer(b, d, desc::PackB);
  llvm::Value* operandA = desc::field(b, d, desc::A);
  llvm::Value* operandB = desc::field(b, d, desc::B);
  const int mr = g.plan.mr, nr = g.plan.nr;
  // Items run through the M blocks of one B block (b, n block) first.
  llvm::Value* bBlock = b.CreateUDiv(item, mBlocks, "bblock");
  llvm::Value* batch = b.CreateUDiv(bBlock, nBlocks, "b");
  llvm::Value* offsetA = batchOffset(g, operandA, batch);
  llvm::Value* offsetB = batchOffset(g, operandB, batch);
  llvm::Value* m0 = b.CreateMul(b.CreateURem(item, mBlocks), mb, "m0");
  llvm::Value* n0 = b.CreateMul(b.CreateURem(bBlock, nBlocks), nb, "n0");
  llvm::Value* rows = g.min(mb, b.CreateSub(get(desc::M), m0));
  llvm::Value* cols = g.min(nb, b.CreateSub(get(desc::N), n0));
  llvm::Value* mPanels = b.CreateUDiv(b.CreateAdd(rows, g.i64(mr - 1)), g.i64(mr));
  llvm::Value* nPanels = b.CreateUDiv(b.CreateAdd(cols, g.i64(nr - 1)), g.i64(nr));
  llvm::Value* packedB = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), slot, kSlotHeaderBytes);
  llvm::Value* packedA = b.CreateInBoundsGEP(b.getInt8Ty(), packedB, get(desc::PackBBytes));
  llvm::Value* tile = b.CreateInBoundsGEP(b.getInt8Ty(), packedA, get(desc::PackABytes));
  llvm::FunctionType* packType = packFunctionType(g.ctx);
  auto slice = [&](llvm::Value* kb) { return kSlice(g, kb, kcMost, k); };
  // An operand kept packed over all of K (reuseB, reuseA) has its slices `rows` rows (NB or MB)
  // and KC k apart; otherwise each slice is packed into the place of the first.
  auto keptSlice = [&](llvm::Value* reuse, llvm::Value* packed, llvm::Value* blockRows, int width, llvm::Value* kb) {
    llvm::Value* sliceElements = b.CreateMul(b.CreateUDiv(blockRows, g.i64(width)),
                                             b.CreateAdd(b.CreateMul(kcMost, g.i64(width)), g.i64(g.plan.lanes)));
    return b.CreateInBoundsGEP(g.elt, packed, b.CreateSelect(reuse, b.CreateMul(kb, sliceElements), g.i64(0)));
  };
  auto bSlice = [&](llvm::Value* kb) { return keptSlice(reuseB, packedB, nb, nr, kb); };
  auto aSlice = [&](llvm::Value* kb) { return keptSlice(reuseA, packedA, mb, mr, kb); };
  auto packBSlice = [&](llvm::Value* kb) {
    auto [k0, kc, kcPad] = slice(kb);
    b.CreateCall(packType, packB, {bufs, operandB, batch, offsetB, n0, cols, k0, kc, kcPad, bSlice(kb)});
  };
  auto packASlice = [&](llvm::Value* kb) {
    auto [k0, kc, kcPad] = slice(kb);
    b.CreateCall(packType, packA, {bufs, operandA, batch, offsetA, m0, rows, k0, kc, kcPad, aSlice(kb)});
  };
  // A kept operand is packed over all of K unless the slot's header word `tagAt` says it holds
  // block `tag` already; the others are packed slice by slice below.
  auto packKept = [&](llvm::Value* reuse, int64_t tagAt, llvm::Value* tag, const std::string& label,
                      const std::function<void(llvm::Value*)>& packSlice) {
    auto* packAll = llvm::BasicBlock::Create(g.ctx, label, f);
    auto* packed = llvm::BasicBlock::Create(g.ctx, label + ".held", f);
    llvm::Value* tagAddress = b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), slot, tagAt);
    llvm::Value* held = b.CreateAlignedLoad(b.getInt64Ty(), tagAddress, llvm::Align(8));
    b.CreateCondBr(b.CreateAnd(reuse, b.CreateICmpNE(held, tag)), packAll, packed);
    b.SetInsertPoint(packAll);
    g.loop(g.i64(0), kBlocks, 1, label + ".slice", packSlice);
    b.CreateAlignedStore(tag, tagAddress, llvm::Align(8));
    b.CreateBr(packed);
    b.SetInsertPoint(packed);
  };
  packKept(reuseB, kSlotTagB, bBlock, "packb", packBSlice);
  packKept(reuseA, kSlotTagA, g.i64(0), "packa", packASlice);  // one M block, the same in every batch
  auto unlessKept = [&](llvm::Value* reuse, const std::string& label, const std::function<void()>& pack) {
    auto* packOne = llvm::BasicBlock::Create(g.ctx, label, f);
    auto* packedOne = llvm::BasicBlock::Create(g.ctx, label + ".done", f);
    b.CreateCondBr(reuse, packedOne, packOne);
    b.SetInsertPoint(packOne);
    pack();
    b.CreateBr(packedOne);
    b.SetInsertPoint(packedOne);
  };
  // A block of whole register tiles of rows and whole vectors of columns (its last panel's
  // micro-kernel is as wide as its columns) of a plain product (directResult) is accumulated in the
  // result itself: no tile, no epilogue copying it (4-7 % of a large product's time;
  // 100×128·(784×128)ᵀ, whose second block of 416 and 368 columns took the tile while only whole
  // panels went straight: 162 → 136–148 µs on one thread; NT 10000×1000·512, whose rows of 4000
  // bytes took the tile while only rows on vector boundaries went straight: 125–137 → 126–140
  // GFLOP/s on one thread, four pairs; a plain convolution, 64×1×28×28 into 32 channels, on
  // two threads: 38–54 → 122–161 GFLOP/s). Other blocks, at the edges, take the tile.
  auto [hasDirect, result] = directTarget(g, bufs, d, batch);
  llvm::Value* n = get(desc::N);
  llvm::Value* wholeTiles = b.CreateAnd(b.CreateICmpEQ(b.CreateURem(rows, g.i64(mr)), g.i64(0)),
                                        b.CreateICmpEQ(b.CreateURem(cols, g.i64(g.plan.lanes)), g.i64(0)));
  llvm::Value* inResult = b.CreateAnd(hasDirect, wholeTiles, "direct");
  llvm::Value* cBase = b.CreateSelect(
      inResult, b.CreateGEP(g.elt, result, b.CreateAdd(b.CreateMul(m0, n), n0)), tile, "c.base");
  llvm::Value* ldc = b.CreateSelect(inResult, n, ldt, "ldc");
  // Panels per epilogue call: desc::EpiloguePanels (Blocking::epiloguePanels), 0 meaning all.
  llvm::Value* perGroup = get(desc::EpiloguePanels);
  llvm::Value* group = b.CreateSelect(b.CreateICmpEQ(perGroup, g.i64(0)), nPanels, perGroup, "group");
  g.loop(g.i64(0), kBlocks, 1, "kslice", [&](llvm::Value* kb) {
    auto [k0, kc, kcPad] = slice(kb);
    llvm::Value* packedBSlice = bSlice(kb);
    llvm::Value* packedASlice = aSlice(kb);
    unlessKept(reuseB, "packb.one", [&] { packBSlice(kb); });
    const APanels panels = aPanels(g, bufs, d, offsetA, m0, rows, k0);
    unlessKept(reuseA, "packa.one", [&] {
      packAPanels(g, panels, m0, rows, k0, kc, kcPad, packedASlice,
                  packingOf(g, packA, {bufs, operandA, batch, offsetA}));
    });
    llvm::Value* accumulate = b.CreateICmpNE(kb, g.i64(0));
    // On the last slice, the epilogue takes the block's columns a group of panels at a time, as
    // soon as the micro-kernels have finished them.
    llvm::Value* finish = b.CreateAnd(b.CreateICmpEQ(kb, b.CreateSub(kBlocks, g.i64(1))), b.CreateNot(inResult));
    llvm::Value* bPanelElements = b.CreateAdd(b.CreateMul(kcPad, g.i64(nr)), g.i64(g.plan.lanes));
    llvm::Value* tileRows = b.CreateMul(ldc, g.i64(mr));
    g.loop(g.i64(0), nPanels, 1, "jp", [&](llvm::Value* jp) {
      llvm::Value* bPanel = b.CreateInBoundsGEP(g.elt, packedBSlice, b.CreateMul(jp, bPanelElements));
      llvm::Value* tileColumns = b.CreateGEP(g.elt, cBase, b.CreateMul(jp, g.i64(nr)));
      llvm::Value* columns = b.CreateSub(cols, b.CreateMul(jp, g.i64(nr)));
      g.loop(g.i64(0), mPanels, 1, "ip", [&](llvm::Value* ip) {
        llvm::Value* c = b.CreateGEP(g.elt, tileColumns, b.CreateMul(ip, tileRows));
        callPanel(g, panels, ip, rows, columns, kc, kcPad, packedASlice, bPanel, c, ldc, accumulate);
      });
      llvm::Value* next = b.CreateAdd(jp, g.i64(1));
      llvm::Value* groupEnds = b.CreateOr(b.CreateICmpEQ(b.CreateURem(next, group), g.i64(0)),
                                          b.CreateICmpEQ(next, nPanels));
      auto* copy = llvm::BasicBlock::Create(g.ctx, "epilogue", f);
      auto* done = llvm::BasicBlock::Create(g.ctx, "epilogue.done", f);
      b.CreateCondBr(b.CreateAnd(finish, groupEnds), copy, done);
      b.SetInsertPoint(copy);
      llvm::Value* first = b.CreateMul(b.CreateSub(jp, b.CreateURem(jp, group)), g.i64(nr));  // the group's column
      callEpilogue(g, bufs, d, b.CreateGEP(g.elt, cBase, first), batch, m0, rows, b.CreateAdd(n0, first),
                   b.CreateSub(g.min(cols, b.CreateMul(next, g.i64(nr))), first));
      b.CreateBr(done);
      b.SetInsertPoint(done);
    });
  });
  b.CreateRetVoid();
}

/// The scratch of the kernel whose buffer table is `bufs`.
llvm::Value* scratchOf(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d) {
  llvm::IRBuilder<>& b = g.b;
  return b.CreateAlignedLoad(b.getPtrTy(), b.CreateInBoundsGEP(b.getPtrTy(), bufs, desc::load(b, d, desc::ScratchIndex)),
                             llvm::Align(8), "scratch");
}

/// `bytes` rounded up to a multiple of 64.
llvm::Value* align64(GemmBuilder& g, llvm::Value* bytes) {
  return g.b.CreateAnd(g.b.CreateAdd(bytes, g.i64(63)), g.i64(-64));
}

/// Blocking::claimsBytes from the descriptor: the claim flags of both phases.
llvm::Value* claimsBytes(GemmBuilder& g, llvm::Value* d) {
  return g.b.CreateAdd(align64(g, desc::load(g.b, d, desc::Items)), align64(g, desc::load(g.b, d, desc::ReduceItems)));
}

/// The claim flags of phase `phase` (0: the items, 1: SplitK's reduction), a byte per item.
llvm::Value* claimFlags(GemmBuilder& g, llvm::Value* scratch, llvm::Value* d, int phase) {
  llvm::Value* offset = g.i64(kScratchHeaderBytes);
  if (phase == 1) offset = g.b.CreateAdd(offset, align64(g, desc::load(g.b, d, desc::Items)));
  return g.b.CreateInBoundsGEP(g.b.getInt8Ty(), scratch, offset, "claims");
}

/// The partial product of part `s` of batch `batch` (SplitK).
llvm::Value* partialOf(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d, llvm::Value* batch, llvm::Value* s) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* index = b.CreateAdd(b.CreateMul(batch, desc::load(b, d, desc::Splits)), s);
  llvm::Value* offset = b.CreateAdd(b.CreateAdd(g.i64(kScratchHeaderBytes), claimsBytes(g, d)),
                                    b.CreateMul(index, desc::load(b, d, desc::PartialBytes)));
  return b.CreateInBoundsGEP(b.getInt8Ty(), scratchOf(g, bufs, d), offset, "partial");
}

/// Runs work(i) for every item i in [0, items) whose flag this call claims: first its own range
/// [begin, end) in order, then the others' items from the last down (the ends of the other
/// threads' ranges, where their owners reach last). A flag already set is skipped without a write;
/// an unset one is claimed by an atomic exchange, so each item runs exactly once.
void claimItems(GemmBuilder& g, llvm::Function* f, llvm::Value* flags, llvm::Value* items, llvm::Value* begin,
                llvm::Value* end, const std::function<void(llvm::Value*)>& work) {
  llvm::IRBuilder<>& b = g.b;
  auto claim = [&](llvm::Value* i) {
    llvm::Value* flag = b.CreateInBoundsGEP(b.getInt8Ty(), flags, i);
    auto* free = llvm::BasicBlock::Create(g.ctx, "claim.free", f);
    auto* mine = llvm::BasicBlock::Create(g.ctx, "claim.mine", f);
    auto* next = llvm::BasicBlock::Create(g.ctx, "claim.next", f);
    llvm::LoadInst* seen = b.CreateAlignedLoad(b.getInt8Ty(), flag, llvm::Align(1));
    seen->setAtomic(llvm::AtomicOrdering::Monotonic);
    b.CreateCondBr(b.CreateICmpEQ(seen, b.getInt8(0)), free, next);
    b.SetInsertPoint(free);
    llvm::Value* before = b.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, flag, b.getInt8(1), llvm::Align(1),
                                            llvm::AtomicOrdering::Monotonic);
    b.CreateCondBr(b.CreateICmpEQ(before, b.getInt8(0)), mine, next);
    b.SetInsertPoint(mine);
    work(i);
    b.CreateBr(next);
    b.SetInsertPoint(next);
  };
  // The pool's range, clamped to the items (a direct call hands over [0, items)).
  llvm::Value* first = g.min(begin, items);
  llvm::Value* last = g.min(end, items);
  g.loop(first, last, 1, "own", claim);
  // The others' items, from the last down: i = items - 1 - j, skipping [first, last).
  g.loop(g.i64(0), items, 1, "steal", [&](llvm::Value* j) {
    llvm::Value* i = b.CreateSub(b.CreateSub(items, g.i64(1)), j);
    auto* other = llvm::BasicBlock::Create(g.ctx, "steal.other", f);
    auto* skip = llvm::BasicBlock::Create(g.ctx, "steal.skip", f);
    b.CreateCondBr(b.CreateAnd(b.CreateICmpSGE(i, first), b.CreateICmpSLT(i, last)), skip, other);
    b.SetInsertPoint(other);
    claim(i);
    b.CreateBr(skip);
    b.SetInsertPoint(skip);
  });
}

/// void item(void** bufs, const Desc* d, i8* slot, i64 item) of the SplitK path's first phase:
/// part s of K for one N block and all of M, into part s's partial product (row stride Ldt).
void emitSplitItem(GemmBuilder& g, llvm::Function* f) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value *bufs = f->getArg(0), *d = f->getArg(1), *slot = f->getArg(2), *item = f->getArg(3);
  auto get = [&](int field) { return desc::load(b, d, field); };
  llvm::Value *nBlocks = get(desc::NBlocks), *splits = get(desc::Splits), *mb = get(desc::Mb), *nb = get(desc::Nb);
  llvm::Value *m = get(desc::M), *k = get(desc::K), *kcMost = get(desc::Kc), *ldc = get(desc::Ldt);
  llvm::Value *sliceBlocks = get(desc::SliceBlocks), *kBlocks = get(desc::KBlocks), *mBlocks = get(desc::MBlocks);
  llvm::Value* packA = desc::pointer(b, d, desc::PackA);
  llvm::Value* packB = desc::pointer(b, d, desc::PackB);
  llvm::Value* operandA = desc::field(b, d, desc::A);
  llvm::Value* operandB = desc::field(b, d, desc::B);
  llvm::FunctionType* packType = packFunctionType(g.ctx);
  const int mr = g.plan.mr, nr = g.plan.nr;
  // Items run through the N blocks of one part of one batch.
  llvm::Value* part = b.CreateUDiv(item, nBlocks, "part");
  llvm::Value* batch = b.CreateUDiv(part, splits, "b");
  llvm::Value* s = b.CreateURem(part, splits, "s");
  llvm::Value* n0 = b.CreateMul(b.CreateURem(item, nBlocks), nb, "n0");
  llvm::Value* cols = g.min(nb, b.CreateSub(get(desc::N), n0));
  llvm::Value* nPanels = b.CreateUDiv(b.CreateAdd(cols, g.i64(nr - 1)), g.i64(nr));
  llvm::Value* offsetA = batchOffset(g, operandA, batch);
  llvm::Value* offsetB = batchOffset(g, operandB, batch);
  llvm::Value* partial = b.CreateInBoundsGEP(g.elt, partialOf(g, bufs, d, batch, s), n0);
  llvm::Value* packedB = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), slot, kSlotHeaderBytes);
  llvm::Value* packedA = b.CreateInBoundsGEP(b.getInt8Ty(), packedB, get(desc::PackBBytes));
  llvm::Value* first = b.CreateMul(s, sliceBlocks);
  llvm::Value* last = g.min(b.CreateAdd(first, sliceBlocks), kBlocks);
  g.loop(first, last, 1, "kslice", [&](llvm::Value* kb) {
    auto [k0, kc, kcPad] = kSlice(g, kb, kcMost, k);
    b.CreateCall(packType, packB, {bufs, operandB, batch, offsetB, n0, cols, k0, kc, kcPad, packedB});
    llvm::Value* accumulate = b.CreateICmpNE(kb, first);
    llvm::Value* bPanelElements = b.CreateAdd(b.CreateMul(kcPad, g.i64(nr)), g.i64(g.plan.lanes));
    g.loop(g.i64(0), mBlocks, 1, "mblock", [&](llvm::Value* mi) {
      llvm::Value* m0 = b.CreateMul(mi, mb);
      llvm::Value* rows = g.min(mb, b.CreateSub(m, m0));
      llvm::Value* mPanels = b.CreateUDiv(b.CreateAdd(rows, g.i64(mr - 1)), g.i64(mr));
      const APanels panels = aPanels(g, bufs, d, offsetA, m0, rows, k0);
      packAPanels(g, panels, m0, rows, k0, kc, kcPad, packedA, packingOf(g, packA, {bufs, operandA, batch, offsetA}));
      llvm::Value* blockRows = b.CreateInBoundsGEP(g.elt, partial, b.CreateMul(m0, ldc));
      g.loop(g.i64(0), nPanels, 1, "jp", [&](llvm::Value* jp) {
        llvm::Value* bPanel = b.CreateInBoundsGEP(g.elt, packedB, b.CreateMul(jp, bPanelElements));
        llvm::Value* tileColumns = b.CreateInBoundsGEP(g.elt, blockRows, b.CreateMul(jp, g.i64(nr)));
        llvm::Value* columns = b.CreateSub(cols, b.CreateMul(jp, g.i64(nr)));
        g.loop(g.i64(0), mPanels, 1, "ip", [&](llvm::Value* ip) {
          llvm::Value* c = b.CreateInBoundsGEP(g.elt, tileColumns, b.CreateMul(ip, b.CreateMul(ldc, g.i64(mr))));
          callPanel(g, panels, ip, rows, columns, kc, kcPad, packedA, bPanel, c, ldc, accumulate);
        });
      });
    });
  });
  b.CreateRetVoid();
}

/// void chunk(const {void**, const Desc*}* ctx, i64 begin, i64 end) of the SplitK path's second
/// phase: claims blocks of MB × NB (claimItems), sums the parts' partial products into part 0's in
/// order and hands the sum to the epilogue.
void emitReduceChunk(GemmBuilder& g, llvm::Function* f) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* ctx = f->getArg(0);
  llvm::Value* bufs = b.CreateAlignedLoad(b.getPtrTy(), ctx, llvm::Align(8), "bufs");
  llvm::Value* d = b.CreateAlignedLoad(b.getPtrTy(), b.CreateConstInBoundsGEP1_64(b.getPtrTy(), ctx, 1), llvm::Align(8));
  auto get = [&](int field) { return desc::load(b, d, field); };
  llvm::Value* flags = claimFlags(g, scratchOf(g, bufs, d), d, 1);
  llvm::Value *mBlocks = get(desc::MBlocks), *nBlocks = get(desc::NBlocks), *mb = get(desc::Mb), *nb = get(desc::Nb);
  llvm::Value *ldc = get(desc::Ldt), *splits = get(desc::Splits), *items = get(desc::ReduceItems);
  claimItems(g, f, flags, items, f->getArg(1), f->getArg(2), [&](llvm::Value* item) {
    llvm::Value* block = b.CreateUDiv(item, nBlocks);
    llvm::Value* batch = b.CreateUDiv(block, mBlocks, "b");
    llvm::Value* m0 = b.CreateMul(b.CreateURem(block, mBlocks), mb, "m0");
    llvm::Value* n0 = b.CreateMul(b.CreateURem(item, nBlocks), nb, "n0");
    llvm::Value* rows = g.min(mb, b.CreateSub(get(desc::M), m0));
    llvm::Value* cols = g.min(nb, b.CreateSub(get(desc::N), n0));
    llvm::Value* corner = b.CreateAdd(b.CreateMul(m0, ldc), n0);
    llvm::Value* sum = b.CreateInBoundsGEP(g.elt, partialOf(g, bufs, d, batch, g.i64(0)), corner);
    const int lanes = g.plan.lanes;
    const llvm::Align align(static_cast<uint64_t>(accBytes(g.acc)));
    // Whole vectors: the partials' rows are padded to NR columns.
    llvm::Value* vectorCols = b.CreateAnd(b.CreateAdd(cols, g.i64(lanes - 1)), g.i64(-lanes));
    g.loop(g.i64(1), splits, 1, "part", [&](llvm::Value* s) {
      llvm::Value* other = b.CreateInBoundsGEP(g.elt, partialOf(g, bufs, d, batch, s), corner);
      g.loop(g.i64(0), rows, 1, "row", [&](llvm::Value* r) {
        llvm::Value* at = b.CreateMul(r, ldc);
        g.loop(g.i64(0), vectorCols, lanes, "col", [&](llvm::Value* c) {
          llvm::Value* to = b.CreateInBoundsGEP(g.elt, sum, b.CreateAdd(at, c));
          llvm::Value* x = b.CreateAlignedLoad(g.vec, b.CreateInBoundsGEP(g.elt, other, b.CreateAdd(at, c)), align);
          b.CreateAlignedStore(g.add(b.CreateAlignedLoad(g.vec, to, align), x), to, align);
        });
      });
    });
    callEpilogue(g, bufs, d, sum, batch, m0, rows, n0, cols);
  });
  b.CreateRetVoid();
}

/// void chunk(const {void**, const Desc*}* ctx, i64 begin, i64 end): claims a scratch slot, then
/// items (claimItems): those of [begin, end) first, then what the other chunks left.
void emitChunk(GemmBuilder& g, llvm::Function* f, llvm::Function* item) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* ctx = f->getArg(0);
  llvm::Value* bufs = b.CreateAlignedLoad(b.getPtrTy(), ctx, llvm::Align(8), "bufs");
  llvm::Value* d = b.CreateAlignedLoad(b.getPtrTy(), b.CreateConstInBoundsGEP1_64(b.getPtrTy(), ctx, 1), llvm::Align(8));
  llvm::Value* scratch = scratchOf(g, bufs, d);
  llvm::Value* index =
      b.CreateAtomicRMW(llvm::AtomicRMWInst::Add, scratch, g.i64(1), llvm::Align(8), llvm::AtomicOrdering::Monotonic);
  llvm::Value* slot = b.CreateInBoundsGEP(
      b.getInt8Ty(), scratch,
      b.CreateAdd(desc::load(b, d, desc::SlotsOffset), b.CreateMul(index, desc::load(b, d, desc::SlotBytes))));
  for (int64_t tag : {kSlotTagB, kSlotTagA})  // it holds no packed operand yet
    b.CreateAlignedStore(g.i64(-1), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), slot, tag), llvm::Align(8));
  if (nativeAmx(g)) amxConfigure(g);  // the micro-kernel's tiles, for all of this thread's items
  llvm::Value* items = desc::load(b, d, desc::Items);
  if (g.plan.path == Path::Small) {
    // One thread with every item of a product whose tile spans all of N in several blocks
    // (GemmSmall.cpp's half steps, run inline): the whole of N as one item (-1), one pass over B.
    llvm::Value* n = desc::load(b, d, desc::N);
    llvm::Value* nBlocks = desc::load(b, d, desc::NBlocks);
    llvm::Value* all = b.CreateAnd(b.CreateICmpEQ(f->getArg(1), g.i64(0)), b.CreateICmpSGE(f->getArg(2), items));
    llvm::Value* spans = b.CreateAnd(b.CreateICmpSGE(desc::load(b, d, desc::Ldt), n),
                                     b.CreateAnd(b.CreateICmpSGT(nBlocks, g.i64(1)), b.CreateICmpEQ(items, nBlocks)));
    auto* whole = llvm::BasicBlock::Create(g.ctx, "whole", f);
    auto* blocks = llvm::BasicBlock::Create(g.ctx, "blocks", f);
    b.CreateCondBr(b.CreateAnd(all, spans), whole, blocks);
    b.SetInsertPoint(whole);
    b.CreateCall(item, {bufs, d, slot, g.i64(-1)});
    b.CreateRetVoid();
    b.SetInsertPoint(blocks);
  }
  claimItems(g, f, claimFlags(g, scratch, d, 0), items, f->getArg(1), f->getArg(2),
             [&](llvm::Value* i) { b.CreateCall(item, {bufs, d, slot, i}); });
  if (nativeAmx(g)) amxRelease(g);
  b.CreateRetVoid();
}

llvm::FunctionType* chunkType(llvm::LLVMContext& ctx) {
  llvm::Type* i64t = llvm::Type::getInt64Ty(ctx);
  return llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {llvm::PointerType::getUnqual(ctx), i64t, i64t}, false);
}

std::string configTag(GemmBuilder& g) {
  const char* acc = g.acc == AccType::F32 ? "f32" : g.acc == AccType::F64 ? "f64" : "i64";
  // Kernels reading A's columns in place (Blocking::aColumns) have drivers of their own, so that
  // modules without one never emit their micro-kernels.
  return fmt::format("{}.{}x{}.v{}{}{}", acc, g.plan.mr, g.plan.nr, g.plan.lanes, microKernelTag(g),
                     g.plan.aColumns ? ".acols" : "");
}

}  // namespace

int64_t directResult(const GemmBuilder& g) {
  const kernels::Kernel& k = g.kernel;
  if ((g.plan.path != Path::Packed && g.plan.path != Path::Small) || g.plan.amx || g.form.groups != 1) return 0;
  if (k.nests.size() != 1) return 0;
  const kernels::LoopNest& nest = k.nests[0];
  if (nest.stores.size() != 1 || !nest.reductions.empty()) return 0;
  const kernels::Store& store = nest.stores[0];
  const DType acc = dtypeOf(g.acc);
  const kernels::Expr& e = nest.exprs[static_cast<size_t>(store.expr)];
  if (e.kind != kernels::Expr::Kind::Acc || e.dtype != acc || store.outer) return 0;
  if (k.buffers[static_cast<size_t>(store.buffer)].type.dtype != acc) return 0;
  if (!(store.map == kernels::rowMajorMap(k.contraction.result.shape))) return 0;
  if (store.buffer == k.contraction.a || store.buffer == k.contraction.b) return 0;
  return store.buffer + 1;
}

llvm::Function* packedDriver(GemmBuilder& g) {
  const std::string tag = configTag(g);
  llvm::Function* item =
      g.sharedFunction("kiln.gemm.item." + tag, itemType(g.ctx), [&](llvm::Function* f) { emitPackedItem(g, f); });
  return g.sharedFunction("kiln.gemm.chunk." + tag, chunkType(g.ctx), [&](llvm::Function* f) { emitChunk(g, f, item); });
}

llvm::Function* smallDriver(GemmBuilder& g) {
  const std::string tag =
      fmt::format("{}.v{}", g.acc == AccType::F32 ? "f32" : g.acc == AccType::F64 ? "f64" : "i64", g.plan.lanes);
  llvm::Function* item = g.sharedFunction("kiln.gemm.small.item." + tag, itemType(g.ctx),
                                          [&](llvm::Function* f) { emitSmallItem(g, f); });
  return g.sharedFunction("kiln.gemm.small.chunk." + tag, chunkType(g.ctx),
                          [&](llvm::Function* f) { emitChunk(g, f, item); });
}

std::array<llvm::Function*, 2> splitDrivers(GemmBuilder& g) {
  const std::string tag = configTag(g);
  llvm::Function* item = g.sharedFunction("kiln.gemm.split.item." + tag, itemType(g.ctx),
                                          [&](llvm::Function* f) { emitSplitItem(g, f); });
  return {g.sharedFunction("kiln.gemm.split.chunk." + tag, chunkType(g.ctx),
                           [&](llvm::Function* f) { emitChunk(g, f, item); }),
          g.sharedFunction("kiln.gemm.split.reduce." + tag, chunkType(g.ctx),
                           [&](llvm::Function* f) { emitReduceChunk(g, f); })};
}

}  // namespace kiln::cpu::gemm
