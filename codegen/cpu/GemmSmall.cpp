// The small-M path of the GEMM (GemmEmitter.h): products with at most kSmallM rows (batch-1 to
// batch-8 inference, weight gradients of a narrow last layer), or small enough to stay in L1
// (below), whose operands are both strided (sharedStrides). Packing B costs as much as the whole
// product there (2·M flops per packed element), so B — the weight — is streamed from memory as
// it is, read once, and never packed:
//
//   - dot form, B's k contiguous (a linear layer's weight W[n, k] read as Wᵀ): a group of R rows
//     of W against the M rows of A, R·M vector accumulators over k, summed across lanes at the
//     end; the K tail with masked loads;
//   - axpy form, B's n contiguous (row k of B at k·ldb): per k, V vectors of B's row against A's
//     M values broadcast, M·V vector accumulators over n; the N tail one vector at a time, the
//     last, partial one masked.
//
// A is read in place when it is stored in the accumulator type and either its k is contiguous or
// the form is axpy (which reads A one element at a time: a transposed A costs the same); it is
// otherwise converted once per batch and thread into zero-padded rows of kPad = K rounded up to
// the vector lanes. Up to 8 rows go in groups of at most 4 (5 to 8 rows: two groups), with R = V
// = 8, 4, 3, 2 for groups of 1, 2, 3, 4 rows: at most 9 accumulators plus the operand vectors stay
// in AVX2's 16 registers. AVX-512's 32 take up to 8 rows in one group (R = V = 2, 16
// accumulators), so B is streamed once, not twice (`kiln_gemm_tune --threads 1`, the Emerald Rapids
// VM, three interleaved pairs, median GFLOP/s: 8×784·784×128 85, 84, 80 → 105, 104, 101; its
// x·Wᵀ form best 78, 90, 116 → 94, 110, 138, medians within the noise). The axpy loop does two k
// per iteration with its operand pointers carried (no index arithmetic). Each element's sum runs in the same order whichever group or block it
// falls in, so results do not depend on the blocking or the thread count.
//
// The threshold is the row count, not a model: up to kSmallM rows the packed path computes at
// most 8 of its 6-row micro-tiles' rows per panel pair and spends more on packing B than on the
// product; from there on, streaming B once per row group loses to packing it once — unless all of
// B stays in L1 (at most 32 KiB, at least 8 columns): then each group re-reads B from
// L1, and the product packs nothing or only B. These products run in the axpy form in groups of 6
// rows (6 × 2 vector accumulators, as the micro-kernel), A read in place, and a B whose k is
// contiguous (x·Wᵀ, the forward product of a layer) converted first into one panel of K rows as
// wide as the block, by the packed path's strided packing (smallConvertsB). On the development
// machine (AVX2, one thread, `kiln_bench --filter gemm/…/t1`, 5 interleaved runs) 64×64·64×32
// takes 3.0–3.2 µs; its transposed forms, packed before, 64×64ᵀ·64×32 4.5–4.7 → 3.0–3.1 (3.9 once)
// and 64×32·(64×32)ᵀ 4.2–4.3 → 3.6–3.7 (4.7 twice); the dot form (every element a sum across
// lanes) loses beyond 8 rows, hence the conversion. Down to 8 columns, a narrow B is one masked
// vector per row on AVX-512 (two on AVX2) where the packed path's tile is 32 columns wide:
// mnist_mlp's last layer, 100×128·128×10, 9.7 → 4.9–5.1 µs in its training step (Zen 5, 2
// threads, `kiln bench mnist_mlp --train --optimizer adam --batch 100 --target cpu --profile`).
//
// Work items (GemmDriver.cpp) are batch × blocks of N columns: one block when B is small (under
// kSmallAwakeBytes), else blocks of about kSmallBlockBytes of B (at least two), the pool's
// threads taking contiguous runs of them. Under kSmallParallelBytes the product is split only
// among workers already awake (Blocking::awakeOnly; runtime/ThreadPool.h): waking a parked
// worker costs the caller a system call longer than such a product takes. mnist_mlp's batch-1
// layer (401 KB, one step of 8 vectors wide, so two blocks of half a step) on the Xeon VM with
// AMX (`kiln_bench [--idle-us 1000] --filter infer/mnist_mlp/b1`, six and four pairs interleaved
// with the binary before): back to back 2.68–2.91 → 2.29–2.51 µs; after 1 ms idle 4.10–4.33 →
// 4.26–4.52 (the call through the pool; on one thread alike); split for any worker, as first
// tried, it took 5.1–6.0 µs after idle. Each item writes its block's M rows
// into a tile in its thread's slot and hands the tile to the epilogue — or, for a plain product
// whose block is whole vectors of columns, straight into the result (desc::Direct).
#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>

