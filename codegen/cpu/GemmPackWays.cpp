// The ways of packing an operand read through its index map (GemmPack.cpp's file comment): the
// periodic, transposed, contiguous-rows and general ways of one panel, and the index arithmetic they
// share — the k table's entries, the parts of a coordinate group, the rows of a panel.
#include "codegen/cpu/GemmPackEmitter.h"

#include <llvm/IR/Constants.h>

#include <algorithm>

namespace kiln::cpu::gemm::pack {

/// The k part (with the constant) of functional `functional` at k, from the k table; with
/// `lanes` > 1, the vector of k … k + lanes − 1 (which, with a table of the inner k dimensions
/// only, must not cross a multiple of kRows_: see kTableSpans).
llvm::Value* PackEmitter::kTableEntry(llvm::Value* k, size_t functional, int lanes) {
  llvm::Value* inner = k;
  llvm::Value* outer = nullptr;
  if (!kOuter_.empty()) {
    inner = b_.CreateURem(k, g_.constant(ix_, kRows_));
    outer = b_.CreateMul(b_.CreateUDiv(k, g_.constant(ix_, kRows_)), g_.constant(ix_, kOuter_[functional]));
  }
  llvm::Value* at = b_.CreateAdd(toI64(inner), g_.i64(static_cast<int64_t>(functional) * kRows_));
  llvm::Value* entry = b_.CreateAlignedLoad(g_.withLanes(ix_, lanes), b_.CreateInBoundsGEP(ix_, kTable_, at),
                                            llvm::Align(ix_->getIntegerBitWidth() / 8));
  if (!outer) return entry;
  return b_.CreateAdd(entry, lanes == 1 ? outer : g_.splat(lanes, outer));
}

/// Whether the table entries of k … k + lanes − 1 are one vector load (always, unless the table
/// holds the inner k dimensions only and the steps cross into the next outer index).
llvm::Value* PackEmitter::kTableSpans(llvm::Value* k, int lanes) {
  if (kOuter_.empty()) return b_.getTrue();
  return b_.CreateICmpSLE(b_.CreateAdd(b_.CreateURem(k, g_.constant(ix_, kRows_)), g_.constant(ix_, lanes)),
                          g_.constant(ix_, kRows_));
}

/// Σ coeff · coordinate of `a` over the coordinate group at `at` (sizes `dims`) whose flat
/// index is `flat` (a scalar or a vector of the index type).
llvm::Value* PackEmitter::groupPart(const Affine& a, size_t at, const std::vector<int64_t>& dims, llvm::Value* flat) {
  llvm::Type* t = flat->getType();
  if (std::optional<int64_t> s = groupStride(a, at, dims)) return b_.CreateMul(flat, g_.constant(t, *s));
  llvm::Value* sum = g_.constant(t, 0);
  for (size_t d = dims.size(); d-- > 0;) {
    llvm::Value* coord = d == 0 ? flat : b_.CreateURem(flat, g_.constant(t, dims[d]));
    if (d > 0) flat = b_.CreateUDiv(flat, g_.constant(t, dims[d]));
    if (a.coeff[at + d] != 0) sum = b_.CreateAdd(sum, b_.CreateMul(coord, g_.constant(t, a.coeff[at + d])));
  }
  return sum;
}

/// The parts of every functional over one coordinate group.
std::vector<llvm::Value*> PackEmitter::groupParts(size_t at, const std::vector<int64_t>& dims, llvm::Value* flat) {
  std::vector<llvm::Value*> parts;
  for (const Affine* a : functionals(op_)) parts.push_back(groupPart(*a, at, dims, flat));
  return parts;
}

/// The constant vector first, first + 1, … of `count` lanes of the index type.
llvm::Value* PackEmitter::lanes(int first, int count) {
  std::vector<llvm::Constant*> v;
  for (int i : iota(first, count)) v.push_back(g_.constant(ix_, i));
  return llvm::ConstantVector::get(v);
}

/// Whether a masked vector load of the operand's elements is one instruction.
bool PackEmitter::maskedLoads() {
  return g_.isa.avx512 || (g_.isa.f32Lanes >= 8 && g_.storageType()->getPrimitiveSizeInBits() >= 32);
}

PackEmitter::PanelRows PackEmitter::panelRows(llvm::Value* p, bool clamp) {
  PanelRows pr;
  llvm::Value* panelFirst = b_.CreateMul(p, g_.constant(ix_, width_));
  std::vector<llvm::Value*> firstParts;  // row 0's, for the missing rows of a clamped panel
  pr.contiguous = b_.getTrue();
  for (int first = 0; first < width_; first += g_.plan.lanes) {
    const int count = std::min(g_.plan.lanes, width_ - first);
    llvm::Value* local = b_.CreateAdd(g_.splat(count, panelFirst), lanes(first, count));
    PanelRows::Chunk c{first, count, groupParts(rowAt_, rowDims_, b_.CreateAdd(g_.splat(count, r0_), local)),
                       b_.CreateICmpSLT(local, g_.splat(count, rows_))};
    if (firstParts.empty())
      for (llvm::Value* part : c.parts) firstParts.push_back(b_.CreateExtractElement(part, uint64_t{0}));
    llvm::Value* expected = b_.CreateAdd(g_.splat(count, firstParts[0]), lanes(first, count));
    pr.contiguous = b_.CreateAnd(pr.contiguous, b_.CreateAndReduce(b_.CreateICmpEQ(c.parts[0], expected)));
    if (clamp)
      for (size_t i = 0; i < c.parts.size(); ++i)
        c.parts[i] = b_.CreateSelect(c.valid, c.parts[i], g_.splat(count, firstParts[i]));
    pr.chunks.push_back(std::move(c));
  }
  return pr;
}

/// Per functional: its batch, k and constant parts at k (absolute, < K).
std::vector<llvm::Value*> PackEmitter::offsetsAt(llvm::Value* k) {
  const std::vector<const Affine*> fs = functionals(op_);
  std::vector<llvm::Value*> offsets;
  if (kTable_) {
    for (size_t i = 0; i < fs.size(); ++i) offsets.push_back(b_.CreateAdd(batchParts_[i], kTableEntry(k, i)));
  } else {
    const std::vector<llvm::Value*> kParts = groupParts(kAt_, g_.form.kDims, k);
    for (size_t i = 0; i < fs.size(); ++i)
      offsets.push_back(b_.CreateAdd(b_.CreateAdd(batchParts_[i], kParts[i]), g_.constant(ix_, fs[i]->constant)));
  }
  return offsets;
}

/// Per chunk of the panel's rows, at the k whose `offsets` these are: the operand index of each
/// lane and whether the lane is valid (its row exists, its bounds and quotients hold).
std::vector<PackEmitter::Row> PackEmitter::rowsAt(const PanelRows& pr, const std::vector<llvm::Value*>& offsets) {
  std::vector<Row> rows;
  for (const PanelRows::Chunk& c : pr.chunks) {
    auto value = [&](size_t i) { return b_.CreateAdd(c.parts[i], g_.splat(c.count, offsets[i])); };
    auto all = [&](int64_t v) { return g_.splat(c.count, g_.constant(ix_, v)); };
    Row r{value(0), c.valid};
    size_t i = 1;
    for (const auto& bound : op_.map.bounds)
      r.valid = b_.CreateAnd(r.valid, b_.CreateICmpULT(value(i++), all(bound.limit)));
    for (const auto& q : op_.quotients) {
      llvm::Value* v = value(i++);
      r.valid = b_.CreateAnd(r.valid, b_.CreateICmpEQ(b_.CreateSRem(v, all(q.divisor)), all(0)));
      r.valid = b_.CreateAnd(r.valid, b_.CreateICmpULT(v, all(q.limit * q.divisor)));
      r.index = b_.CreateAdd(r.index, b_.CreateMul(b_.CreateUDiv(v, all(q.divisor)), all(q.coeff)));
    }
    rows.push_back(r);
  }
  return rows;
}

/// Panel row kk (< kc), per chunk in the accumulator type: every element whose row, bounds and
/// quotients are valid, 0 elsewhere. A row that is contiguous in memory is loaded with (masked)
/// vector loads; otherwise lane by lane.
std::vector<llvm::Value*> PackEmitter::rowGeneral(const PanelRows& pr, llvm::Value* kk) {
  const std::vector<Row> rows = rowsAt(pr, offsetsAt(b_.CreateAdd(k0_, kk)));
  llvm::Type* store = g_.storageType();
  // Lane by lane: each valid lane's element; element 0, then zeroed, for the others. On AVX-512,
  // 32- and 64-bit elements are one masked gather per chunk instead.
  const bool gathers = g_.isa.avx512 && store->getPrimitiveSizeInBits() >= 32;
  auto byLanes = [&] {
    std::vector<llvm::Value*> values;
    for (size_t q = 0; q < rows.size(); ++q) {
      const PanelRows::Chunk& c = pr.chunks[q];
      if (gathers) {
        // Lanes outside the operand are masked off: no `inbounds`.
        llvm::Value* at = b_.CreateGEP(store, base_, rows[q].index);
        llvm::Type* type = g_.withLanes(store, c.count);
        values.push_back(g_.toAcc(
            b_.CreateMaskedGather(type, at, storeAlign(), rows[q].valid, llvm::Constant::getNullValue(type)), c.count));
        continue;
      }
      llvm::Value* safe =
          b_.CreateSelect(rows[q].valid, rows[q].index, llvm::Constant::getNullValue(rows[q].index->getType()));
      llvm::Value* v = llvm::PoisonValue::get(g_.withLanes(store, c.count));
      for (int r = 0; r < c.count; ++r) {
        llvm::Value* at = toI64(b_.CreateExtractElement(safe, static_cast<uint64_t>(r)));
        v = b_.CreateInsertElement(v, b_.CreateAlignedLoad(store, b_.CreateInBoundsGEP(store, base_, at), storeAlign()),
                                   static_cast<uint64_t>(r));
      }
      values.push_back(g_.toAcc(b_.CreateSelect(rows[q].valid, v, llvm::Constant::getNullValue(v->getType())), c.count));
    }
    return values;
  };
  if (!op_.quotients.empty()) return byLanes();
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* vectors = llvm::BasicBlock::Create(g_.ctx, "row.vector", f);
  auto* lanesBlock = llvm::BasicBlock::Create(g_.ctx, "row.lanes", f);
  auto* done = llvm::BasicBlock::Create(g_.ctx, "row.done", f);
  const bool masked = maskedLoads();
  llvm::Value* useVectors = pr.contiguous;
  if (!masked)
    for (const Row& r : rows) useVectors = b_.CreateAnd(useVectors, b_.CreateAndReduce(r.valid));
  b_.CreateCondBr(useVectors, vectors, lanesBlock);
  b_.SetInsertPoint(vectors);
  // Lane 0 may lie in the padding, so the address is formed without `inbounds`.
  llvm::Value* first = toI64(b_.CreateExtractElement(rows[0].index, uint64_t{0}));
  std::vector<llvm::Value*> loaded;
  for (size_t q = 0; q < rows.size(); ++q) {
    const PanelRows::Chunk& c = pr.chunks[q];
    llvm::Type* type = g_.withLanes(store, c.count);
    llvm::Value* at = b_.CreateGEP(store, base_, b_.CreateAdd(first, g_.i64(c.first)));
    loaded.push_back(g_.toAcc(masked ? static_cast<llvm::Value*>(b_.CreateMaskedLoad(
                                           type, at, storeAlign(), rows[q].valid, llvm::Constant::getNullValue(type)))
                                     : b_.CreateAlignedLoad(type, at, storeAlign()),
                              c.count));
  }
  llvm::BasicBlock* fromVectors = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(lanesBlock);
  const std::vector<llvm::Value*> gathered = byLanes();
  llvm::BasicBlock* fromLanes = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  std::vector<llvm::Value*> values;
  for (size_t q = 0; q < loaded.size(); ++q) {
    llvm::PHINode* v = b_.CreatePHI(loaded[q]->getType(), 2, "row");
    v->addIncoming(loaded[q], fromVectors);
    v->addIncoming(gathered[q], fromLanes);
    values.push_back(v);
  }
  return values;
}

void PackEmitter::scatterAmx(const PanelRows& pr, llvm::Value* at, const std::vector<llvm::Value*>& values) {
  for (size_t q = 0; q < values.size(); ++q) {
    const PanelRows::Chunk& c = pr.chunks[q];
    llvm::Type* bits = g_.withLanes(b_.getInt32Ty(), c.count);
    // Exact bf16 values in f32: their high halves.
    llvm::Value* bf16 = b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(values[q], bits), g_.constant(bits, 16)),
                                       g_.withLanes(b_.getInt16Ty(), c.count));
    for (int i = 0; i < c.count; ++i)
      b_.CreateAlignedStore(b_.CreateExtractElement(bf16, static_cast<uint64_t>(i)),
                            b_.CreateConstInBoundsGEP1_64(b_.getInt16Ty(), at, static_cast<uint64_t>((c.first + i) * kAmxK)),
                            llvm::Align(2));
  }
}

