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
//   - k contiguous in runs, no quotients (the operands of a weight gradient, whose k is image,
//     row, column): as the previous way for every `lanes` k steps that are one stretch of memory
//     (inside one run, or across runs that meet: a padded 3×3 gradient's rows of 14) — with
//     bounds (the input's padding), each row's load masked by the bounds on those k steps — the
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
#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace kiln::cpu::gemm {
namespace {

using kernels::Affine;
using kernels::GemmOperand;

/// The affine functionals of an operand: its index, its bounds, its quotient values.
std::vector<const Affine*> functionals(const GemmOperand& op) {
  std::vector<const Affine*> fs{&op.map.index};
  for (const auto& bound : op.map.bounds) fs.push_back(&bound.value);
  for (const auto& q : op.quotients) fs.push_back(&q.value);
  return fs;
}

std::vector<int> iota(int first, int count) {
  std::vector<int> v(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

class PackEmitter {
 public:
  PackEmitter(GemmBuilder& g, bool a)
      : g_(g), b_(g.b), op_(a ? g.form.a : g.form.b), label_(a ? "a" : "b"), width_(a ? g.plan.mr : g.plan.nr),
        rowDims_(a ? g.form.mDims : g.form.nDims),
        rowAt_(g.form.batchDims.size() + (a ? 0 : g.form.kDims.size())),
        kAt_(g.form.batchDims.size() + (a ? g.form.mDims.size() : 0)) {}

  llvm::Function* emit();

 private:
  /// One panel's rows in chunks of at most `lanes` rows (vectors the target holds in one
  /// register, so their masks stay native): the row part of every functional and which rows
  /// exist; and whether the index runs contiguously along all rows of the panel (a panel row is
  /// then one stretch of memory, whatever the bounds say).
  struct PanelRows {
    struct Chunk {
      int first, count;
      std::vector<llvm::Value*> parts;
      llvm::Value* valid;
    };
    std::vector<Chunk> chunks;
    llvm::Value* contiguous = nullptr;
  };

  bool fitsInt32() const;
  void buildKTable();
  llvm::Value* groupPart(const Affine& a, size_t at, const std::vector<int64_t>& dims, llvm::Value* flat);
  std::vector<llvm::Value*> groupParts(size_t at, const std::vector<int64_t>& dims, llvm::Value* flat);
  llvm::Value* lanes(int first, int count);
  bool maskedLoads();
  PanelRows panelRows(llvm::Value* p, bool clamp = false);
  struct Row {
    llvm::Value *index, *valid;
  };
  std::vector<llvm::Value*> offsetsAt(llvm::Value* k);
  std::vector<Row> rowsAt(const PanelRows& pr, const std::vector<llvm::Value*>& offsets);
  void packRowGeneral(const PanelRows& pr, llvm::Value* kk, llvm::Value* dstRow);
  void putChunk(const PanelRows::Chunk& c, llvm::Value* dstRow, llvm::Value* v);
  int64_t maskPeriod() const;
  void packPeriodic(const PanelRows& pr, llvm::Value* kc, const std::function<llvm::Value*(llvm::Value*)>& dstRow);
  void packContiguousRows(llvm::Value* panels, llvm::Value* kcPad,
                          const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& dstRow);
  void packTransposed(const PanelRows& pr, llvm::Value* kPart, llvm::Value* dstRow, llvm::Value* k = nullptr);
  llvm::Value* kTableEntry(llvm::Value* k, size_t functional, int lanes = 1);
  llvm::Value* kTableSpans(llvm::Value* k, int lanes);
  void prefetchRegion();
  llvm::Value* toIx(llvm::Value* v) { return b_.CreateTrunc(v, ix_); }
  llvm::Value* toI64(llvm::Value* v) { return b_.CreateSExt(v, b_.getInt64Ty()); }
  llvm::Align storeAlign() { return g_.storeAlign(); }

  GemmBuilder& g_;
  llvm::IRBuilder<>& b_;
  const GemmOperand& op_;
  const std::string label_;
  const int width_;                       // MR or NR
  const std::vector<int64_t>& rowDims_;   // the m or n coordinates
  const size_t rowAt_, kAt_;              // where rows and k start in the map's coordinate vector
  // Set up by emit(), in the index type.
  llvm::Type* ix_ = nullptr;
  llvm::Value* base_ = nullptr;           // the operand's buffer
  std::vector<llvm::Value*> batchParts_;  // per functional, of the item's batch coordinates
  // When k needs divisions to unravel: every functional's k part plus its constant per k, laid
  // out [functional][k] with kRows_ = K (null: computed in the loop). When K rows would not fit,
  // the table holds the innermost k dimensions only (kRows_ of them) and every functional is
  // affine in the outer ones: its entry at k is table[k mod kRows_] + kOuter_ · (k / kRows_).
  llvm::GlobalVariable* kTable_ = nullptr;
  int64_t kRows_ = 0;
  std::vector<int64_t> kOuter_;  // per functional; empty when the table holds all of K
  llvm::Value *r0_ = nullptr, *rows_ = nullptr, *k0_ = nullptr, *kc_ = nullptr;
  // The periodic way's masks: [phase][chunk] vectors of `lanes` index-type lanes (null: not used).
  int64_t period_ = 0;
  llvm::AllocaInst* masks_ = nullptr;
};

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

llvm::Function* PackEmitter::emit() {
  llvm::Type* i64t = b_.getInt64Ty();
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Function* f = g_.newFunction("pack_" + label_, packFunctionType(g_.ctx));
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
  // Rows kk < kc from the operand, the K padding up to kcPad zeros (a separate loop, so that the
  // operand rows need no k test in their masks).
  auto packGeneral = [&](const PanelRows& pr, llvm::Value* p, llvm::Value* from) {
    g_.loop(from, kc, 1, "kk", [&](llvm::Value* kk) { packRowGeneral(pr, toIx(kk), dstRow(p, kk)); });
    llvm::Value* padFrom = b_.CreateSelect(b_.CreateICmpSGT(from, kc), from, kc);
    g_.loop(padFrom, kcPad, 1, "kk.pad", [&](llvm::Value* kk) {
      b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.withLanes(g_.elt, w)), dstRow(p, kk), g_.eltAlign());
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
  if (plain && groupStride(op_.map.index, rowAt_, rowDims_) == 1) {
    packContiguousRows(fullPanels, kcPad, dstRow);
    firstGeneral = fullPanels;
  } else if (plain && groupStride(op_.map.index, kAt_, g_.form.kDims) == 1) {
    panelsByLanes([&](const PanelRows& pr, llvm::Value* p, llvm::Value* kk) {
      packTransposed(pr, b_.CreateAdd(b_.CreateAdd(k0_, toIx(kk)), g_.constant(ix_, op_.map.index.constant)),
                     dstRow(p, kk));
    });
  } else if (op_.quotients.empty() && (plain || maskedLoads()) && kTable_ &&
             op_.map.index.coeff[kAt_ + g_.form.kDims.size() - 1] == 1) {
    // k contiguous in runs (a weight gradient's k = image, row, column): `lanes` k steps whose
    // table entries are first, first + 1, … are one stretch of memory per row, packed as above —
    // whether they lie in one run of the innermost k dimension or in several that meet (rows of
    // 14 columns in a 3×3 stride-1 padding-1 gradient make one run of 196 per image); the others,
    // and the K tail, go the general way.
    panelsByLanes([&](const PanelRows& pr, llvm::Value* p, llvm::Value* kk) {
      llvm::Value* k = b_.CreateAdd(k0_, toIx(kk));
      llvm::Value* entries = kTableEntry(k, 0, l);  // the table's slack keeps the load inside it
      llvm::Value* first = b_.CreateExtractElement(entries, uint64_t{0});
      llvm::Value* stretch = b_.CreateAndReduce(b_.CreateICmpEQ(entries, b_.CreateAdd(g_.splat(l, first), lanes(0, l))));
      llvm::Value* run = b_.CreateAnd(kTableSpans(k, l), stretch);
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      auto* vectors = llvm::BasicBlock::Create(g_.ctx, "run.vector", fn);
      auto* rowsBlock = llvm::BasicBlock::Create(g_.ctx, "run.rows", fn);
      auto* done = llvm::BasicBlock::Create(g_.ctx, "run.done", fn);
      b_.CreateCondBr(run, vectors, rowsBlock);
      b_.SetInsertPoint(vectors);
      packTransposed(pr, first, dstRow(p, kk), plain ? nullptr : k);
      b_.CreateBr(done);
      b_.SetInsertPoint(rowsBlock);
      // A loop, not `lanes` copies of the general row: these steps are rare (a run's end) and
      // the copies were a large part of the kernel's compile time.
      g_.loop(kk, b_.CreateAdd(kk, g_.i64(l)), 1, "run.row",
              [&](llvm::Value* at) { packRowGeneral(pr, toIx(at), dstRow(p, at)); });
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
    packPeriodic(pr, kc, [&](llvm::Value* kk) { return dstRow(p, kk); });
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

/// Panel row kk (< kc): every element whose row, bounds and quotients are valid, 0 elsewhere. A row
/// that is contiguous in memory is loaded with (masked) vector loads; otherwise lane by lane.
void PackEmitter::packRowGeneral(const PanelRows& pr, llvm::Value* kk, llvm::Value* dstRow) {
  const std::vector<Row> rows = rowsAt(pr, offsetsAt(b_.CreateAdd(k0_, kk)));
  llvm::Type* store = g_.storageType();
  auto put = [&](const PanelRows::Chunk& c, llvm::Value* v) { putChunk(c, dstRow, v); };
  // Lane by lane: each valid lane's element; element 0, then zeroed, for the others. On AVX-512,
  // 32- and 64-bit elements are one masked gather per chunk instead.
  const bool gathers = g_.isa.avx512 && store->getPrimitiveSizeInBits() >= 32;
  auto byLanes = [&] {
    for (size_t q = 0; q < rows.size(); ++q) {
      const PanelRows::Chunk& c = pr.chunks[q];
      if (gathers) {
        // Lanes outside the operand are masked off: no `inbounds`.
        llvm::Value* at = b_.CreateGEP(store, base_, rows[q].index);
        llvm::Type* type = g_.withLanes(store, c.count);
        put(c, b_.CreateMaskedGather(type, at, storeAlign(), rows[q].valid, llvm::Constant::getNullValue(type)));
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
      put(c, b_.CreateSelect(rows[q].valid, v, llvm::Constant::getNullValue(v->getType())));
    }
  };
  if (!op_.quotients.empty()) {
    byLanes();
    return;
  }
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
  for (size_t q = 0; q < rows.size(); ++q) {
    const PanelRows::Chunk& c = pr.chunks[q];
    llvm::Type* type = g_.withLanes(store, c.count);
    llvm::Value* at = b_.CreateGEP(store, base_, b_.CreateAdd(first, g_.i64(c.first)));
    put(c, masked ? static_cast<llvm::Value*>(
                        b_.CreateMaskedLoad(type, at, storeAlign(), rows[q].valid, llvm::Constant::getNullValue(type)))
                  : b_.CreateAlignedLoad(type, at, storeAlign()));
  }
  b_.CreateBr(done);
  b_.SetInsertPoint(lanesBlock);
  byLanes();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

/// Stores chunk c's loaded elements `v`, in the accumulator type, into the panel row at dstRow.
void PackEmitter::putChunk(const PanelRows::Chunk& c, llvm::Value* dstRow, llvm::Value* v) {
  b_.CreateAlignedStore(g_.toAcc(v, c.count),
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
/// a 3×3 window's row costs a few instructions instead of evaluating its bounds.
void PackEmitter::packPeriodic(const PanelRows& pr, llvm::Value* kc,
                               const std::function<llvm::Value*(llvm::Value*)>& dstRow) {
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
  g_.loop(g_.i64(0), kc, 1, "kk", [&](llvm::Value* kk) {
    llvm::Value* k = b_.CreateAdd(k0_, toIx(kk));
    llvm::Value* phase = b_.CreateURem(k, g_.constant(ix_, period_));
    // Lane 0 may lie in the padding, so the address is formed without `inbounds`.
    llvm::Value* first = toI64(b_.CreateAdd(rowFirst, kTableEntry(k, 0)));
    for (size_t q = 0; q < pr.chunks.size(); ++q) {
      const PanelRows::Chunk& c = pr.chunks[q];
      llvm::Type* type = g_.withLanes(store, c.count);
      llvm::Value* mask = b_.CreateAlignedLoad(g_.withLanes(ix_, c.count), slotAt(phase, q), llvm::Align(4));
      llvm::Value* valid = b_.CreateICmpSLT(mask, g_.splat(c.count, g_.constant(ix_, 0)));
      llvm::Value* at = b_.CreateGEP(store, base_, b_.CreateAdd(first, g_.i64(c.first)));
      putChunk(c, dstRow(kk),
               b_.CreateMaskedLoad(type, at, storeAlign(), valid, llvm::Constant::getNullValue(type)));
    }
  });
}

/// The first `panels` (full) panels when rows are contiguous: per k, one vector load of `width`
/// elements per panel. The panels are the inner loop, so memory is read row by row: a row of a
/// transposed operand is often a page of its own.
void PackEmitter::packContiguousRows(llvm::Value* panels, llvm::Value* kcPad,
                                     const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& dstRow) {
  llvm::Type* store = g_.storageType();
  llvm::Value* first = b_.CreateAdd(b_.CreateAdd(batchParts_[0], r0_), g_.constant(ix_, op_.map.index.constant));
  llvm::Value* kc = toI64(kc_);
  g_.loop(g_.i64(0), kc, 1, "kk", [&](llvm::Value* kk) {
    llvm::Value* row = b_.CreateAdd(first, groupPart(op_.map.index, kAt_, g_.form.kDims, b_.CreateAdd(k0_, toIx(kk))));
    llvm::Value* rowStart = b_.CreateInBoundsGEP(store, base_, toI64(row));
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      llvm::Value* at = b_.CreateInBoundsGEP(store, rowStart, b_.CreateMul(p, g_.i64(width_)));
      llvm::Value* v = b_.CreateAlignedLoad(g_.withLanes(store, width_), at, storeAlign());
      b_.CreateAlignedStore(g_.toAcc(v, width_), dstRow(p, kk), g_.eltAlign());
    });
  });
  g_.loop(kc, kcPad, 1, "kk.pad", [&](llvm::Value* kk) {
    g_.loop(g_.i64(0), panels, 1, "panel", [&](llvm::Value* p) {
      b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.withLanes(g_.elt, width_)), dstRow(p, kk), g_.eltAlign());
    });
  });
}

/// `lanes` k steps of a full panel whose k is contiguous there (kPart: the index's k part at the
/// first): one vector load per row, transposed `lanes` rows at a time into `lanes` panel rows.
/// With bounds, `k` is the first k step: each row's load is masked by the bounds, evaluated on
/// the `lanes` k steps from the k table.
void PackEmitter::packTransposed(const PanelRows& pr, llvm::Value* kPart, llvm::Value* dstRow, llvm::Value* k) {
  const int l = g_.plan.lanes;
  llvm::Type* store = g_.storageType();
  llvm::Value* at = b_.CreateAdd(batchParts_[0], kPart);
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
      llvm::Value* row = b_.CreateAdd(at, b_.CreateExtractElement(c.parts[0], static_cast<uint64_t>(r)));
      llvm::Type* type = g_.withLanes(store, l);
      llvm::Value* v;
      if (k) {
        llvm::Value* valid = nullptr;
        for (size_t i = 0; i < boundK.size(); ++i) {
          llvm::Value* rowPart = b_.CreateExtractElement(c.parts[i + 1], static_cast<uint64_t>(r));
          llvm::Value* inside = b_.CreateICmpULT(b_.CreateAdd(boundK[i], g_.splat(l, rowPart)),
                                                 g_.splat(l, g_.constant(ix_, op_.map.bounds[i].limit)));
          valid = valid ? b_.CreateAnd(valid, inside) : inside;
        }
        // Lanes in the padding may lie outside the buffer: no `inbounds`.
        v = b_.CreateMaskedLoad(type, b_.CreateGEP(store, base_, toI64(row)), storeAlign(), valid,
                                llvm::Constant::getNullValue(type));
      } else {
        v = b_.CreateAlignedLoad(type, b_.CreateInBoundsGEP(store, base_, toI64(row)), storeAlign());
      }
      rows.push_back(g_.toAcc(v, l));
    }
    blocks.push_back(transposeSquare(b_, std::move(rows)));
  }
  // A panel narrower than a vector (MR = 6 of 8 lanes) stores whole vectors in k order, each
  // overwriting the spare lanes of the one before; the last one's spill into the next panel row,
  // written later, or the panel's slack (panelElements).
  const bool overlap = width_ < l;
  for (int kk = 0; kk < l; ++kk) {
    llvm::Value* row = blocks[0][static_cast<size_t>(kk)];
    for (size_t q = 1; q < blocks.size(); ++q) row = concatVectors(b_, row, blocks[q][static_cast<size_t>(kk)]);
    if (!overlap) row = b_.CreateShuffleVector(row, iota(0, width_));  // without the lanes of missing rows
    b_.CreateAlignedStore(row, b_.CreateConstInBoundsGEP1_64(g_.elt, dstRow, static_cast<uint64_t>(kk * width_)),
                          g_.eltAlign());
  }
}

}  // namespace

llvm::Function* emitPackFunction(GemmBuilder& g, bool a) { return PackEmitter(g, a).emit(); }

}  // namespace kiln::cpu::gemm