namespace kiln::cpu::gemm {
namespace {

constexpr int64_t kSmallM = 8;                    // rows of the product at most
constexpr int64_t kSmallParallelBytes = 1 << 20;  // of B (in accumulator elements): from here on, threads
constexpr int64_t kSmallAwakeBytes = 256 << 10;   // from here on, threads already awake (Blocking::awakeOnly)
constexpr int64_t kSmallBlockBytes = 64 << 10;    // of B per work item on threads
constexpr int kMaxGroupRows = 4;                  // up to kSmallM rows (all of them with AVX-512)
// Products that fit L1 also take this path with more rows (groups of kCachedGroupRows, the last
// ending at the last row and overlapping the one before when M is no multiple: its first rows are
// computed twice, to the same sums, and one kernel serves every group): at most kCachedM rows, B
// (f32) in kCachedBBytes, at least kCachedN columns, and under kParallelFlops
// (so that this path and the packed one both run on one thread).
constexpr int64_t kCachedM = 128;
constexpr int64_t kCachedBBytes = 32 << 10;
constexpr int64_t kCachedN = 8;
constexpr int kCachedGroupRows = 6;  // axpy form only: 6 × 2 vector accumulators

/// B rows (dot form) or B vectors (axpy form) per step for a group of `rows` rows of A.
int columnsPerStep(int rows) { return rows == 1 ? 8 : rows == 2 ? 4 : rows == 3 ? 3 : 2; }

/// Whether the kernels read B in the dot form (its k contiguous, not converted into rows).
bool dotForm(const kernels::GemmForm& f) { return !sharedStrides(f, false)->rowsContiguous() && !smallConvertsB(f); }

using Values = std::vector<llvm::Value*>;

/// Emits the small path's shared kernels.
class SmallEmitter {
 public:
  explicit SmallEmitter(GemmBuilder& g)
      : g_(g), b_(g.b), l_(g.plan.lanes), store_(g.storageType()),
        bConverted_(smallConvertsB(g.form) && store_ != g.elt) {}

  llvm::Function* rowsFunction();
  llvm::Function* kernelFunction(int rows);

 private:
  /// for (i = begin; i < end; i += step) values = body(i, values); the values after the loop.
  Values carry(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label, const Values& init,
               const std::function<Values(llvm::Value*, const Values&)>& body);
  /// `cond ? body(values) : values`.
  Values carryIf(llvm::Value* cond, const std::string& label, const Values& init,
                 const std::function<Values(const Values&)>& body);
  llvm::Value* lanesBelow(llvm::Value* first, llvm::Value* end);
  /// A vector load, masked (zero in the lanes off) when `mask` is given.
  llvm::Value* load(llvm::Type* type, llvm::Value* at, llvm::Align align, llvm::Value* mask) {
    if (!mask) return b_.CreateAlignedLoad(type, at, align);
    return b_.CreateMaskedLoad(type, at, align, mask, llvm::Constant::getNullValue(type));
  }

  void emitDot(llvm::Function* f, int rows, int r);
  void emitAxpy(llvm::Function* f, int rows, int v);

  /// B's elements as the kernel loads them: stored, or converted to the accumulator type.
  llvm::Value* loadB(llvm::Value* at, llvm::Value* mask) {
    if (bConverted_) return load(g_.vec, at, g_.eltAlign(), mask);
    return g_.toAcc(load(g_.withLanes(store_, l_), at, g_.storeAlign(), mask), l_);
  }
  llvm::Type* bType() const { return bConverted_ ? g_.elt : store_; }

