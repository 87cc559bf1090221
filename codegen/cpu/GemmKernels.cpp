// The parts of the GEMM that do not depend on a contraction's shape, emitted once per module and
// called by every contraction that needs them (GemmEmitter.h): the micro-kernel, per register tile
// and accumulator type, and the packing of strided operands, per operand dtype and contiguous
// dimension, with the strides and the panel width as arguments.
//
// Strided packing, element (r, k) at src[k·ld + r] or src[r·ld + k] (src, ld and the panel width
// from the operand's descriptor fields, so one routine serves A's and B's panels):
//   - rows contiguous (B of A·B, A of Aᵀ·B): per k, vector loads of a panel's `width` rows,
//     walking memory row by row (and prefetching the rows ahead); the last, partial panel with
//     masked loads;
//   - k contiguous (A of A·B, B of A·Bᵀ): per panel and `lanes` k, one vector load per row,
//     transposed in registers `lanes` rows at a time; the K tail element by element, the last,
//     partial panel zeroed, then its rows copied.
// Panels are zero-padded to full width and to kcPad (a multiple of the micro-kernel's unroll).
// With bf16 k pairs (GemmEmitter.h's GemmBuilder::pairs) a panel row holds k = 2j and 2j + 1 of each
// of its rows in one 32-bit element: the rows-contiguous packing interleaves two source rows, the
// k-contiguous one loads and transposes 32-bit pairs; an odd kc's last pair gets a zero high half.
// The micro-kernel then multiplies pairs with vdpbf16ps (PairDot).
#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>

namespace kiln::cpu::gemm {
namespace {

// Rows ahead that the rows-contiguous packing prefetches: each of its rows is a page of its own in a
// transposed operand, which the hardware prefetchers do not follow.
constexpr int64_t kPrefetchRows = 8;

const char* accName(AccType acc) { return acc == AccType::F32 ? "f32" : acc == AccType::F64 ? "f64" : "i64"; }

/// acc += the dot products of bf16 k pairs, lane by lane: one pair of A (broadcast) with the
/// pairs of B vector j. Natively one vdpbf16ps; emulated, as the instruction computes it, the odd
/// products first, then the even ones, each added with one rounding (bf16 products are exact in
/// f32, so two FMAs give the same bits; the instruction also flushes subnormals).
class PairDot {
 public:
  PairDot(GemmBuilder& g, const std::vector<llvm::Value*>& bv) : g_(g), b_(g.b), lanes_(g.plan.lanes) {
    native_ = g.isa.bf16Dot();
    for (llvm::Value* v : bv) {
      if (native_) {
        bPairs_.push_back(b_.CreateBitCast(v, pairType()));
        continue;
      }
      llvm::Value* bits = b_.CreateBitCast(v, g.withLanes(b_.getInt32Ty(), lanes_));
      bEven_.push_back(even(bits));
      bOdd_.push_back(odd(bits));
    }
  }

  /// The pair of A (an i32: the even k in its low half) for the next calls.
  void setA(llvm::Value* pair) {
    if (native_) {
      aPair_ = b_.CreateBitCast(g_.splat(lanes_, pair), pairType());
      return;
    }
    aEven_ = g_.splat(lanes_, even(pair));
    aOdd_ = g_.splat(lanes_, odd(pair));
  }

  llvm::Value* operator()(int j, llvm::Value* acc) {
    const size_t at = static_cast<size_t>(j);
    if (native_)
      return b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {}, {acc, aPair_, bPairs_[at]});
    return g_.mulAdd(aEven_, bEven_[at], g_.mulAdd(aOdd_, bOdd_[at], acc));
  }

 private:
  llvm::Type* pairType() { return llvm::FixedVectorType::get(b_.getBFloatTy(), static_cast<unsigned>(2 * lanes_)); }
  /// The f32 values of the low (even k) and high (odd k) bf16 halves of i32 `bits`.
  llvm::Value* even(llvm::Value* bits) {
    return b_.CreateBitCast(b_.CreateShl(bits, g_.constant(bits->getType(), 16)), floats(bits));
  }
  llvm::Value* odd(llvm::Value* bits) {
    return b_.CreateBitCast(b_.CreateAnd(bits, g_.constant(bits->getType(), -65536)), floats(bits));
  }
  llvm::Type* floats(llvm::Value* bits) {
    auto* v = llvm::dyn_cast<llvm::FixedVectorType>(bits->getType());
    return g_.withLanes(b_.getFloatTy(), v ? static_cast<int>(v->getNumElements()) : 1);
  }