/// k pairs from two panel rows of exact bf16 values in f32 (even: k 2j, odd: k 2j + 1): per lane,
/// the even k's bf16 in the low half of a 32-bit element, the odd one's in the high half.
llvm::Value* PackEmitter::pairOf(llvm::Value* even, llvm::Value* odd) {
  const int n = static_cast<int>(llvm::cast<llvm::FixedVectorType>(even->getType())->getNumElements());
  llvm::Type* bits = g_.withLanes(b_.getInt32Ty(), n);
  llvm::Value* low = b_.CreateLShr(b_.CreateBitCast(even, bits), g_.constant(bits, 16));
  llvm::Value* high = b_.CreateAnd(b_.CreateBitCast(odd, bits), g_.constant(bits, -65536));  // 0xFFFF0000
  return b_.CreateBitCast(b_.CreateOr(high, low), even->getType());
}

void PackEmitter::storeRows(const PanelRows& pr, llvm::Value* from, llvm::Value* to, const RowValues& row,
                            const DstRow& dstRow) {
  auto put = [&](llvm::Value* at, const std::vector<llvm::Value*>& values) {
    if (amx_) return scatterAmx(pr, at, values);
    for (size_t q = 0; q < values.size(); ++q) putChunk(pr.chunks[q], at, values[q]);
  };
  if (!pairs_) {
    g_.loop(from, to, 1, "kk", [&](llvm::Value* kk) { put(dstRow(kk), row(toIx(kk))); });
    return;
  }
  auto pairs = [&](const std::vector<llvm::Value*>& even, const std::vector<llvm::Value*>& odd) {
    std::vector<llvm::Value*> values;
    for (size_t q = 0; q < even.size(); ++q) values.push_back(pairOf(even[q], odd[q]));
    return values;
  };
  llvm::Value* one = g_.i64(1);
  g_.loop(b_.CreateLShr(from, one), b_.CreateLShr(to, one), 1, "pair", [&](llvm::Value* jj) {
    llvm::Value* k = b_.CreateShl(jj, one);
    const std::vector<llvm::Value*> even = row(toIx(k));
    put(dstRow(jj), pairs(even, row(toIx(b_.CreateAdd(k, one)))));
  });
  // An odd last row pairs with zeros (the K padding's first row).
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* tail = llvm::BasicBlock::Create(g_.ctx, "pair.tail", f);
  auto* done = llvm::BasicBlock::Create(g_.ctx, "pair.done", f);
  b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSLT(from, to), b_.CreateICmpNE(b_.CreateAnd(to, one), g_.i64(0))), tail,
                  done);
  b_.SetInsertPoint(tail);
  llvm::Value* last = b_.CreateSub(to, one);
  const std::vector<llvm::Value*> even = row(toIx(last));
  std::vector<llvm::Value*> zeros;
  for (llvm::Value* v : even) zeros.push_back(llvm::Constant::getNullValue(v->getType()));
  put(dstRow(b_.CreateLShr(last, one)), pairs(even, zeros));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