  GemmBuilder& g_;
  llvm::IRBuilder<>& b_;
  const int l_;
  llvm::Type* store_;
  const bool bConverted_;  // B of f16/bf16 converted by smallConvertsB: its panel holds the accumulator type
};

Values SmallEmitter::carry(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label,
                           const Values& init, const std::function<Values(llvm::Value*, const Values&)>& body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* entry = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(g_.ctx, label, f);
  auto* exit = llvm::BasicBlock::Create(g_.ctx, label + ".end", f);
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), head, exit);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, label + ".i");
  i->addIncoming(begin, entry);
  Values phis;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, entry);
    phis.push_back(phi);
  }
  Values next = body(i, phis);
  llvm::Value* nextI = b_.CreateAdd(i, g_.i64(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  i->addIncoming(nextI, latch);
  for (size_t k = 0; k < phis.size(); ++k) llvm::cast<llvm::PHINode>(phis[k])->addIncoming(next[k], latch);
  b_.CreateCondBr(b_.CreateICmpSLT(nextI, end), head, exit)->setMetadata(llvm::LLVMContext::MD_loop, g_.loopAsWritten());
  b_.SetInsertPoint(exit);
  Values out;
  for (size_t k = 0; k < init.size(); ++k) {
    llvm::PHINode* phi = b_.CreatePHI(init[k]->getType(), 2);
    phi->addIncoming(init[k], entry);
    phi->addIncoming(next[k], latch);
    out.push_back(phi);
  }
  return out;
}

Values SmallEmitter::carryIf(llvm::Value* cond, const std::string& label, const Values& init,
                             const std::function<Values(const Values&)>& body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* entry = b_.GetInsertBlock();
  auto* then = llvm::BasicBlock::Create(g_.ctx, label, f);
  auto* done = llvm::BasicBlock::Create(g_.ctx, label + ".end", f);
  b_.CreateCondBr(cond, then, done);
  b_.SetInsertPoint(then);
  Values next = body(init);
  llvm::BasicBlock* last = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  Values out;
  for (size_t k = 0; k < init.size(); ++k) {
    llvm::PHINode* phi = b_.CreatePHI(init[k]->getType(), 2);
    phi->addIncoming(init[k], entry);
    phi->addIncoming(next[k], last);
    out.push_back(phi);
  }
  return out;
}

/// The lane mask first + lane < end over l_ lanes (compared in i32: end - first is small).
llvm::Value* SmallEmitter::lanesBelow(llvm::Value* first, llvm::Value* end) {
  std::vector<llvm::Constant*> v;
  for (int i : iota(0, l_)) v.push_back(g_.constant(b_.getInt32Ty(), i));
  llvm::Value* n = b_.CreateTrunc(b_.CreateSub(end, first), b_.getInt32Ty());
  return b_.CreateICmpSLT(llvm::ConstantVector::get(v), g_.splat(l_, n));
}

/// void rows(const T* src, i64 rs, i64 ks, i64 rows, i64 k, i64 kPad, ACC* dst):
/// dst[r·kPad + kk] = src[r·rs + kk·ks] converted, zero for k <= kk < kPad.
llvm::Function* SmallEmitter::rowsFunction() {
  llvm::Type* i64t = b_.getInt64Ty();
  llvm::Type* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64t, i64t, i64t, i64t, i64t, ptr}, false);
  return g_.sharedFunction(fmt::format("kiln.gemm.rows.{}", g_.typeTag()), type, [&](llvm::Function* f) {
    llvm::Value *src = f->getArg(0), *rs = f->getArg(1), *ks = f->getArg(2), *k = f->getArg(4), *kPad = f->getArg(5);
    g_.loop(g_.i64(0), f->getArg(3), 1, "r", [&](llvm::Value* r) {
      llvm::Value* from = g_.at(store_, src, b_.CreateMul(r, rs));
      llvm::Value* to = g_.at(g_.elt, f->getArg(6), b_.CreateMul(r, kPad));
      g_.loop(g_.i64(0), k, 1, "k", [&](llvm::Value* kk) {
        llvm::Value* x = b_.CreateAlignedLoad(store_, g_.at(store_, from, b_.CreateMul(kk, ks)), g_.storeAlign());
        b_.CreateAlignedStore(g_.toAcc(x, 1), g_.at(g_.elt, to, kk), g_.eltAlign());
      });
      g_.loop(k, kPad, 1, "pad", [&](llvm::Value* kk) {
        b_.CreateAlignedStore(llvm::Constant::getNullValue(g_.elt), g_.at(g_.elt, to, kk), g_.eltAlign());
      });
    });
    b_.CreateRetVoid();
  });
}