  GemmBuilder& g_;
  llvm::IRBuilder<>& b_;
  const int lanes_;
  bool native_ = false;
  std::vector<llvm::Value*> bPairs_, bEven_, bOdd_;
  llvm::Value *aPair_ = nullptr, *aEven_ = nullptr, *aOdd_ = nullptr;
};

/// The body of one micro-kernel (see microKernel) over the first `nv` vectors of columns of its
/// panels; with `aRows`, A's rows read in place (kc any depth: a loop of kUnroll k, then one of
/// single k for the rest), and with `aColumns` too, A read in place with its k lda apart.
void emitMicroKernel(GemmBuilder& g, llvm::Function* f, int nv, bool aRows, bool aColumns) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Type* i64t = b.getInt64Ty();
  llvm::Type* ptr = b.getPtrTy();
  llvm::Value *kc = f->getArg(0), *a = f->getArg(1), *bp = f->getArg(2), *c = f->getArg(3), *ldc = f->getArg(4);
  const int mr = g.plan.mr, nr = g.plan.nr, lanes = g.plan.lanes;
  KILN_ASSERT(!aRows || (!g.pairs && !g.plan.amx), "A read in place by the f32 micro-kernel only");
  const llvm::Align vecAlign(static_cast<uint64_t>(lanes * accBytes(g.acc)));
  // The tile's rows: in the scratch they start on vector boundaries, in a result written directly
  // (GemmDriver.cpp's directResult) wherever its row length puts them (N = 1000: 4000 bytes apart).
  const llvm::Align cAlign = g.eltAlign();
  auto* addStore = llvm::BasicBlock::Create(g.ctx, "accumulate", f);
  auto* store = llvm::BasicBlock::Create(g.ctx, "store", f);
  auto element = [&](llvm::Value* base, int offset) {
    return b.CreateConstInBoundsGEP1_64(g.elt, base, static_cast<uint64_t>(offset));
  };
  // Emulated AMX tiles: A's panel holds, per kAmxK k, its rows' kAmxK / 2 pairs one row after the
  // other (StridedPacker::amxAt); the loop's pointer is at the step's pairs of row 0.
  const bool amxA = g.plan.amx;
  constexpr int kAmxPairs = kAmxK / 2;
  // A's rows in place: row i at a + i · lda, addressed from the first row of its group of four
  // (4g · lda further) plus 0, lda, 2 · lda (an index scaled by 8) or 3 · lda: three bases and two
  // index registers for twelve rows, and the k step in the displacement.
  llvm::Value* lda = aRows ? f->getArg(6) : nullptr;
  llvm::Value* lda3 = aRows ? b.CreateMul(lda, g.i64(3)) : nullptr;
  // A's columns in place (aColumns): step u's rows at a + u · lda, from the same bases.
  auto aElement = [&](llvm::Value* base, int u, int i) -> llvm::Value* {
    if (aColumns) {
      llvm::Value* step = u == 0   ? base
                          : u == 3 ? b.CreateInBoundsGEP(g.elt, base, lda3)
                                   : b.CreateInBoundsGEP(g.elt, base, b.CreateMul(lda, g.i64(u)));
      return element(step, i);
    }
    if (aRows) {
      llvm::Value* group = i < 4 ? base : b.CreateInBoundsGEP(g.elt, base, b.CreateMul(lda, g.i64(i / 4 * 4)));
      const int r = i % 4;
      llvm::Value* row = r == 0   ? group
                         : r == 3 ? b.CreateInBoundsGEP(g.elt, group, lda3)
                                  : b.CreateInBoundsGEP(g.elt, group, b.CreateMul(lda, g.i64(r)));
      return element(row, u);
    }
    return element(base, amxA ? u + kAmxPairs * i : u * mr + i);
  };
  // The loop state: k, the panels' pointers, the accumulators.
  struct State {
    llvm::Value *k, *pa, *pb;
    std::vector<llvm::Value*> acc;
  };
  // Runs `steps` k per iteration (panel rows: k pairs with g.pairs) while k < end.
  auto kLoop = [&](const State& in, llvm::Value* end, int steps, const std::string& label) {
    llvm::BasicBlock* entry = b.GetInsertBlock();
    auto* body = llvm::BasicBlock::Create(g.ctx, label, f);
    auto* exit = llvm::BasicBlock::Create(g.ctx, label + ".end", f);
    b.CreateCondBr(b.CreateICmpSLT(in.k, end), body, exit);
    b.SetInsertPoint(body);
    auto phi = [&](llvm::Type* t, llvm::Value* v, const char* name) {
      llvm::PHINode* p = b.CreatePHI(t, 2, name);
      p->addIncoming(v, entry);
      return p;
    };
    State now{phi(i64t, in.k, "kk"), phi(ptr, in.pa, "pa"), phi(ptr, in.pb, "pb"), {}};
    std::vector<llvm::PHINode*> phis{llvm::cast<llvm::PHINode>(now.k), llvm::cast<llvm::PHINode>(now.pa),
                                     llvm::cast<llvm::PHINode>(now.pb)};
    for (llvm::Value* v : in.acc) {
      phis.push_back(phi(g.vec, v, "acc"));
      now.acc.push_back(phis.back());
    }
    for (int u = 0; u < steps; ++u) {
      std::vector<llvm::Value*> bv;
      for (int j = 0; j < nv; ++j)
        bv.push_back(b.CreateAlignedLoad(g.vec, element(now.pb, u * nr + j * lanes), vecAlign));
      if (g.pairs) {
        PairDot dot(g, bv);
        for (int i = 0; i < mr; ++i) {
          dot.setA(b.CreateAlignedLoad(b.getInt32Ty(), aElement(now.pa, u, i), g.eltAlign()));
          for (int j = 0; j < nv; ++j) now.acc[i * nv + j] = dot(j, now.acc[i * nv + j]);
        }
        continue;
      }
      for (int i = 0; i < mr; ++i) {
        llvm::Value* av = g.splat(lanes, b.CreateAlignedLoad(g.elt, aElement(now.pa, u, i), g.eltAlign()));
        for (int j = 0; j < nv; ++j) now.acc[i * nv + j] = g.mulAdd(av, bv[j], now.acc[i * nv + j]);
      }
    }
    const int kPerStep = g.pairs ? 2 : 1;
    llvm::Value* nextK = b.CreateAdd(now.k, g.i64(steps * kPerStep), "", /*HasNUW=*/true, /*HasNSW=*/true);
    llvm::Value* nextA = aColumns ? b.CreateInBoundsGEP(g.elt, now.pa, b.CreateMul(lda, g.i64(steps)))
                                  : element(now.pa, aRows || amxA ? steps : steps * mr);
    if (amxA) {  // past the step's last pair: on to the next step's tiles
      llvm::Value* stepEnds = b.CreateICmpEQ(b.CreateURem(nextK, g.i64(kAmxK)), g.i64(0));
      nextA = b.CreateInBoundsGEP(g.elt, nextA, b.CreateSelect(stepEnds, g.i64((kAmxRows - 1) * kAmxPairs), g.i64(0)));
    }
    State next{nextK, nextA, element(now.pb, steps * nr), now.acc};
    llvm::BasicBlock* latch = b.GetInsertBlock();
    phis[0]->addIncoming(next.k, latch);
    phis[1]->addIncoming(next.pa, latch);
    phis[2]->addIncoming(next.pb, latch);
    for (size_t i = 0; i < now.acc.size(); ++i) phis[3 + i]->addIncoming(next.acc[i], latch);
    b.CreateCondBr(b.CreateICmpSLT(next.k, end), body, exit)
        ->setMetadata(llvm::LLVMContext::MD_loop, g.loopAsWritten());
    b.SetInsertPoint(exit);
    State out{nullptr, nullptr, nullptr, {}};
    auto merge = [&](llvm::Type* t, llvm::Value* before, llvm::Value* after, const char* name) {
      llvm::PHINode* p = b.CreatePHI(t, 2, name);
      p->addIncoming(before, entry);
      p->addIncoming(after, latch);
      return p;
    };
    out.k = merge(i64t, in.k, next.k, "k.out");
    out.pa = merge(ptr, in.pa, next.pa, "pa.out");
    out.pb = merge(ptr, in.pb, next.pb, "pb.out");
    for (size_t i = 0; i < in.acc.size(); ++i) out.acc.push_back(merge(g.vec, in.acc[i], next.acc[i], "sum"));
    return out;
  };
  const std::vector<llvm::Value*> zeros(static_cast<size_t>(mr * nv), llvm::Constant::getNullValue(g.vec));
  auto at = [&](int i, int j) {
    return b.CreateInBoundsGEP(g.elt, c, b.CreateAdd(b.CreateMul(g.i64(i), ldc), g.i64(j * lanes)));
  };
  // The tile's lines, fetched for writing while the k loop runs (about 2300 cycles for a 192-deep
  // slice): the tile is read and written once per K slice, and where the product accumulates in
  // the result itself its lines come from memory on the first slice. Without it the loads and
  // stores at the end wait on L2, L3 or DRAM. 10000×512·512×1000 on the Emerald Rapids VM, 2
  // threads: 276–290 → 298–309 GFLOP/s; 1 thread 148 → 151–156; products whose tile stays in L1
  // the same.
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nv; ++j)
      b.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr},
                        {at(i, j), /*write*/ b.getInt32(1), /*locality: L1*/ b.getInt32(3), /*data*/ b.getInt32(1)});
  State start{g.i64(0), a, bp, zeros};
  // Packed panels are padded to a multiple of kUnroll; rows in place end at kc.
  State done = kLoop(start, aRows ? b.CreateAnd(kc, g.i64(-kUnroll)) : kc, g.pairs ? kUnroll / 2 : kUnroll, "k");
  if (aRows) done = kLoop(done, kc, 1, "k.rest");
  const std::vector<llvm::Value*>& sums = done.acc;
  b.CreateCondBr(f->getArg(5), addStore, store);
  b.SetInsertPoint(addStore);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nv; ++j)
      b.CreateAlignedStore(g.add(b.CreateAlignedLoad(g.vec, at(i, j), cAlign), sums[i * nv + j]), at(i, j), cAlign);
  b.CreateRetVoid();
  b.SetInsertPoint(store);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nv; ++j) b.CreateAlignedStore(sums[i * nv + j], at(i, j), cAlign);
  b.CreateRetVoid();
}