/// Stores chunk c's elements `v` (in the accumulator type) into the panel row at dstRow.
void PackEmitter::putChunk(const PanelRows::Chunk& c, llvm::Value* dstRow, llvm::Value* v) {
  b_.CreateAlignedStore(v,
                        b_.CreateConstInBoundsGEP1_64(g_.elt, dstRow, static_cast<uint64_t>(c.first)), g_.eltAlign());
}

/// How many consecutive k the bounds take to repeat: the product of the innermost k dimensions
/// any bound depends on (a 3×3 window's k is channel, kh, kw and its bounds read kh and kw: 9).
int64_t PackEmitter::maskPeriod() const {
  const std::vector<int64_t>& dims = g_.form.kDims;
  size_t from = dims.size();
  for (const auto& bound : op_.map.bounds)
    for (size_t d = 0; d < from; ++d)
      if (bound.value.coeff[kAt_ + d] != 0) from = d;
  int64_t period = 1;
  for (size_t d = from; d < dims.size(); ++d) period *= dims[d];
  return period;
}

/// Panel rows [0, kc) of a panel whose rows are contiguous in memory and whose bounds repeat every
/// period_ k (maskPeriod): the lane masks of the period's phases are computed once per panel, then
/// each row is its index from the k table and one masked load per chunk with its phase's masks —
/// a 3×3 window's row costs a few instructions instead of evaluating its bounds. Stored by storeRows.
void PackEmitter::packPeriodic(const PanelRows& pr, llvm::Value* kc, const DstRow& dstRow) {
  const int l = g_.plan.lanes;
  llvm::Type* slot = g_.withLanes(ix_, l);
  auto slotAt = [&](llvm::Value* phase, size_t chunk) {
    llvm::Value* at = b_.CreateAdd(b_.CreateMul(toI64(phase), g_.i64(static_cast<int64_t>(pr.chunks.size()))),
                                   g_.i64(static_cast<int64_t>(chunk)));
    return b_.CreateInBoundsGEP(slot, masks_, at);
  };
  // The phase of k is k mod period_, and k < period_ <= K are rows of the k table.
  g_.loop(g_.i64(0), g_.i64(period_), 1, "phase", [&](llvm::Value* phase) {
    const std::vector<Row> rows = rowsAt(pr, offsetsAt(toIx(phase)));
    for (size_t q = 0; q < rows.size(); ++q)
      b_.CreateAlignedStore(b_.CreateSExt(rows[q].valid, g_.withLanes(ix_, pr.chunks[q].count)), slotAt(phase, q),
                            llvm::Align(4));
  });
  llvm::Type* store = g_.storageType();
  llvm::Value* rowFirst = b_.CreateAdd(b_.CreateExtractElement(pr.chunks[0].parts[0], uint64_t{0}), batchParts_[0]);
  storeRows(pr, g_.i64(0), kc, [&](llvm::Value* kk) {
    llvm::Value* k = b_.CreateAdd(k0_, kk);
    llvm::Value* phase = b_.CreateURem(k, g_.constant(ix_, period_));
    // Lane 0 may lie in the padding, so the address is formed without `inbounds`.
    llvm::Value* first = toI64(b_.CreateAdd(rowFirst, kTableEntry(k, 0)));
    std::vector<llvm::Value*> values;
    for (size_t q = 0; q < pr.chunks.size(); ++q) {
      const PanelRows::Chunk& c = pr.chunks[q];
      llvm::Type* type = g_.withLanes(store, c.count);
      llvm::Value* mask = b_.CreateAlignedLoad(g_.withLanes(ix_, c.count), slotAt(phase, q), llvm::Align(4));
      llvm::Value* valid = b_.CreateICmpSLT(mask, g_.splat(c.count, g_.constant(ix_, 0)));
      llvm::Value* at = b_.CreateGEP(store, base_, b_.CreateAdd(first, g_.i64(c.first)));
      values.push_back(g_.toAcc(b_.CreateMaskedLoad(type, at, storeAlign(), valid, llvm::Constant::getNullValue(type)),
                                c.count));
    }
    return values;
  }, dstRow);
}