/// void kernel(const ACC* a, i64 lda, i64 ka, const T* b, i64 ldb, i64 k, i64 cols, ACC* tile, i64 ldt):
/// tile[i·ldt + j] = Σ_kk a[i·lda + kk·ka] · B(kk, j) for i < ROWS, j < cols, where B(kk, j) is
/// b[j·ldb + kk] (dot form, which loads A's k as vectors and ignores ka: 1) or b[kk·ldb + j]
/// (axpy form, which reads A one element at a time, so any ka: a transposed A in place).
llvm::Function* SmallEmitter::kernelFunction(int rows) {
  llvm::Type* i64t = b_.getInt64Ty();
  llvm::Type* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64t, i64t, ptr, i64t, i64t, i64t, ptr, i64t}, false);
  const bool dot = dotForm(g_.form);
  const int step = columnsPerStep(rows);
  const std::string name = fmt::format("kiln.gemm.{}.{}{}.m{}.{}{}", dot ? "dot" : "axpy", g_.typeTag(),
                                       bConverted_ ? ".bacc" : "", rows, dot ? "r" : "v", step);
  return g_.sharedFunction(name, type,
                           [&](llvm::Function* f) { dot ? emitDot(f, rows, step) : emitAxpy(f, rows, step); });
}

void SmallEmitter::emitDot(llvm::Function* f, int rows, int r) {
  llvm::Value *a = f->getArg(0), *lda = f->getArg(1), *bp = f->getArg(3), *ldb = f->getArg(4), *k = f->getArg(5),
              *cols = f->getArg(6), *tile = f->getArg(7), *ldt = f->getArg(8);
  llvm::Value* kMain = b_.CreateAnd(k, g_.i64(~int64_t{l_ - 1}));
  // Columns [j0, j0 + count): `count` rows of W against the group's rows of A.
  auto columns = [&](llvm::Value* j0, int count) {
    Values zero(static_cast<size_t>(rows * count), llvm::Constant::getNullValue(g_.vec));
    auto step = [&](llvm::Value* kk, const Values& acc, llvm::Value* mask) {
      Values next = acc, av, bv;
      for (int i = 0; i < rows; ++i) {
        llvm::Value* at = g_.at(g_.elt, a, b_.CreateAdd(b_.CreateMul(g_.i64(i), lda), kk));
        av.push_back(load(g_.vec, at, g_.eltAlign(), mask));
      }
      for (int j = 0; j < count; ++j) {
        llvm::Value* at = g_.at(store_, bp, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(j0, g_.i64(j)), ldb), kk));
        bv.push_back(loadB(at, mask));
      }
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < count; ++j) next[i * count + j] = g_.mulAdd(av[i], bv[j], acc[i * count + j]);
      return next;
    };
    Values acc =
        carry(g_.i64(0), kMain, l_, "k", zero, [&](llvm::Value* kk, const Values& v) { return step(kk, v, nullptr); });
    acc = carryIf(b_.CreateICmpSLT(kMain, k), "k.tail", acc,
                  [&](const Values& v) { return step(kMain, v, lanesBelow(kMain, k)); });
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < count; ++j) {
        llvm::Value* at = b_.CreateAdd(b_.CreateMul(g_.i64(i), ldt), b_.CreateAdd(j0, g_.i64(j)));
        b_.CreateAlignedStore(g_.sumLanes(acc[i * count + j]), g_.at(g_.elt, tile, at), g_.eltAlign());
      }
  };
  llvm::Value* fullEnd = b_.CreateSub(cols, b_.CreateSRem(cols, g_.i64(r)));
  g_.loop(g_.i64(0), fullEnd, r, "cols", [&](llvm::Value* j0) { columns(j0, r); });
  g_.loop(fullEnd, cols, 1, "cols.tail", [&](llvm::Value* j0) { columns(j0, 1); });
  b_.CreateRetVoid();
}

