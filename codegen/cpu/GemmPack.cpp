// Packing for the GEMM emitter (GemmEmitter.h): operand elements, reached through the GEMM
// form's index maps, copied into MR- or NR-wide panels in the accumulator type. Strided operands
// (every matmul operand) use the shared routines of GemmKernels.cpp instead; these are emitted per
// kernel, for convolution windows, padding and quotient maps.
//
// Four ways, chosen per panel:
//   - rows contiguous in memory, no bounds (B of A·B, A of Aᵀ·B): one vector load per panel and
//     k, walking memory row by row;
//   - k contiguous, no bounds (A of A·B, B of A·Bᵀ, convolution weights): one vector load per
//     row and `lanes` k, transposed in registers `lanes` rows at a time;
//   - k contiguous in runs, no quotients, where some `lanes` k are one stretch (the operands of a
//     weight gradient, whose k is image, row, column; not a 3×3 window's): as the previous way
//     for every `lanes` k steps that are one stretch of memory (inside one run, or across runs
//     that meet: a padded 3×3 gradient's rows of 14) — with
//     bounds (the input's padding), each row's load masked by the bounds on those k steps — or,
//     `lanes` k that are two stretches (one image's last pixels and the next one's first), two
//     masked loads per row (cnn's bf16 weight gradient's packing about 15 % less time); the
//     general way for the others;
//   - anything else (convolution windows with padding, broadcasts, K tails): the map is
//     evaluated on vectors of `lanes` rows — coordinates unravelled with div/mod, bounds and
//     quotient conditions as lane masks — and a panel row whose index runs contiguously is
//     loaded with masked vector loads (an implicit-GEMM row of a convolution, padding masked
//     off), any other with a masked gather (AVX-512) or lane by lane. When the bounds repeat
//     along k with a short period (a 3×3 window's k = channel, kh, kw: every 9 steps), a
//     contiguous panel's masks are computed once per phase and each row is one table load and a
//     masked load per vector (the periodic way).
// The transposed and run ways take the last panel, short of rows, too: its missing rows read row
// 0, and their copies become product rows that no epilogue reads.
// When unravelling k takes divisions, the k part of every functional is precomputed per k into a
// constant table (one load per panel row instead of a div/mod chain; at most 256 KiB; for a deeper
// K, the inner k dimensions only, the outer ones added by their stride); the table also tells
// where the runs of the third way meet. K padding rows are zeroed in a loop of their own, so the
// masks of operand rows need no k test.
// Indices are computed in i32 when every value of the map fits, in i64 otherwise.
// This file builds the k table, chooses the way per panel and emits the routine (with its region
// prefetch); GemmPackWays.cpp emits the ways; GemmPackEmitter.h is the emitter they share.
#include "codegen/cpu/GemmPackEmitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cmath>