/// The body of one strided packing routine (see stridedPackFunction). Panel rows are handled
/// in chunks of `lanes` elements, all stored as whole vectors: a partial chunk (6 of 8 lanes for
/// MR = 6) spills into the start of the next panel row, written after it, or into the vector of
/// slack after each panel (panelElements); masked stores are slow. Loads are whole vectors where
/// they stay within the operand's rows, masked near the end.
class StridedPacker {
 public:
  StridedPacker(GemmBuilder& g, llvm::Function* f)
      : g_(g), b_(g.b), l_(g.plan.lanes), store_(g.storageType()), rows_(f->getArg(5)), kc_(f->getArg(7)),
        kcPad_(f->getArg(8)), dst_(f->getArg(9)) {
    llvm::Value *bufs = f->getArg(0), *operand = f->getArg(1);
    llvm::Value* offset = b_.CreateAdd(
        f->getArg(3), b_.CreateAdd(b_.CreateMul(f->getArg(4), desc::load(b_, operand, desc::RowStride)),
                                   b_.CreateMul(f->getArg(6), desc::load(b_, operand, desc::KStride))));
    llvm::Value* buffer = b_.CreateInBoundsGEP(b_.getPtrTy(), bufs, desc::load(b_, operand, desc::Buffer));
    // The ends of an empty operand may lie outside its buffer, hence no `inbounds`.
    src_ = b_.CreateGEP(store_, b_.CreateAlignedLoad(b_.getPtrTy(), buffer, llvm::Align(8)), offset, "src");
    ld_ = desc::load(b_, operand, desc::Ld);
    w_ = desc::load(b_, operand, desc::Width);
    // The width is MR or NR (a division by a constant: a multiply), or the small path's converted
    // block of B.
    full_ = divideByWidth(rows_);
    rem_ = b_.CreateSub(rows_, b_.CreateMul(full_, w_), "rem");
    panelElements_ = b_.CreateAdd(b_.CreateMul(kcPad_, w_), g_.i64(l_));
    wholeChunks_ = b_.CreateAnd(w_, g_.i64(~int64_t{l_ - 1}), "whole");
    partial_ = b_.CreateSub(w_, wholeChunks_, "partial");
  }