void SmallEmitter::emitAxpy(llvm::Function* f, int rows, int v) {
  llvm::Value *a = f->getArg(0), *lda = f->getArg(1), *ka = f->getArg(2), *bp = f->getArg(3), *ldb = f->getArg(4),
              *k = f->getArg(5), *cols = f->getArg(6), *tile = f->getArg(7), *ldt = f->getArg(8);
  llvm::Type* bElt = bType();
  // Columns [j0, j0 + count·lanes), the last vector masked to `mask` when given.
  auto columns = [&](llvm::Value* j0, int count, llvm::Value* mask) {
    // One k: B's row at `row`, A's column at `column`. Two per loop iteration, with the operand
    // pointers carried and bumped (no index arithmetic in the loop), then an odd k's last.
    auto step = [&](llvm::Value* row, llvm::Value* column, const Values& acc) {
      Values next = acc, bv;
      for (int j = 0; j < count; ++j) {
        bv.push_back(loadB(g_.at(bElt, row, g_.i64(j * l_)), mask));
      }
      for (int i = 0; i < rows; ++i) {
        llvm::Value* x =
            b_.CreateAlignedLoad(g_.elt, g_.at(g_.elt, column, b_.CreateMul(g_.i64(i), lda)), g_.eltAlign());
        llvm::Value* av = g_.splat(l_, x);
        for (int j = 0; j < count; ++j) next[i * count + j] = g_.mulAdd(av, bv[j], acc[i * count + j]);
      }
      return next;
    };
    Values init(static_cast<size_t>(rows * count), llvm::Constant::getNullValue(g_.vec));
    init.push_back(g_.at(bElt, bp, j0));
    init.push_back(a);
    const size_t rowAt = init.size() - 2, columnAt = init.size() - 1;
    llvm::Value* kEven = b_.CreateAnd(k, g_.i64(-2));
    Values acc = carry(g_.i64(0), kEven, 2, "k", init, [&](llvm::Value*, const Values& v) {
      Values next = step(v[rowAt], v[columnAt], v);
      llvm::Value* row = g_.at(bElt, v[rowAt], ldb);
      llvm::Value* column = g_.at(g_.elt, v[columnAt], ka);
      next = step(row, column, next);
      next[rowAt] = g_.at(bElt, row, ldb);
      next[columnAt] = g_.at(g_.elt, column, ka);
      return next;
    });
    acc = carryIf(b_.CreateICmpSLT(kEven, k), "k.odd", acc,
                  [&](const Values& v) { return step(v[rowAt], v[columnAt], v); });
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < count; ++j) {
        llvm::Value* at = b_.CreateAdd(b_.CreateMul(g_.i64(i), ldt), b_.CreateAdd(j0, g_.i64(j * l_)));
        b_.CreateAlignedStore(acc[i * count + j], g_.at(g_.elt, tile, at), g_.eltAlign());
      }
  };
  // Steps of V vectors, then one of V/2 where V is 4 or more (a block of half a step, as threads
  // split a batch-1 layer one step wide, is one pass over B), then single vectors, then the last,
  // partial vector masked.
  const int width = v * l_, half = v >= 4 ? v / 2 : 0;
  llvm::Value* stepsEnd = b_.CreateSub(cols, b_.CreateSRem(cols, g_.i64(width)));
  llvm::Value* vectorsEnd = b_.CreateSub(cols, b_.CreateSRem(cols, g_.i64(l_)));
  g_.loop(g_.i64(0), stepsEnd, width, "cols", [&](llvm::Value* j0) { columns(j0, v, nullptr); });
  llvm::Value* singlesFrom = stepsEnd;
  if (half > 0) {
    llvm::Value* hasHalf = b_.CreateICmpSGE(b_.CreateSub(vectorsEnd, stepsEnd), g_.i64(half * l_));
    singlesFrom = b_.CreateSelect(hasHalf, b_.CreateAdd(stepsEnd, g_.i64(half * l_)), stepsEnd);
    g_.loop(stepsEnd, singlesFrom, half * l_, "cols.half", [&](llvm::Value* j0) { columns(j0, half, nullptr); });
  }
  g_.loop(singlesFrom, vectorsEnd, l_, "cols.vector", [&](llvm::Value* j0) { columns(j0, 1, nullptr); });
  g_.loop(vectorsEnd, cols, l_, "cols.tail", [&](llvm::Value* j0) { columns(j0, 1, lanesBelow(j0, cols)); });
  b_.CreateRetVoid();
}

}  // namespace

std::vector<int> smallRowGroups(int64_t m, bool wideRegisters) {
  if (m <= (wideRegisters ? kSmallM : kMaxGroupRows)) return {static_cast<int>(m)};
  if (m > kSmallM) {
    if (m % kCachedGroupRows == 0) return {kCachedGroupRows};
    return {kCachedGroupRows, kCachedGroupRows};  // the last overlaps the one before
  }
  const int first = static_cast<int>((m + 1) / 2);
  return {first, static_cast<int>(m) - first};
}

bool smallAInPlace(const kernels::GemmForm& f, DType dtype) {
  const bool accStored = dtype == DType::f32 || dtype == DType::f64 || dtype == DType::i64;
  return accStored && (sharedStrides(f, true)->k == 1 || !dotForm(f));
}