namespace kiln::cpu::gemm {
namespace pack {

std::vector<const Affine*> functionals(const GemmOperand& op) {
  std::vector<const Affine*> fs{&op.map.index};
  for (const auto& bound : op.map.bounds) fs.push_back(&bound.value);
  for (const auto& q : op.quotients) fs.push_back(&q.value);
  return fs;
}

/// Whether indices may be computed in i32: every functional stays within ±2^30 on the coordinate
/// box grown by one in each dimension (the rows and k of padded panels run a little past the
/// end; their lanes are masked off), and so do the flat coordinates.
bool PackEmitter::fitsInt32() const {
  constexpr double kLimit = 0x1p30;
  const kernels::GemmForm& f = g_.form;
  std::vector<int64_t> sizes(op_.map.index.coeff.size(), 1);
  auto place = [&](size_t at, const std::vector<int64_t>& dims) {
    for (size_t d = 0; d < dims.size(); ++d) sizes[at + d] = dims[d] + 1;
  };
  place(0, f.batchDims);
  place(rowAt_, rowDims_);
  place(kAt_, f.kDims);
  for (const Affine* a : functionals(op_)) {
    double range = std::abs(static_cast<double>(a->constant));
    for (size_t d = 0; d < sizes.size(); ++d)
      range += std::abs(static_cast<double>(a->coeff[d])) * static_cast<double>(sizes[d]);
    if (range >= kLimit) return false;
  }
  for (const auto& q : op_.quotients)
    if (static_cast<double>(q.limit) * static_cast<double>(q.divisor) >= kLimit) return false;
  return static_cast<double>(std::max({f.batch, f.m, f.n, f.k})) + 64 < kLimit;
}

/// The k table (kTable_) when unravelling k takes divisions — an implicit-GEMM window's k is
/// (channel, kh, kw), a weight gradient's (image, row, column) — and the table is small enough to
/// stay in cache: one load per functional and panel row instead of a division chain. Laid out
/// [functional][k], so `lanes` consecutive k of a functional are one vector load. Only k < K is
/// ever read: K padding rows are zeroed without it. When all of K would be too big (a weight
/// gradient over many images), the table covers the innermost k dimensions whose outer rest every
/// functional reads as one stride (the image of a weight gradient's k).
void PackEmitter::buildKTable() {
  constexpr int64_t kMostBytes = 256 << 10;
  const kernels::GemmForm& f = g_.form;
  const std::vector<const Affine*> fs = functionals(op_);
  bool divides = false;
  for (const Affine* a : fs) divides = divides || !groupStride(*a, kAt_, f.kDims);
  if (!divides || f.k == 0) return;
  const int64_t entryBytes = static_cast<int64_t>(fs.size()) * (ix_->getIntegerBitWidth() / 8);
  // The outer k dimensions [0, split): none when all of K fits, else the most that every
  // functional reads with one stride (and that leave some inner dimension).
  const std::vector<int64_t>& dims = f.kDims;
  size_t split = 0;
  int64_t rows = f.k;
  if (rows * entryBytes > kMostBytes) {
    split = dims.size();
    for (size_t s = dims.size() - 1; s > 0 && split == dims.size(); --s) {
      const std::vector<int64_t> outer(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(s));
      bool affine = true;
      for (const Affine* a : fs) affine = affine && groupStride(*a, kAt_, outer).has_value();
      if (affine) split = s;
    }
    if (split == dims.size()) return;
    rows = 1;
    for (size_t d = split; d < dims.size(); ++d) rows *= dims[d];
    if (rows * entryBytes > kMostBytes) return;
    const std::vector<int64_t> outer(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(split));
    for (const Affine* a : fs) kOuter_.push_back(*groupStride(*a, kAt_, outer));
  }
  std::vector<llvm::Constant*> table;  // [functional][k]: a functional's entries are one vector load apart
  std::vector<int64_t> coord(dims.size(), 0);
  for (const Affine* a : fs) {
    for (int64_t k = 0; k < rows; ++k) {
      int64_t flat = k;
      for (size_t d = dims.size(); d-- > split;) {
        coord[d] = flat % dims[d];
        flat /= dims[d];
      }
      int64_t v = a->constant;
      for (size_t d = split; d < coord.size(); ++d) v += a->coeff[kAt_ + d] * coord[d];
      table.push_back(llvm::ConstantInt::get(ix_, static_cast<uint64_t>(v), /*isSigned=*/true));
      if (a == fs[0]) kIndex_.push_back(v);
    }
  }
  kRows_ = rows;
  // Slack after the last functional, so that a vector of entries from any k < K stays inside.
  table.insert(table.end(), static_cast<size_t>(g_.plan.lanes), llvm::ConstantInt::get(ix_, 0));
  auto* type = llvm::ArrayType::get(ix_, table.size());
  kTable_ = new llvm::GlobalVariable(g_.m, type, /*isConstant=*/true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(type, table), g_.name + ".pack_" + label_ + ".k");
  kTable_->setAlignment(llvm::Align(64));
}

/// Whether some `lanes` consecutive k of the k table are one stretch of memory (entries first,
/// first + 1, …): the run way's vectors. A 3×3 window's k (channel, kh, kw) never is — its runs of
/// three do not meet — and takes the periodic way instead of the run way's rows one by one. cnn's
/// second convolution (`kiln_gemm_tune --bf16 conv 64 32 14 14 64 3`, 1T): 1083–1140 → 811–828 µs;
/// in its training step (`kiln explain cnn --batch 64 --train --optimizer adam --measure`, two
/// interleaved pairs) bf16 499–503 → 330–341 µs, f32 1654–1656 → 1562–1566.
bool PackEmitter::kStretches() const {
  const int64_t l = g_.plan.lanes;
  for (int64_t k = 0, length = 1; k + 1 < static_cast<int64_t>(kIndex_.size()); ++k) {
    length = kIndex_[static_cast<size_t>(k + 1)] == kIndex_[static_cast<size_t>(k)] + 1 ? length + 1 : 1;
    if (length >= l) return true;
  }
  return false;
}

llvm::Function* PackEmitter::emit() {
  llvm::Type* i64t = b_.getInt64Ty();
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Function* f = g_.newFunction("pack_" + label_ + (pairs_ || amx_ ? ".pairs" : ""), packFunctionType(g_.ctx));
  b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", f));
  // Arguments 1 and 3, the operand's descriptor fields and batch offset, are for strided routines.
  llvm::Value *bufs = f->getArg(0), *batch = f->getArg(2), *kc = f->getArg(7), *kcPad = f->getArg(8),
              *dst = f->getArg(9);
  ix_ = fitsInt32() ? b_.getInt32Ty() : i64t;
  base_ = b_.CreateAlignedLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, bufs, static_cast<uint64_t>(op_.buffer)),
                               llvm::Align(8), "base");
  r0_ = toIx(f->getArg(4)), rows_ = toIx(f->getArg(5)), k0_ = toIx(f->getArg(6)), kc_ = toIx(kc);
  batchParts_ = groupParts(0, g_.form.batchDims, toIx(batch));
  buildKTable();
  prefetchRegion();
  const int w = width_;
  const int l = g_.plan.lanes;
  if (kTable_ && !op_.map.bounds.empty() && op_.quotients.empty() && maskedLoads()) {
    constexpr int64_t kMostPeriod = 32;
    const int64_t period = maskPeriod();
    if (period <= std::min(kMostPeriod, g_.plan.kc)) {
      period_ = period;
      const int64_t chunks = (w + l - 1) / l;
      masks_ = b_.CreateAlloca(g_.withLanes(ix_, l), g_.i64(period * chunks), "masks");
      masks_->setAlignment(llvm::Align(64));
    }
  }
  llvm::Value* rows = f->getArg(5);
  llvm::Value* panels = b_.CreateUDiv(b_.CreateAdd(rows, g_.i64(w - 1)), g_.i64(w));
  llvm::Value* fullPanels = b_.CreateUDiv(rows, g_.i64(w));
  llvm::Value* panelElements = b_.CreateAdd(b_.CreateMul(kcPad, g_.i64(w)), g_.i64(g_.plan.lanes));
  auto dstRow = [&](llvm::Value* panel, llvm::Value* kk) {
    return b_.CreateInBoundsGEP(g_.elt, dst,
                                b_.CreateAdd(b_.CreateMul(panel, panelElements), b_.CreateMul(kk, g_.i64(w))));
  };
  // Pairs mode: the layout's row of panel row kk is its pair row, kk / 2.
  llvm::Value* one = g_.i64(1);
  auto layoutRow = [&](llvm::Value* kk) { return pairs_ ? b_.CreateLShr(kk, one) : kk; };
  // amx_: row 0's element at k kk of panel p in the tiles' layout (StridedPacker::amxAt), the
  // other rows kAmxK elements apart.
  auto amxAt = [&](llvm::Value* p, llvm::Value* kk) {
    llvm::Value* panel = b_.CreateInBoundsGEP(g_.elt, dst, b_.CreateMul(p, panelElements));
    llvm::Value* step = b_.CreateAnd(kk, g_.i64(-int64_t{kAmxK}));
    return b_.CreateInBoundsGEP(b_.getInt16Ty(), panel,
                                b_.CreateAdd(b_.CreateMul(step, g_.i64(kAmxRows)), b_.CreateSub(kk, step)));
  };
  auto rowsOf = [&](llvm::Value* p) {
    return [&, p](llvm::Value* row) { return amx_ ? amxAt(p, row) : dstRow(p, row); };
  };
  // Where `lanes` k from kk of panel p go.
  auto kDst = [&](llvm::Value* p, llvm::Value* kk) { return amx_ ? amxAt(p, kk) : dstRow(p, layoutRow(kk)); };
  // Rows kk < kc from the operand (from even), the K padding up to kcPad zeros (a separate loop,
  // so that the operand rows need no k test in their masks).
  auto packGeneral = [&](const PanelRows& pr, llvm::Value* p, llvm::Value* from) {
    storeRows(pr, from, kc, [&](llvm::Value* kk) { return rowGeneral(pr, kk); }, rowsOf(p));
    llvm::Value* padFrom = b_.CreateSelect(b_.CreateICmpSGT(from, kc), from, kc);
    if (pairs_) padFrom = b_.CreateLShr(b_.CreateAdd(padFrom, one), one);  // past an odd kc's last pair
    g_.loop(padFrom, layoutRow(kcPad), 1, "kk.pad", [&](llvm::Value* kk) {
      if (!amx_) {
        b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.withLanes(g_.elt, w)), dstRow(p, kk), g_.eltAlign());
        return;
      }
      std::vector<llvm::Value*> zeros;
      for (const PanelRows::Chunk& c : pr.chunks) zeros.push_back(llvm::Constant::getNullValue(g_.withLanes(g_.elt, c.count)));
      scatterAmx(pr, amxAt(p, kk), zeros);
    });
  };
  // Panels take a fast way when their rows or k are contiguous (without bounds) or k runs
  // contiguously (bounds masked); the rest is general (or periodic).
  const bool plain = op_.map.bounds.empty() && op_.quotients.empty();
  llvm::Value* firstGeneral = g_.i64(0);
  // Every panel `l` k steps at a time by `block(rows, panel, kk)`, the last one short of rows
  // too (its missing rows clamped to row 0); their K tail and padding the general way.
  auto panelsByLanes = [&](const std::function<void(const PanelRows&, llvm::Value*, llvm::Value*)>& block) {
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      PanelRows pr = panelRows(toIx(p), /*clamp=*/true);
      llvm::Value* kcMain = b_.CreateAnd(kc, g_.i64(~int64_t{l - 1}));
      g_.loop(g_.i64(0), kcMain, l, "kk", [&](llvm::Value* kk) { block(pr, p, kk); });
      packGeneral(pr, p, kcMain);
    });
    firstGeneral = panels;
  };
  KILN_ASSERT(!amx_ || (plain && groupStride(op_.map.index, rowAt_, rowDims_) != 1),
              "A packed straight into AMX tiles takes the ways that write rows of k (PackEmitter::amxFits)");
  if (plain && groupStride(op_.map.index, rowAt_, rowDims_) == 1) {
    packContiguousRows(fullPanels, kcPad, dstRow);
    firstGeneral = fullPanels;
  } else if (plain && groupStride(op_.map.index, kAt_, g_.form.kDims) == 1) {
    panelsByLanes([&](const PanelRows& pr, llvm::Value* p, llvm::Value* kk) {
      packTransposed(pr, b_.CreateAdd(b_.CreateAdd(k0_, toIx(kk)), g_.constant(ix_, op_.map.index.constant)),
                     kDst(p, kk));
    });
  } else if (op_.quotients.empty() && (plain || maskedLoads()) && kTable_ &&
             op_.map.index.coeff[kAt_ + g_.form.kDims.size() - 1] == 1 && kStretches()) {
    // k contiguous in runs (a weight gradient's k = image, row, column): `lanes` k steps whose
    // table entries are first, first + 1, … are one stretch of memory per row, packed as above —
    // whether they lie in one run of the innermost k dimension or in several that meet (rows of
    // 14 columns in a 3×3 stride-1 padding-1 gradient make one run of 196 per image); the others,
    // and the K tail, go the general way.
    panelsByLanes([&](const PanelRows& pr, llvm::Value* p, llvm::Value* kk) {
      llvm::Value* k = b_.CreateAdd(k0_, toIx(kk));
      llvm::Value* entries = kTableEntry(k, 0, l);  // the table's slack keeps the load inside it
      // Each lane's entry less its place: one value along a stretch of memory.
      llvm::Value* starts = b_.CreateSub(entries, lanes(0, l));
      llvm::Value* first = b_.CreateExtractElement(starts, uint64_t{0});
      llvm::Value* last = b_.CreateExtractElement(starts, static_cast<uint64_t>(l - 1));
      llvm::Value* firstLanes = b_.CreateICmpEQ(starts, g_.splat(l, first));
      llvm::Value* spans = kTableSpans(k, l);
      llvm::Value* run = b_.CreateAnd(spans, b_.CreateAndReduce(firstLanes));
      // Two stretches (a run's end and the next one's start: an image's last pixels and the next
      // image's first in a weight gradient) are two masked loads per row.
      llvm::Value* twoRuns =
          maskedLoads() ? b_.CreateAnd(spans, b_.CreateAndReduce(b_.CreateOr(
                                                  firstLanes, b_.CreateICmpEQ(starts, g_.splat(l, last)))))
                        : b_.getFalse();
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      auto* vectors = llvm::BasicBlock::Create(g_.ctx, "run.vector", fn);
      auto* notOne = llvm::BasicBlock::Create(g_.ctx, "run.two.test", fn);
      auto* two = llvm::BasicBlock::Create(g_.ctx, "run.two", fn);
      auto* rowsBlock = llvm::BasicBlock::Create(g_.ctx, "run.rows", fn);
      auto* done = llvm::BasicBlock::Create(g_.ctx, "run.done", fn);
      b_.CreateCondBr(run, vectors, notOne);
      b_.SetInsertPoint(vectors);
      packTransposed(pr, first, kDst(p, kk), plain ? nullptr : k);
      b_.CreateBr(done);
      b_.SetInsertPoint(notOne);
      b_.CreateCondBr(twoRuns, two, rowsBlock);
      b_.SetInsertPoint(two);
      const SecondRun second{last, firstLanes};
      packTransposed(pr, first, kDst(p, kk), plain ? nullptr : k, &second);
      b_.CreateBr(done);
      b_.SetInsertPoint(rowsBlock);
      // A loop, not `lanes` copies of the general row: these steps are rare (a run's end) and
      // the copies were a large part of the kernel's compile time.
      storeRows(pr, kk, b_.CreateAdd(kk, g_.i64(l)), [&](llvm::Value* at) { return rowGeneral(pr, at); }, rowsOf(p));
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    });
  }
  // The rest; with periodic masks, every panel whose rows are contiguous the periodic way.
  g_.loop(firstGeneral, panels, 1, "panel.general", [&](llvm::Value* p) {
    PanelRows pr = panelRows(toIx(p));
    if (!masks_) {
      packGeneral(pr, p, g_.i64(0));
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* periodic = llvm::BasicBlock::Create(g_.ctx, "panel.periodic", fn);
    auto* general = llvm::BasicBlock::Create(g_.ctx, "panel.rows", fn);
    auto* done = llvm::BasicBlock::Create(g_.ctx, "panel.done", fn);
    b_.CreateCondBr(pr.contiguous, periodic, general);
    b_.SetInsertPoint(periodic);
    packPeriodic(pr, kc, rowsOf(p));
    packGeneral(pr, p, kc);  // the K padding
    b_.CreateBr(done);
    b_.SetInsertPoint(general);
    packGeneral(pr, p, g_.i64(0));
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  });
  b_.CreateRetVoid();
  return f;
}