  void rowsContiguous() {
    // Full panels whose partial chunk may be loaded as a whole vector (it reads the next panel's
    // first rows, which exist), then those near the end that load it masked.
    llvm::Value* reach = b_.CreateAdd(wholeChunks_, g_.i64(l_));
    safe_ = b_.CreateSelect(
        b_.CreateICmpSGE(rows_, reach),
        g_.min(full_, b_.CreateAdd(divideByWidth(b_.CreateSub(rows_, reach)), g_.i64(1))), g_.i64(0), "safe");
    llvm::Value* filled = kc_;  // panel rows holding data, the rest zero
    if (!g_.pairs) {
      g_.loop(g_.i64(0), kc_, 1, "kk", [&](llvm::Value* kk) { packRow(kk, sourceRow(kk), nullptr); });
    } else {
      // Rows 2·jj and 2·jj + 1 into panel row jj; an odd kc's last row pairs with zeros.
      llvm::Value* half = b_.CreateLShr(kc_, g_.i64(1), "half");
      g_.loop(g_.i64(0), half, 1, "jj", [&](llvm::Value* jj) {
        llvm::Value* first = sourceRow(b_.CreateShl(jj, g_.i64(1)));
        packRow(jj, first, g_.at(store_, first, ld_));
      });
      when(b_.CreateICmpNE(b_.CreateAnd(kc_, g_.i64(1)), g_.i64(0)),
           [&] { packRow(half, sourceRow(b_.CreateShl(half, g_.i64(1))), nullptr); });
      filled = b_.CreateLShr(b_.CreateAdd(kc_, g_.i64(1)), g_.i64(1));
    }
    llvm::Value* panels = b_.CreateAdd(full_, b_.CreateZExt(b_.CreateICmpNE(rem_, g_.i64(0)), b_.getInt64Ty()));
    g_.loop(filled, panelRows(), 1, "kk.pad", [&](llvm::Value* kk) {
      g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
        llvm::Value* to = panelRow(p, kk);
        g_.loop(g_.i64(0), w_, l_, "chunk", [&](llvm::Value* c) {
          b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.vec), g_.at(g_.elt, to, c), g_.eltAlign());
        });
      });
    });
    b_.CreateRetVoid();
  }

  void kContiguous() {
    // Panel rows read as whole transposed blocks: k (or k pairs, 32 bits each) of full blocks of
    // l; the rest element by element.
    llvm::Value* blockRows = g_.pairs ? b_.CreateLShr(kc_, g_.i64(1)) : kc_;
    llvm::Value* kcMain = b_.CreateAnd(blockRows, g_.i64(~int64_t{l_ - 1}));
    g_.loop(g_.i64(0), full_, 1, "panel", [&](llvm::Value* p) {
      g_.loop(g_.i64(0), kcMain, l_, "kk", [&](llvm::Value* kk) {
        // The partial block first: its spills into the next rows' first columns are overwritten.
        when(b_.CreateICmpNE(partial_, g_.i64(0)), [&] { transposed(p, kk, wholeChunks_, partial_); });
        g_.loop(g_.i64(0), wholeChunks_, l_, "block", [&](llvm::Value* r0) { transposed(p, kk, r0, nullptr); });
      });
      g_.loop(kcMain, panelRows(), 1, "kk.tail", [&](llvm::Value* kk) { byElements(p, kk, w_); });
    });
    // The partial panel: zeros, then its rows' k one by one (a strided store each).
    when(b_.CreateICmpNE(rem_, g_.i64(0)), [&] {
      llvm::Value* panel = g_.at(g_.elt, dst_, b_.CreateMul(full_, panelElements_));
      g_.loop(g_.i64(0), b_.CreateMul(panelRows(), w_), l_, "zero", [&](llvm::Value* i) {
        b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.vec), g_.at(g_.elt, panel, i), g_.eltAlign());
      });
      llvm::Value* filled = g_.pairs ? b_.CreateLShr(b_.CreateAdd(kc_, g_.i64(1)), g_.i64(1)) : kc_;
      g_.loop(g_.i64(0), rem_, 1, "r", [&](llvm::Value* r) {
        llvm::Value* from = g_.at(store_, src_, b_.CreateMul(b_.CreateAdd(b_.CreateMul(full_, w_), r), ld_));
        llvm::Value* to = g_.at(g_.elt, panel, r);
        g_.loop(g_.i64(0), filled, 1, "k", [&](llvm::Value* kk) {
          b_.CreateAlignedStore(element(from, kk, b_.getTrue()), g_.at(g_.elt, to, b_.CreateMul(kk, w_)),
                                g_.eltAlign());
        });
      });
    });
    b_.CreateRetVoid();
  }

  /// A's panels in AMX tiles (GemmAmx.cpp): per kAmxK k of the slice (kcPad, a multiple of kAmxK),
  /// the panel's kAmxRows rows of kAmxK bf16 one after the other — the step's two tiles, 1 KiB
  /// each, contiguous (amxAt) — with zeros past kc and past the operand's rows. With k contiguous
  /// in the source (A of A·B), each row's kAmxK k are copied as one vector, a step's rows one after
  /// the other so that the panel is written in order (`kiln_gemm_tune --bf16 10000 512 1000`, 1T:
  /// 795 → 840 GFLOP/s against a row's steps one after the other).
  void amxKContiguous() {
    llvm::Type* v = g_.withLanes(store_, kAmxK);
    llvm::Value* panels = b_.CreateAdd(full_, b_.CreateZExt(b_.CreateICmpNE(rem_, g_.i64(0)), b_.getInt64Ty()));
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      g_.loop(g_.i64(0), kcPad_, kAmxK, "k", [&](llvm::Value* k) {  // the step's 2 KiB in order
        llvm::Value* kValid = below(b_.CreateSub(kc_, k), kAmxK);
        g_.loop(g_.i64(0), w_, 1, "r", [&](llvm::Value* r) {
          llvm::Value* row = b_.CreateAdd(b_.CreateMul(p, w_), r);
          llvm::Value* valid = b_.CreateICmpSLT(row, rows_);
          llvm::Value* from = g_.at(store_, src_, b_.CreateMul(b_.CreateSelect(valid, row, g_.i64(0)), ld_));
          llvm::Value* mask = b_.CreateAnd(kValid, g_.splat(kAmxK, valid));
          llvm::Value* x = b_.CreateMaskedLoad(v, g_.at(store_, from, k), g_.storeAlign(), mask,
                                               llvm::Constant::getNullValue(v));
          b_.CreateAlignedStore(x, amxAt(p, r, k), g_.storeAlign());
        });
      });
    });
    b_.CreateRetVoid();
  }

  /// The same from rows contiguous in the source (A of Aᵀ·B: element (m, k) at k · ld + m): per
  /// kAmxK k of a panel, its rows' k pairs (two source rows interleaved) for 16 pairs, transposed
  /// in registers into 16 pairs of each of the panel's 32 rows.
  void amxRowsContiguous() {
    const int pairs = kAmxK / 2;  // 16: the i32 lanes of a vector
    llvm::Type* v = g_.withLanes(store_, kAmxRows);
    llvm::Type* v32 = g_.withLanes(b_.getInt32Ty(), kAmxRows);
    llvm::Value* panels = b_.CreateAdd(full_, b_.CreateZExt(b_.CreateICmpNE(rem_, g_.i64(0)), b_.getInt64Ty()));
    std::vector<int> interleave;
    for (int i = 0; i < kAmxRows; ++i) interleave.push_back(i), interleave.push_back(kAmxRows + i);
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      llvm::Value* row0 = b_.CreateMul(p, g_.i64(kAmxRows));
      llvm::Value* rowsValid = below(b_.CreateSub(rows_, row0), kAmxRows);
      g_.loop(g_.i64(0), kcPad_, kAmxK, "k", [&](llvm::Value* k0) {
        std::vector<llvm::Value*> pairRows;  // the panel's 32 rows' pair j, one vector per pair
        for (int j = 0; j < pairs; ++j) {
          auto load = [&](int dk) {
            llvm::Value* k = b_.CreateAdd(k0, g_.i64(2 * j + dk));
            llvm::Value* mask = b_.CreateAnd(rowsValid, g_.splat(kAmxRows, b_.CreateICmpSLT(k, kc_)));
            llvm::Value* at = b_.CreateGEP(store_, src_, b_.CreateAdd(b_.CreateMul(k, ld_), row0));
            return b_.CreateMaskedLoad(v, at, g_.storeAlign(), mask, llvm::Constant::getNullValue(v));
          };
          pairRows.push_back(b_.CreateBitCast(b_.CreateShuffleVector(load(0), load(1), interleave), v32));
        }
        storeAmxStep(g_, pairRows, amxAt(p, g_.i64(0), k0));
      });
    });
    b_.CreateRetVoid();
  }

 private:
  /// Row r, k k…k + kAmxK − 1 (k a multiple of kAmxK) of panel p in AMX tiles: kAmxRows · kAmxK
  /// elements per step of k, kAmxK per row.
  llvm::Value* amxAt(llvm::Value* p, llvm::Value* r, llvm::Value* k) {
    llvm::Value* panel = g_.at(g_.elt, dst_, b_.CreateMul(p, panelElements_));
    return g_.at(store_, panel, b_.CreateAdd(b_.CreateMul(k, g_.i64(kAmxRows)), b_.CreateMul(r, g_.i64(kAmxK))));
  }

  /// Source row k (rows contiguous): its first element.
  llvm::Value* sourceRow(llvm::Value* k) { return g_.at(store_, src_, b_.CreateMul(k, ld_)); }

  /// Panel rows of a panel: kcPad, or kcPad / 2 rows of k pairs.
  llvm::Value* panelRows() { return g_.pairs ? b_.CreateLShr(kcPad_, g_.i64(1)) : kcPad_; }

  /// Panel row kk of every panel from source row `row` (rows contiguous), or with bf16 pairs from
  /// rows `row` and `second`, interleaved (`second` null: zeros).
  void packRow(llvm::Value* kk, llvm::Value* row, llvm::Value* second) {
    llvm::Type* type = g_.withLanes(store_, l_);
    auto chunk = [&](llvm::Value* offset, llvm::Value* mask) -> llvm::Value* {
      auto load = [&](llvm::Value* base) -> llvm::Value* {
        llvm::Value* at = g_.at(store_, base, offset);
        return mask ? maskedLoad(type, at, mask) : b_.CreateAlignedLoad(type, at, g_.storeAlign());
      };
      if (!g_.pairs) return g_.toAcc(load(row), l_);
      llvm::Value* high = second ? load(second) : llvm::Constant::getNullValue(type);
      std::vector<int> interleave;
      for (int i = 0; i < l_; ++i) interleave.push_back(i), interleave.push_back(l_ + i);
      return b_.CreateBitCast(b_.CreateShuffleVector(load(row), high, interleave), g_.vec);
    };
    auto panel = [&](llvm::Value* p, bool masked) {
      llvm::Value* first = b_.CreateMul(p, w_);
      llvm::Value* to = panelRow(p, kk);
      for (llvm::Value* r : {row, second}) {
        if (!r) continue;
        llvm::Value* ahead = b_.CreateGEP(store_, r, b_.CreateMul(g_.i64(kPrefetchRows), ld_));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                           {b_.CreateGEP(store_, ahead, first), b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
      }
      g_.loop(g_.i64(0), wholeChunks_, l_, "chunk", [&](llvm::Value* c) {
        b_.CreateAlignedStore(chunk(b_.CreateAdd(first, c), nullptr), g_.at(g_.elt, to, c), g_.eltAlign());
      });
      when(b_.CreateICmpNE(partial_, g_.i64(0)), [&] {
        llvm::Value* v = chunk(b_.CreateAdd(first, wholeChunks_), masked ? below(partial_) : nullptr);
        b_.CreateAlignedStore(v, g_.at(g_.elt, to, wholeChunks_), g_.eltAlign());
      });
    };
    g_.loop(g_.i64(0), safe_, 1, "panel", [&](llvm::Value* p) { panel(p, false); });
    g_.loop(safe_, full_, 1, "panel.end", [&](llvm::Value* p) { panel(p, true); });
    when(b_.CreateICmpNE(rem_, g_.i64(0)), [&] {  // the partial panel: rows below rem
      llvm::Value* first = b_.CreateMul(full_, w_);
      llvm::Value* to = panelRow(full_, kk);
      g_.loop(g_.i64(0), w_, l_, "chunk", [&](llvm::Value* c) {
        llvm::Value* v = chunk(b_.CreateAdd(first, c), below(b_.CreateSub(rem_, c)));
        b_.CreateAlignedStore(v, g_.at(g_.elt, to, c), g_.eltAlign());
      });
    });
  }

  /// Panel row kk's element of the row (k contiguous) that starts at `from`, in the accumulator
  /// type: k = kk, or the k pair 2·kk, 2·kk + 1; zero where `valid` is false or k is past kc (no
  /// element past kc is read).
  llvm::Value* element(llvm::Value* from, llvm::Value* kk, llvm::Value* valid) {
    auto read = [&](llvm::Value* k) -> llvm::Value* {
      llvm::Value* ok = b_.CreateAnd(valid, b_.CreateICmpSLT(k, kc_));
      llvm::Value* x = b_.CreateAlignedLoad(store_, g_.at(store_, from, b_.CreateSelect(ok, k, g_.i64(0))),
                                            g_.storeAlign());
      return b_.CreateSelect(ok, x, llvm::Constant::getNullValue(store_));
    };
    if (!g_.pairs) return g_.toAcc(read(kk), 1);
    llvm::Value* k = b_.CreateShl(kk, g_.i64(1));
    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Value* low = b_.CreateZExt(read(k), i32);
    llvm::Value* high = b_.CreateShl(b_.CreateZExt(read(b_.CreateAdd(k, g_.i64(1))), i32), 16);
    return b_.CreateBitCast(b_.CreateOr(low, high), g_.elt);
  }

  /// The lane mask lane < n of `lanes` lanes (n an i64 within i32's range, negative too), compared
  /// in i32.
  llvm::Value* below(llvm::Value* n, int lanes = 0) {
    if (lanes == 0) lanes = l_;
    std::vector<llvm::Constant*> v;
    for (int i : iota(0, lanes)) v.push_back(g_.constant(b_.getInt32Ty(), i));
    return b_.CreateICmpSLT(llvm::ConstantVector::get(v), g_.splat(lanes, b_.CreateTrunc(n, b_.getInt32Ty())));
  }

  llvm::Value* maskedLoad(llvm::Type* type, llvm::Value* at, llvm::Value* mask) {
    return b_.CreateMaskedLoad(type, at, g_.storeAlign(), mask, llvm::Constant::getNullValue(type));
  }

  /// x / width: by the widths of the ISA's register tiles as constants (a multiply), any other
  /// width (the small path's converted B, GemmSmall.cpp) at run time. They are the ISA's, not this
  /// kernel's plan's: the routine is shared by every contraction of the module.
  llvm::Value* divideByWidth(llvm::Value* x) {
    const std::array<int, 2> tile = registerTile(g_.isa, g_.acc);
    std::vector<int> widths{tile[0], tile[1]};
    if (g_.isa.avx512 && g_.acc == AccType::F32) widths.insert(widths.end(), {10, 12, 2 * g_.isa.f32Lanes});  // tileShape
    llvm::Value* q = b_.CreateUDiv(x, w_);
    for (int w : widths) q = b_.CreateSelect(b_.CreateICmpEQ(w_, g_.i64(w)), b_.CreateUDiv(x, g_.i64(w)), q);
    return q;
  }

  /// Row kk of panel p in the destination.
  llvm::Value* panelRow(llvm::Value* p, llvm::Value* kk) {
    return g_.at(g_.elt, dst_, b_.CreateAdd(b_.CreateMul(p, panelElements_), b_.CreateMul(kk, w_)));
  }

  void when(llvm::Value* cond, const std::function<void()>& body) {
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    auto* then = llvm::BasicBlock::Create(g_.ctx, "then", f);
    auto* done = llvm::BasicBlock::Create(g_.ctx, "then.done", f);
    b_.CreateCondBr(cond, then, done);
    b_.SetInsertPoint(then);
    body();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  /// Panel rows kk … kk + l - 1 of full panel p (k contiguous), columns r0 … r0 + l - 1 (or the
  /// first `count`): `l` k of each row, transposed in registers.
  void transposed(llvm::Value* p, llvm::Value* kk, llvm::Value* r0, llvm::Value* count) {
    // With bf16 pairs each load reads 32-bit k pairs: l of them from k = 2·kk on.
    llvm::Value* k = g_.pairs ? b_.CreateShl(kk, g_.i64(1)) : kk;
    llvm::Value* row0 = b_.CreateAdd(b_.CreateMul(p, w_), r0);
    llvm::Value* first = g_.at(store_, src_, b_.CreateAdd(b_.CreateMul(row0, ld_), k));
    llvm::Type* type = g_.withLanes(g_.pairs ? b_.getInt32Ty() : store_, l_);
    std::vector<llvm::Value*> rows;
    for (int r = 0; r < l_; ++r) {
      // Rows past `count` reload row 0; their lanes are not stored.
      llvm::Value* row = count ? b_.CreateSelect(b_.CreateICmpSLT(g_.i64(r), count), g_.i64(r), g_.i64(0)) : g_.i64(r);
      llvm::Value* at = g_.at(store_, first, b_.CreateMul(row, ld_));
      llvm::Value* v = b_.CreateAlignedLoad(type, at, g_.storeAlign());
      rows.push_back(g_.pairs ? b_.CreateBitCast(v, g_.vec) : g_.toAcc(v, l_));
    }
    rows = transposeSquare(b_, std::move(rows));
    // Whole vectors: with `count` columns, each spills into the start of the next panel row,
    // written after it (the panel's whole blocks after its partial one, rows in order), or into the
    // panel's slack.
    llvm::Value* to = g_.at(g_.elt, panelRow(p, kk), r0);
    for (int r = 0; r < l_; ++r)
      b_.CreateAlignedStore(rows[static_cast<size_t>(r)], g_.at(g_.elt, to, b_.CreateMul(g_.i64(r), w_)),
                            g_.eltAlign());
  }

  /// Panel row kk of panel p (k contiguous) element by element: rows below `valid` and k below
  /// kc, zero elsewhere.
  void byElements(llvm::Value* p, llvm::Value* kk, llvm::Value* valid) {
    llvm::Value* row0 = b_.CreateMul(p, w_);
    llvm::Value* to = panelRow(p, kk);
    g_.loop(g_.i64(0), w_, 1, "r", [&](llvm::Value* r) {
      llvm::Value* ok = b_.CreateICmpSLT(r, valid);
      llvm::Value* from = g_.at(store_, src_, b_.CreateMul(b_.CreateSelect(ok, b_.CreateAdd(row0, r), row0), ld_));
      b_.CreateAlignedStore(element(from, kk, ok), g_.at(g_.elt, to, r), g_.eltAlign());
    });
  }

  GemmBuilder& g_;
  llvm::IRBuilder<>& b_;
  const int l_;
  llvm::Type* store_;
  llvm::Value *rows_, *kc_, *kcPad_, *dst_, *src_, *ld_, *w_;
  llvm::Value *full_, *rem_, *panelElements_, *wholeChunks_, *partial_;
  llvm::Value* safe_ = nullptr;  // rowsContiguous: full panels that load their partial chunk whole
};

}  // namespace