/// The first `panels` (full) panels when rows are contiguous: per k (per k pair in pairs mode),
/// one vector load of `width` elements per panel (two). The panels are the inner loop, so memory
/// is read row by row: a row of a transposed operand is often a page of its own.
void PackEmitter::packContiguousRows(llvm::Value* panels, llvm::Value* kcPad, const PanelRow& dstRow) {
  llvm::Type* store = g_.storageType();
  llvm::Value* first = b_.CreateAdd(b_.CreateAdd(batchParts_[0], r0_), g_.constant(ix_, op_.map.index.constant));
  llvm::Value* kc = toI64(kc_);
  // Panel p's row kk (< kc), in the accumulator type.
  auto rowOf = [&](llvm::Value* p, llvm::Value* kk) {
    llvm::Value* row = b_.CreateAdd(first, groupPart(op_.map.index, kAt_, g_.form.kDims, b_.CreateAdd(k0_, toIx(kk))));
    llvm::Value* at = b_.CreateInBoundsGEP(store, b_.CreateInBoundsGEP(store, base_, toI64(row)), b_.CreateMul(p, g_.i64(width_)));
    return g_.toAcc(b_.CreateAlignedLoad(g_.withLanes(store, width_), at, storeAlign()), width_);
  };
  // Pairs mode: pair rows of rows 2jj and 2jj + 1, an odd kc's last row paired with zeros.
  llvm::Value* one = g_.i64(1);
  llvm::Value* rows = pairs_ ? b_.CreateLShr(b_.CreateAdd(kc, one), one) : kc;
  g_.loop(g_.i64(0), rows, 1, "kk", [&](llvm::Value* kk) {
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      if (!pairs_) {
        b_.CreateAlignedStore(rowOf(p, kk), dstRow(p, kk), g_.eltAlign());
        return;
      }
      llvm::Value* k = b_.CreateShl(kk, one);
      llvm::Value* odd = b_.CreateAdd(k, one);
      // Past an odd kc the odd row is zero; it is read at the even row's place, which exists.
      llvm::Value* inside = b_.CreateICmpSLT(odd, kc);
      llvm::Value* oddRow = b_.CreateSelect(inside, rowOf(p, b_.CreateSelect(inside, odd, k)),
                                            llvm::Constant::getNullValue(g_.withLanes(g_.elt, width_)));
      b_.CreateAlignedStore(pairOf(rowOf(p, k), oddRow), dstRow(p, kk), g_.eltAlign());
    });
  });
  g_.loop(rows, pairs_ ? b_.CreateLShr(kcPad, one) : kcPad, 1, "kk.pad", [&](llvm::Value* kk) {
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.withLanes(g_.elt, width_)), dstRow(p, kk), g_.eltAlign());
    });
  });
}