bool takesSmallPath(const kernels::GemmForm& f, bool bf16Pairs) {
  const std::optional<Strides> a = sharedStrides(f, true), b = sharedStrides(f, false);
  if (f.m < 1 || f.n < 1 || !a || !b) return false;
  if (f.m <= kSmallM) return true;
  // A product that fits L1 (see the file comment), in the axpy form: A read in place, transposed or
  // not; B in place when its n is contiguous, else converted into rows first. Not for bf16 that the
  // packed path multiplies as k pairs: converting A and B to f32 costs more than the pairs save.
  return !bf16Pairs && f.m <= kCachedM && f.k * f.n * 4 <= kCachedBBytes && f.n >= kCachedN && workOf(f) < kParallelFlops;
}

bool smallConvertsB(const kernels::GemmForm& f) {
  return f.m > kSmallM && !sharedStrides(f, false)->rowsContiguous();
}

Blocking smallBlocking(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa) {
  Blocking p;
  p.path = Path::Small;
  const int bytes = accBytes(acc);
  p.lanes = isa.f32Lanes * 4 / bytes;
  p.mb = f.m;
  p.mBlocks = 1;
  // Blocks of whole steps of the first row group (R rows of W, V vectors of B's row).
  const int step = columnsPerStep(smallRowGroups(f.m, isa.avx512)[0]);
  int64_t unit = dotForm(f) ? step : step * p.lanes;
  const double bBytes = static_cast<double>(f.n) * static_cast<double>(f.k) * bytes;
  const double allB = bBytes * static_cast<double>(f.batch);
  int64_t blocks = 1;
  if (allB >= kSmallAwakeBytes)
    blocks = std::max<int64_t>(f.batch > 1 ? 1 : 2, static_cast<int64_t>(bBytes / kSmallBlockBytes));
  // B to be split but one step wide (a batch-1 layer of 128 columns is one step of 8 vectors):
  // blocks of half a step, which the axpy kernels take in one pass each. The tile then spans all
  // of N, so that one thread running every block (the pool's workers parked, or one thread) runs
  // them as one block instead, one pass over B in whole steps (the small driver's whole item).
  const bool halfSteps = !dotForm(f) && blocks > 1 && ceilDiv(f.n, unit) < 2 && step >= 4;
  if (halfSteps) unit = step / 2 * p.lanes;
  p.nb = roundUp(ceilDiv(f.n, std::min(blocks, ceilDiv(f.n, unit))), unit);
  p.nBlocks = ceilDiv(f.n, p.nb);
  p.items = f.batch * p.nBlocks;
  p.grain = allB >= kSmallAwakeBytes ? 1 : std::max<int64_t>(p.items, 1);
  p.awakeOnly = allB >= kSmallAwakeBytes && allB < kSmallParallelBytes;
  p.ldt = roundUp(halfSteps ? f.n : p.nb, p.lanes);
  p.packABytes = align64(f.m * roundUp(f.k, p.lanes) * bytes);
  if (smallConvertsB(f)) {  // B's block as one panel of K rows (the strided packing's layout)
    p.nr = static_cast<int>(roundUp(p.nb, p.lanes));
    p.packBBytes = packedBytes(1, p.nr, p.nr, f.k, bytes, p.lanes);
  }
  p.tileBytes = align64(f.m * p.ldt * bytes);
  return p;
}

llvm::Function* smallKernelFunction(GemmBuilder& g, int rows) { return SmallEmitter(g).kernelFunction(rows); }

llvm::Function* smallRowsFunction(GemmBuilder& g) { return SmallEmitter(g).rowsFunction(); }