/// Prefetches the stretch of the operand between the elements of the call's first row at its
/// first k and its last row at its last k — for a convolution's windows (indices growing with
/// both) the region the call reads — into L1 when it fits there, else into L2, at most kMostBytes,
/// when the stretch is not much larger than the call's elements. The rows of a panel then find
/// their lines on the way instead of missing one after another: a 3×3 window's rows of one k slice
/// read 16 KiB of an image's activations, whose lines no hardware prefetcher foresees (a cold input
/// gradient's packing ran about 2.7 times slower than warm).
void PackEmitter::prefetchRegion() {
  constexpr int64_t kMostBytes = 256 << 10, kL1Bytes = 32 << 10, kLine = 64;
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* body = llvm::BasicBlock::Create(g_.ctx, "prefetch", f);
  auto* done = llvm::BasicBlock::Create(g_.ctx, "prefetch.done", f);
  const int64_t bytes = static_cast<int64_t>(g_.storageType()->getPrimitiveSizeInBits() / 8);
  b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSGT(rows_, g_.constant(ix_, 0)), b_.CreateICmpSGT(kc_, g_.constant(ix_, 0))),
                  body, done);
  b_.SetInsertPoint(body);
  auto index = [&](llvm::Value* row, llvm::Value* k) {
    return toI64(b_.CreateAdd(groupParts(rowAt_, rowDims_, row)[0], offsetsAt(k)[0]));
  };
  llvm::Value* one = g_.constant(ix_, 1);
  llvm::Value* lo = index(r0_, k0_);
  llvm::Value* hi = index(b_.CreateSub(b_.CreateAdd(r0_, rows_), one), b_.CreateSub(b_.CreateAdd(k0_, kc_), one));
  llvm::Value* extent = b_.CreateSub(hi, lo);  // elements
  llvm::Value* span = b_.CreateMul(extent, g_.i64(bytes));
  llvm::Value* reach = g_.min(b_.CreateAdd(span, g_.i64(kLine)), g_.i64(kMostBytes));
  // Prefetches never fault: lines of the padding outside the buffer cost nothing.
  llvm::Value* from = b_.CreateGEP(b_.getInt8Ty(), base_, b_.CreateMul(lo, g_.i64(bytes)));
  llvm::Value* l1 = b_.CreateICmpSLE(reach, g_.i64(kL1Bytes));
  auto prefetch = [&](int locality) {
    g_.loop(g_.i64(0), reach, kLine, "prefetch.line", [&](llvm::Value* at) {
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                         {b_.CreateGEP(b_.getInt8Ty(), from, at), b_.getInt32(0), b_.getInt32(locality), b_.getInt32(1)});
    });
  };
  auto* nearBlock = llvm::BasicBlock::Create(g_.ctx, "prefetch.l1", f);
  auto* farBlock = llvm::BasicBlock::Create(g_.ctx, "prefetch.l2", f);
  // Only a dense region: at most twice the call's elements (rows far apart, such as the channels
  // of a weight gradient's dy of which one k slice is read, would bring in lines nobody reads).
  llvm::Value* elements = b_.CreateMul(toI64(rows_), toI64(kc_));
  llvm::Value* dense = b_.CreateICmpULE(extent, b_.CreateShl(elements, g_.i64(1)));  // and not negative
  b_.CreateCondBr(dense, nearBlock, done);
  b_.SetInsertPoint(nearBlock);
  auto* l1Block = llvm::BasicBlock::Create(g_.ctx, "prefetch.t0", f);
  b_.CreateCondBr(l1, l1Block, farBlock);
  b_.SetInsertPoint(l1Block);
  prefetch(3);
  b_.CreateBr(done);
  b_.SetInsertPoint(farBlock);
  prefetch(2);
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

}  // namespace pack