/// `lanes` k steps of a full panel whose k is contiguous there (kPart: the index's k part at the
/// first): one vector load per row, transposed `lanes` rows at a time into `lanes` panel rows.
/// With bounds, `k` is the first k step: each row's load is masked by the bounds, evaluated on
/// the `lanes` k steps from the k table. With `second`, the k steps are two stretches: each row
/// is two masked loads. In pairs mode the rows pair up; with amx_, each row's k are stored as
/// they are into its tile row, untransposed.
void PackEmitter::packTransposed(const PanelRows& pr, llvm::Value* kPart, llvm::Value* dstRow, llvm::Value* k,
                                 const SecondRun* second) {
  const int l = g_.plan.lanes;
  llvm::Type* store = g_.storageType();
  llvm::Value* at = b_.CreateAdd(batchParts_[0], kPart);
  llvm::Value* at2 = second ? b_.CreateAdd(batchParts_[0], second->kPart) : nullptr;
  std::vector<llvm::Value*> boundK;  // per bound: its batch and k parts on the l k steps
  if (k)
    for (size_t i = 0; i < op_.map.bounds.size(); ++i)
      boundK.push_back(b_.CreateAdd(g_.splat(l, batchParts_[i + 1]), kTableEntry(k, i + 1, l)));
  std::vector<std::vector<llvm::Value*>> blocks;  // per block of l rows: its l transposed rows
  for (const PanelRows::Chunk& c : pr.chunks) {
    std::vector<llvm::Value*> rows;
    for (int r = 0; r < l; ++r) {
      if (r >= c.count) {
        rows.push_back(llvm::PoisonValue::get(g_.vec));
        continue;
      }
      llvm::Value* rowPart = b_.CreateExtractElement(c.parts[0], static_cast<uint64_t>(r));
      llvm::Value* row = b_.CreateAdd(at, rowPart);
      llvm::Type* type = g_.withLanes(store, l);
      llvm::Value* v;
      if (k || second) {
        llvm::Value* valid = nullptr;
        for (size_t i = 0; i < boundK.size(); ++i) {
          llvm::Value* boundPart = b_.CreateExtractElement(c.parts[i + 1], static_cast<uint64_t>(r));
          llvm::Value* inside = b_.CreateICmpULT(b_.CreateAdd(boundK[i], g_.splat(l, boundPart)),
                                                 g_.splat(l, g_.constant(ix_, op_.map.bounds[i].limit)));
          valid = valid ? b_.CreateAnd(valid, inside) : inside;
        }
        // Lanes in the padding may lie outside the buffer: no `inbounds`.
        auto load = [&](llvm::Value* from, llvm::Value* lanes) {
          llvm::Value* mask = valid && lanes ? b_.CreateAnd(valid, lanes) : valid ? valid : lanes;
          return b_.CreateMaskedLoad(type, b_.CreateGEP(store, base_, toI64(from)), storeAlign(), mask,
                                     llvm::Constant::getNullValue(type));
        };
        v = second ? b_.CreateSelect(second->firstLanes, load(row, second->firstLanes),
                                     load(b_.CreateAdd(at2, rowPart), b_.CreateNot(second->firstLanes)))
                   : load(row, nullptr);
      } else {
        v = b_.CreateAlignedLoad(type, b_.CreateInBoundsGEP(store, base_, toI64(row)), storeAlign());
      }
      if (amx_) {  // the row's l k as they are, into its tile row (dstRow: row 0's, kAmxK apart)
        b_.CreateAlignedStore(v, b_.CreateConstInBoundsGEP1_64(store, dstRow, static_cast<uint64_t>((c.first + r) * kAmxK)),
                              storeAlign());
        continue;
      }
      rows.push_back(g_.toAcc(v, l));
    }
    if (!amx_) blocks.push_back(transposeSquare(b_, std::move(rows)));
  }
  if (amx_) return;
  // A panel narrower than a vector (MR = 6 of 8 lanes) stores whole vectors in k order, each
  // overwriting the spare lanes of the one before; the last one's spill into the next panel row,
  // written later, or the panel's slack (panelElements).
  // In pairs mode, the k steps' rows pair up into l / 2 pair rows.
  const bool overlap = width_ < l;
  auto rowAt = [&](int kk) {
    llvm::Value* row = blocks[0][static_cast<size_t>(kk)];
    for (size_t q = 1; q < blocks.size(); ++q) row = concatVectors(b_, row, blocks[q][static_cast<size_t>(kk)]);
    return overlap ? row : b_.CreateShuffleVector(row, iota(0, width_));  // without the lanes of missing rows
  };
  const int step = pairs_ ? 2 : 1;
  for (int kk = 0; kk < l; kk += step) {
    llvm::Value* row = pairs_ ? pairOf(rowAt(kk), rowAt(kk + 1)) : rowAt(kk);
    b_.CreateAlignedStore(row, b_.CreateConstInBoundsGEP1_64(g_.elt, dstRow, static_cast<uint64_t>(kk / step * width_)),
                          g_.eltAlign());
  }
}

}  // namespace kiln::cpu::gemm::pack