void emitSmallItem(GemmBuilder& g, llvm::Function* f) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value *bufs = f->getArg(0), *d = f->getArg(1), *slot = f->getArg(2), *item = f->getArg(3);
  auto get = [&](int field) { return desc::load(b, d, field); };
  llvm::Value *nBlocks = get(desc::NBlocks), *nb = get(desc::Nb), *m = get(desc::M), *k = get(desc::K);
  llvm::Value *ldt = get(desc::Ldt), *elementBytes = get(desc::ElementBytes);
  // Item -1: the whole of N for batch 0, with a tile that spans it (GemmDriver.cpp's emitChunk).
  llvm::Value* whole = b.CreateICmpSLT(item, g.i64(0), "whole");
  llvm::Value* batch = b.CreateSelect(whole, g.i64(0), b.CreateUDiv(item, nBlocks), "b");
  llvm::Value* n0 = b.CreateSelect(whole, g.i64(0), b.CreateMul(b.CreateURem(item, nBlocks), nb), "n0");
  llvm::Value* cols = b.CreateSelect(whole, get(desc::N), g.min(nb, b.CreateSub(get(desc::N), n0)), "cols");
  llvm::Value* packedB = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), slot, kSlotHeaderBytes);
  llvm::Value* packBBytes = get(desc::PackBBytes);
  llvm::Value* packedA = b.CreateInBoundsGEP(b.getInt8Ty(), packedB, packBBytes);
  llvm::Value* tile = b.CreateInBoundsGEP(b.getInt8Ty(), packedA, get(desc::PackABytes));
  // An operand's element at `offset` (elements); the ends of an empty one may lie outside its
  // buffer, hence no `inbounds`.
  auto element = [&](int operand, llvm::Value* offset) {
    llvm::Value* buffer = desc::load(b, d, operand + desc::Buffer);
    llvm::Value* base =
        b.CreateAlignedLoad(b.getPtrTy(), b.CreateInBoundsGEP(b.getPtrTy(), bufs, buffer), llvm::Align(8));
    return b.CreateGEP(b.getInt8Ty(), base, b.CreateMul(offset, elementBytes));
  };
  // A of this batch: in place, or converted into the slot unless it holds this batch's already.
  llvm::Value* aSrc = element(desc::A, batchOffset(g, desc::field(b, d, desc::A), batch));
  llvm::Value* inPlace = b.CreateICmpNE(get(desc::AInPlace), g.i64(0));
  auto* pack = llvm::BasicBlock::Create(g.ctx, "packa", f);
  auto* packed = llvm::BasicBlock::Create(g.ctx, "packa.done", f);
  auto* ready = llvm::BasicBlock::Create(g.ctx, "a.ready", f);
  llvm::Value* held = b.CreateICmpEQ(b.CreateAlignedLoad(b.getInt64Ty(), slot, llvm::Align(8)), batch);
  llvm::Value* kPad = get(desc::KPad);
  llvm::Value* aHere = b.CreateSelect(inPlace, aSrc, packedA);
  llvm::Value* ldaHere = b.CreateSelect(inPlace, get(desc::A + desc::RowStride), kPad);
  llvm::Value* kaHere = b.CreateSelect(inPlace, get(desc::A + desc::KStride), g.i64(1));
  llvm::BasicBlock* entry = b.GetInsertBlock();
  b.CreateCondBr(b.CreateOr(inPlace, held), ready, pack);
  b.SetInsertPoint(pack);
  auto* rowsType = llvm::FunctionType::get(
      b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty(),
                      b.getPtrTy()},
      false);
  b.CreateCall(rowsType, desc::pointer(b, d, desc::PackRows),
               {aSrc, get(desc::A + desc::RowStride), get(desc::A + desc::KStride), m, k, kPad, packedA});
  b.CreateAlignedStore(batch, slot, llvm::Align(8));
  b.CreateBr(packed);
  b.SetInsertPoint(packed);
  b.CreateBr(ready);
  b.SetInsertPoint(ready);
  // An operand's pointer or stride where two ways of getting it meet.
  auto merge = [&](const char* name, llvm::Value* x, llvm::BasicBlock* fromX, llvm::Value* y, llvm::BasicBlock* fromY) {
    llvm::PHINode* phi = b.CreatePHI(x->getType(), 2, name);
    phi->addIncoming(x, fromX);
    phi->addIncoming(y, fromY);
    return phi;
  };
  llvm::Value* a = merge("a", aHere, entry, packedA, packed);
  llvm::Value* lda = merge("lda", ldaHere, entry, kPad, packed);
  llvm::Value* ka = merge("ka", kaHere, entry, g.i64(1), packed);
  // B from column n0 on: in place, or (PackBBytes > 0: its k contiguous) converted into one panel
  // of K rows of Width columns by the strided packing.
  llvm::Value* operandB = desc::field(b, d, desc::B);
  llvm::Value* offsetB = batchOffset(g, operandB, batch);
  llvm::Value* bInPlace = element(desc::B, b.CreateAdd(offsetB, b.CreateMul(n0, get(desc::B + desc::RowStride))));
  llvm::Value* ldbInPlace = get(desc::B + desc::Ld);
  auto* convert = llvm::BasicBlock::Create(g.ctx, "convertb", f);
  auto* bReady = llvm::BasicBlock::Create(g.ctx, "b.ready", f);
  llvm::BasicBlock* bEntry = b.GetInsertBlock();
  b.CreateCondBr(b.CreateICmpEQ(packBBytes, g.i64(0)), bReady, convert);
  b.SetInsertPoint(convert);
  b.CreateCall(packFunctionType(g.ctx), desc::pointer(b, d, desc::ConvertB),
               {bufs, operandB, batch, offsetB, n0, cols, g.i64(0), k, k, packedB});
  llvm::Value* width = get(desc::B + desc::Width);
  b.CreateBr(bReady);
  b.SetInsertPoint(bReady);
  llvm::Value* bSrc = merge("bsrc", bInPlace, bEntry, packedB, convert);
  llvm::Value* ldb = merge("ldb", ldbInPlace, bEntry, width, convert);
  auto* kernelType = llvm::FunctionType::get(b.getVoidTy(),
                                             {b.getPtrTy(), b.getInt64Ty(), b.getInt64Ty(), b.getPtrTy(),
                                              b.getInt64Ty(), b.getInt64Ty(), b.getInt64Ty(), b.getPtrTy(),
                                              b.getInt64Ty()},
                                             false);
  // Groups of Group0 rows up to the last Group1 rows, which end at row M (and may overlap the
  // groups before: their rows are then computed twice, to the same sums).
  llvm::Value* group0 = get(desc::Group0);
  llvm::Value* rest = b.CreateSub(m, get(desc::Group1));  // rows before the last group
  llvm::Value* firstGroups = b.CreateUDiv(b.CreateAdd(rest, b.CreateSub(group0, g.i64(1))), group0);
  // A plain product (directResult) whose block is whole vectors of columns is written straight into
  // the result: no tile, no epilogue copying it (the axpy kernels store a partial vector whole).
  // `kiln_gemm_tune --threads 1 64 32 64`, five interleaved pairs: 2.5–4.1 → 1.6–1.8 µs.
  auto [hasDirect, result] = directTarget(g, bufs, d, batch);
  llvm::Value* n = get(desc::N);
  llvm::Value* inResult = b.CreateAnd(
      hasDirect, b.CreateICmpEQ(b.CreateURem(cols, g.i64(g.plan.lanes)), g.i64(0)), "direct");
  llvm::Value* c = b.CreateSelect(inResult, b.CreateGEP(g.elt, result, n0), tile, "c");
  llvm::Value* ldc = b.CreateSelect(inResult, n, ldt, "ldc");
  g.loop(g.i64(0), firstGroups, 1, "group0", [&](llvm::Value* i) {
    llvm::Value* r0 = b.CreateMul(i, group0);
    b.CreateCall(kernelType, desc::pointer(b, d, desc::Kernel0),
                 {b.CreateInBoundsGEP(g.elt, a, b.CreateMul(r0, lda)), lda, ka, bSrc, ldb, k, cols,
                  b.CreateGEP(g.elt, c, b.CreateMul(r0, ldc)), ldc});
  });
  auto* second = llvm::BasicBlock::Create(g.ctx, "group1", f);
  auto* done = llvm::BasicBlock::Create(g.ctx, "groups.done", f);
  b.CreateCondBr(b.CreateICmpSGT(get(desc::Group1), g.i64(0)), second, done);
  b.SetInsertPoint(second);
  llvm::Value* last = rest;
  b.CreateCall(kernelType, desc::pointer(b, d, desc::Kernel1),
               {b.CreateInBoundsGEP(g.elt, a, b.CreateMul(last, lda)), lda, ka, bSrc, ldb, k, cols,
                b.CreateGEP(g.elt, c, b.CreateMul(last, ldc)), ldc});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  auto* copy = llvm::BasicBlock::Create(g.ctx, "epilogue", f);
  auto* finished = llvm::BasicBlock::Create(g.ctx, "finished", f);
  b.CreateCondBr(inResult, finished, copy);
  b.SetInsertPoint(copy);
  callEpilogue(g, bufs, d, tile, batch, g.i64(0), m, n0, cols);
  b.CreateBr(finished);
  b.SetInsertPoint(finished);
  b.CreateRetVoid();
}

}  // namespace kiln::cpu::gemm