std::vector<llvm::Value*> transposeSquare(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows) {
  // For h = l/2 … 1, rows i and i + h exchange the elements whose row and column differ in bit h.
  const int l = static_cast<int>(rows.size());
  for (int h = l / 2; h >= 1; h /= 2) {
    std::vector<int> low, high;
    for (int j = 0; j < l; ++j) {
      low.push_back(j & h ? l + j - h : j);
      high.push_back(j & h ? l + j : j + h);
    }
    for (int i = 0; i < l; ++i) {
      if (i & h) continue;
      llvm::Value *x = rows[static_cast<size_t>(i)], *y = rows[static_cast<size_t>(i + h)];
      rows[static_cast<size_t>(i)] = b.CreateShuffleVector(x, y, low);
      rows[static_cast<size_t>(i + h)] = b.CreateShuffleVector(x, y, high);
    }
  }
  return rows;
}

void storeAmxStep(GemmBuilder& g, const std::vector<llvm::Value*>& pairRows, llvm::Value* step) {
  llvm::IRBuilder<>& b = g.b;
  constexpr int kPairs = kAmxK / 2;  // 16: the i32 lanes of a vector
  KILN_ASSERT(pairRows.size() == kPairs, "an AMX step has {} pair rows", kPairs);
  std::vector<llvm::Value*> first, second;  // rows 0-15 and 16-31, one vector per pair
  for (llvm::Value* pair : pairRows) {
    first.push_back(b.CreateShuffleVector(pair, iota(0, kPairs)));
    second.push_back(b.CreateShuffleVector(pair, iota(kPairs, kPairs)));
  }
  first = transposeSquare(b, std::move(first));
  second = transposeSquare(b, std::move(second));
  for (int r = 0; r < kPairs; ++r) {
    b.CreateAlignedStore(first[static_cast<size_t>(r)], g.at(b.getInt32Ty(), step, g.i64(r * kPairs)), llvm::Align(4));
    b.CreateAlignedStore(second[static_cast<size_t>(r)], g.at(b.getInt32Ty(), step, g.i64((kPairs + r) * kPairs)),
                         llvm::Align(4));
  }
}