llvm::Function* emitPackFunction(GemmBuilder& g, bool a) { return pack::PackEmitter(g, a).emit(); }

bool pack::PackEmitter::amxFits(const GemmBuilder& g) {
  const GemmOperand& a = g.form.a;
  return a.map.bounds.empty() && a.quotients.empty() &&
         groupStride(a.map.index, g.form.batchDims.size(), g.form.mDims) != 1;
}

llvm::Function* emitPairPackFunction(GemmBuilder& g, bool a) {
  if (!(a && g.plan.amx)) return pack::PackEmitter(g, a, /*pairs=*/true).emit();
  if (pack::PackEmitter::amxFits(g)) return pack::PackEmitter(g, a, /*pairs=*/false, /*amx=*/true).emit();
  // A on AMX tiles: the f32 panels, each then rewritten in place as the tiles' layout.
  llvm::Function* packF32 = emitPackFunction(g, a);
  llvm::IRBuilder<>& b = g.b;
  llvm::Function* f = g.newFunction("pack_a.pairs", packFunctionType(g.ctx));
  b.SetInsertPoint(llvm::BasicBlock::Create(g.ctx, "entry", f));
  std::vector<llvm::Value*> args;
  for (llvm::Argument& arg : f->args()) args.push_back(&arg);
  b.CreateCall(packF32, args);
  llvm::Value *rows = f->getArg(5), *kcPad = f->getArg(8), *dst = f->getArg(9);
  const int w = g.plan.mr;
  llvm::Type* row = g.withLanes(b.getInt32Ty(), w);
  const llvm::Align align(4);
  llvm::Value* high = g.constant(row, -65536);  // 0xFFFF0000
  // The pair of panel rows 2·jj and 2·jj + 1 (f32, exact bf16 values): per lane, k 2·jj's bf16 in
  // the low half, k 2·jj + 1's in the high half.
  auto pairAt = [&](llvm::Value* panel, llvm::Value* jj) {
    llvm::Value* even = g.at(b.getInt32Ty(), panel, b.CreateMul(jj, g.i64(2 * w)));
    llvm::Value* odd = g.at(b.getInt32Ty(), even, g.i64(w));
    return b.CreateOr(b.CreateAnd(b.CreateAlignedLoad(row, odd, align), high),
                      b.CreateLShr(b.CreateAlignedLoad(row, even, align), g.constant(row, 16)));
  };
  llvm::Value* panels = b.CreateUDiv(b.CreateAdd(rows, g.i64(w - 1)), g.i64(w));
  llvm::Value* panelElements = b.CreateAdd(b.CreateMul(kcPad, g.i64(w)), g.i64(g.plan.lanes));
  // In place, in order: what a step writes lies at or before what it reads (each load comes first).
  // A on AMX tiles (StridedPacker::amxAt): per kAmxK k, the step's 16 pair rows transposed.
  g.loop(g.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
    llvm::Value* panel = g.at(g.elt, dst, b.CreateMul(p, panelElements));
    g.loop(g.i64(0), kcPad, kAmxK, "step", [&](llvm::Value* k0) {
      std::vector<llvm::Value*> pairRows;
      for (int j = 0; j < kAmxK / 2; ++j)
        pairRows.push_back(pairAt(panel, b.CreateAdd(b.CreateLShr(k0, g.i64(1)), g.i64(j))));
      storeAmxStep(g, pairRows, g.at(b.getInt32Ty(), panel, b.CreateMul(k0, g.i64(kAmxRows / 2))));
    });
  });
  b.CreateRetVoid();
  return f;
}

}  // namespace kiln::cpu::gemm