std::vector<int> iota(int first, int count) {
  std::vector<int> v(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

llvm::Value* concatVectors(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  const int nx = static_cast<int>(llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements());
  const int ny = static_cast<int>(llvm::cast<llvm::FixedVectorType>(y->getType())->getNumElements());
  if (nx != ny) {  // widen y with poison lanes first
    std::vector<int> widen = iota(0, nx);
    for (int& i : widen) i = i < ny ? i : -1;
    y = b.CreateShuffleVector(y, widen);
  }
  return b.CreateShuffleVector(x, y, iota(0, nx + ny));
}

llvm::Function* microKernel(GemmBuilder& g, int vectors, bool aRows, bool halfRows, bool aColumns) {
  KILN_ASSERT(!halfRows || nativeAmx(g), "half-row micro-kernels on native AMX tiles only");
  KILN_ASSERT(!aColumns || (aRows && !nativeAmx(g) && !g.pairs), "A's columns in place by the f32 kernel only");
  llvm::Type* i64t = g.b.getInt64Ty();
  llvm::Type* ptr = g.b.getPtrTy();
  std::vector<llvm::Type*> args{i64t, ptr, ptr, ptr, i64t, g.b.getInt1Ty()};
  if (aRows) args.push_back(i64t);                    // lda
  if (aRows && nativeAmx(g)) args.push_back(ptr);     // the packed tiles of kc's last, partial step
  auto* type = llvm::FunctionType::get(g.b.getVoidTy(), args, false);
  const int nv = g.plan.nr / g.plan.lanes;
  if (vectors <= 0 || vectors > nv) vectors = nv;
  const std::string narrow = vectors < nv ? fmt::format(".cols{}", vectors * g.plan.lanes) : "";
  const std::string name =
      fmt::format("kiln.gemm.ukernel.{}.{}x{}.v{}{}{}{}{}", accName(g.acc), g.plan.mr, g.plan.nr, g.plan.lanes,
                  microKernelTag(g), aColumns ? ".acols" : aRows ? ".arows" : "", halfRows ? ".rows16" : "", narrow);
  return g.sharedFunction(name, type, [&](llvm::Function* f) {
    nativeAmx(g) ? emitAmxMicroKernel(g, f, vectors, aRows, halfRows ? 1 : 2)
                 : emitMicroKernel(g, f, vectors, aRows, aColumns);
  });
}

llvm::Value* panelKernel(GemmBuilder& g, llvm::Value* columns, bool aRows, llvm::Value* rows, bool aColumns) {
  const int nv = g.plan.nr / g.plan.lanes;
  auto byColumns = [&](bool halfRows) {
    llvm::Value* kernel = microKernel(g, 0, aRows, halfRows, aColumns);
    // Narrowest last: a panel of `columns` takes the kernel of ⌈columns / lanes⌉ vectors.
    for (int v = nv - 1; v >= 1; --v)
      kernel = g.b.CreateSelect(g.b.CreateICmpSLE(columns, g.i64(int64_t{v} * g.plan.lanes)),
                                microKernel(g, v, aRows, halfRows, aColumns), kernel);
    return kernel;
  };
  if (!rows || !nativeAmx(g)) return byColumns(false);
  return g.b.CreateSelect(g.b.CreateICmpSLE(rows, g.i64(kAmxRows / 2)), byColumns(true), byColumns(false));
}

std::string microKernelTag(GemmBuilder& g) {
  if (!g.pairs) return "";
  if (g.plan.amx) return nativeAmx(g) ? ".amx" : g.isa.bf16Dot() ? ".amx.emulated" : ".amx.emulated.nobf16";
  return g.isa.bf16Dot() ? ".bf16dot" : ".bf16dot.emulated";
}

llvm::FunctionType* packFunctionType(llvm::LLVMContext& ctx) {
  llvm::Type* i64t = llvm::Type::getInt64Ty(ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  return llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, i64t, i64t, i64t, i64t, i64t, i64t, i64t, ptr},
                                 false);
}

llvm::Function* stridedPackFunction(GemmBuilder& g, bool rowsContiguous, bool amxA) {
  KILN_ASSERT(!amxA || (g.plan.amx && g.plan.mr == kAmxRows), "AMX tile rows for the AMX blocking only");
  const std::string name =
      fmt::format("kiln.gemm.pack.{}{}.{}", g.typeTag(), amxA ? ".amx" : "", rowsContiguous ? "rows" : "k");
  return g.sharedFunction(name, packFunctionType(g.ctx), [&](llvm::Function* f) {
    StridedPacker packer(g, f);
    if (amxA) return rowsContiguous ? packer.amxRowsContiguous() : packer.amxKContiguous();
    rowsContiguous ? packer.rowsContiguous() : packer.kContiguous();
  });
}

}  // namespace kiln::cpu::gemm
