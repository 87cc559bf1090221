// The blocking of a contraction for an ISA (GemmEmitter.h's Blocking): its path (packed, split K,
// small M), register tile, K slices, C blocks, the split for threads, which operands are kept
// packed and whether A's rows are read in place. The reasons and the measurements behind each
// rule are in Gemm.cpp's file comment ("Blocking", "A in place", "Split K", "Parallelism").
#include "codegen/cpu/GemmEmitter.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

namespace kiln::cpu::gemm {

namespace {

constexpr int64_t kPackedBBudget = 4 << 20;         // bytes of B kept packed for all of K per thread
constexpr int64_t kPackedABudget = 1 << 20;         // bytes of A kept packed for all of K per thread
constexpr double kTileRowsGain = 0.03;              // fewer padded rows a 10- or 12-row tile must save
constexpr int64_t kNarrowTileRows = 64;             // a transposed B of at most this many rows: 8 × 32 tiles
constexpr int64_t kSplitsMost = 4;                  // SplitK: parts of K
constexpr int64_t kSliceBlocksLeast = 2;            // SplitK: K slices per part at least
constexpr double kSplitBudget = 32 << 20;           // SplitK: bytes of partial products at most
constexpr int64_t kShallowSlice = 48;               // a slice this shallow hands each panel to the epilogue
constexpr int64_t kInPlacePanels = 4;               // B panels per block that A read in place from L2 may serve
constexpr int64_t kAmxColumnsFirstK = 512;          // AMX: from this K in one slice, threads split columns first
constexpr int64_t kAmxPartK = 256;                  // AMX SplitK: k of a part at least, where slices are few
constexpr int64_t kPairsLeastK = 16;                // bf16: a shallower K widens to f32 instead of k pairs or tiles

/// Whether every batch reads the same elements of `op`: its index, bounds and quotients do not
/// depend on a batch coordinate of more than one value (a convolution's weights).
bool batchInvariant(const kernels::GemmOperand& op, const std::vector<int64_t>& batchDims) {
  auto invariant = [&](const kernels::Affine& a) {
    for (size_t d = 0; d < batchDims.size(); ++d)
      if (batchDims[d] > 1 && a.coeff[d] != 0) return false;
    return true;
  };
  if (!invariant(op.map.index)) return false;
  for (const kernels::IndexMap::Bound& b : op.map.bounds)
    if (!invariant(b.value)) return false;
  for (const kernels::GemmOperand::Quotient& q : op.quotients)
    if (!invariant(q.value)) return false;
  return true;
}

/// Blocks of at most `most` (a multiple of `unit`) covering `size` evenly: the block size.
int64_t evenBlock(int64_t size, int64_t most, int64_t unit) {
  if (size == 0) return unit;
  return roundUp(ceilDiv(size, ceilDiv(size, most)), unit);
}

/// Turns `p` into the SplitK blocking (at most kSplitsMost parts of at least kSliceBlocksLeast K
/// slices each) when the partial products fit kSplitBudget; false otherwise.
bool splitK(Blocking& p, const kernels::GemmForm& f, int bytes, double flops) {
  const int64_t least = p.amx ? 1 : kSliceBlocksLeast;
  if (p.kBlocks < 2 * least) return false;
  p.ldt = roundUp(f.n, p.nr);
  p.partialBytes = align64(roundUp(f.m, p.mr) * p.ldt * bytes);
  if (static_cast<double>(kSplitsMost) * static_cast<double>(f.batch) * static_cast<double>(p.partialBytes) >
      kSplitBudget)
    return false;
  p.path = Path::SplitK;
  p.splits = std::min(kSplitsMost, p.kBlocks / least);
  // AMX slices are deep (kAmxKc): two or three of them split into more parts of one shallower
  // slice each, of at least kAmxPartK k.
  if (p.amx && p.splits < kSplitsMost) p.splits = std::clamp(f.k / kAmxPartK, p.splits, kSplitsMost);
  p.sliceBlocks = ceilDiv(p.kBlocks, p.splits);
  // Parts of equal depth: slices that fill every part (five slices in two parts would be three and
  // two, the first part's thread the last to finish), each no deeper than before.
  p.kc = roundUp(ceilDiv(f.k, p.splits * p.sliceBlocks), p.kUnit);
  p.kBlocks = ceilDiv(f.k, p.kc);
  p.sliceBlocks = ceilDiv(p.kBlocks, p.splits);
  p.splits = ceilDiv(p.kBlocks, p.sliceBlocks);  // no empty part
  p.mBlocks = ceilDiv(f.m, p.mb);
  p.nBlocks = ceilDiv(f.n, p.nb);
  p.items = f.batch * p.splits * p.nBlocks;
  // An even number of items below 16, so that two threads get equal shares: narrower column
  // blocks where the parts are odd. Three parts of one block left one of two threads idle a third
  // of the time: a batch of 64 of simplenet's first layer, 64×1000·(512×1000)ᵀ, 2T 166–169 →
  // 232–235 GFLOP/s as six items (`kiln_gemm_tune --threads 2 64 512 1000 0 1`, medians of two
  // runs). Two parts stay two items: four (mnist_mlp's 100×784·784×128 in column halves) measured
  // 2–3 % slower on two threads.
  if (flops >= kParallelFlops)
    while (p.items < 16 && p.items % 2 != 0) {
      const int64_t smaller = roundUp(ceilDiv(f.n, 2 * p.nBlocks), p.nr);
      if (smaller >= p.nb) break;
      p.nb = smaller;
      p.nBlocks = ceilDiv(f.n, p.nb);
      p.items = f.batch * p.splits * p.nBlocks;
    }
  p.reduceItems = f.batch * p.mBlocks * p.nBlocks;
  p.grain = flops < kParallelFlops ? std::max(p.items, p.reduceItems) : 1;
  p.packBBytes = packedBytes(1, p.nb, p.nr, p.kc, bytes, p.lanes);
  p.packABytes = packedBytes(1, p.mb, p.mr, p.kc, bytes, p.lanes);
  return true;
}

}  // namespace

double flopsOf(const kernels::GemmForm& f) { return kernels::productFlops(f); }
double workOf(const kernels::GemmForm& f) { return flopsOf(f) + kEpilogueFlopWeight * f.epilogueFlops; }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }
int64_t align64(int64_t bytes) { return roundUp(bytes, 64); }
int64_t packedBytes(int64_t slices, int64_t rows, int width, int64_t kc, int bytes, int lanes) {
  return align64(slices * (rows / width) * panelElements(kc, width, lanes) * bytes);
}

std::optional<Strides> sharedStrides(const kernels::GemmForm& f, bool a) {
  if (f.batchDims.size() > static_cast<size_t>(desc::kMaxBatchRank)) return std::nullopt;
  return stridesOf(f, a);
}

std::optional<ARuns> aRunsOf(const kernels::GemmForm& f) {
  const kernels::GemmOperand& a = f.a;
  if (!a.map.bounds.empty() || !a.quotients.empty() || f.batchDims.size() > desc::kMaxBatchRank) return std::nullopt;
  const size_t kAt = f.batchDims.size() + f.mDims.size();
  const std::optional<int64_t> row = groupStride(a.map.index, f.batchDims.size(), f.mDims);
  if (!row || *row == 1 || f.m <= 1) return std::nullopt;
  for (size_t split = 1; split < f.kDims.size(); ++split) {
    const std::vector<int64_t> outer(f.kDims.begin(), f.kDims.begin() + static_cast<std::ptrdiff_t>(split));
    const std::vector<int64_t> inner(f.kDims.begin() + static_cast<std::ptrdiff_t>(split), f.kDims.end());
    const std::optional<int64_t> innerStride = groupStride(a.map.index, kAt + split, inner);
    const std::optional<int64_t> outerStride = groupStride(a.map.index, kAt, outer);
    if (innerStride != 1 || !outerStride) continue;
    int64_t run = 1;
    for (int64_t d : inner) run *= d;
    return ARuns{run, *outerStride, *row};
  }
  return std::nullopt;
}

std::array<int, 2> registerTile(const VectorIsa& isa, AccType acc) {
  const int lanes = isa.f32Lanes * 4 / accBytes(acc);
  if (isa.avx512 && acc == AccType::F32) return {8, 3 * lanes};
  return {isa.avx512 ? 12 : isa.f32Lanes == 8 ? 6 : 4, 2 * lanes};
}

namespace {
/// The K slice of f32 products of at least kDeepSliceFlops on AVX-512, deeper than the 192 of
/// their other blocking decisions: each slice takes every C tile (and, with an epilogue, the
/// block's tile in the scratch, 288 KiB for 144 × 512) through the caches once, and the 8 × 48
/// register tile's B panel (64 KiB at 336 k, past L1) streams well enough. On the Xeon with AMX
/// (2026-12-02): simplenet's training step 97.0–97.4 → 91.8–92.5 ms, its first layer's product
/// (with bias, ReLU and mask) 32.5–32.6 → 30.6–30.9 ms and its weight gradient 33.5–34.1 →
/// 31.8–32.2 (`kiln explain simplenet --batch 10000 --train --optimizer adam --measure`, two
/// interleaved pairs); `kiln_gemm_tune --threads 1 [--kc 336]` 10000×512·1000 159–163 → 170–173
/// GFLOP/s, 2048³ 154–156 → 162–166; plain products (`kiln_bench --filter gemm/`) 0–5 % faster,
/// cnn's f32 step the same. Smaller products keep 192: 100×128·784 on two threads (three slices
/// instead of five) went from 67–69 to 76–78 µs.
constexpr int64_t kF32Kc = 336;
constexpr double kDeepSliceFlops = 1e8;

/// A product of at most kNarrowTileRows rows with a transposed B whose N makes four equal blocks
/// of panels `width` wide (tileShape's 8 × 32 case).
bool narrowTransposedB(const kernels::GemmForm& f, int64_t width) {
  const std::optional<Strides> b = sharedStrides(f, false);
  return f.m <= kNarrowTileRows && b && !b->rowsContiguous() && f.n % (4 * width) == 0;
}

/// The register tile of product `f` (of M rows): the ISA's (registerTile), or on AVX-512 for f32
/// accumulators 10 × 32 or 12 × 32 where those pad M to fewer rows than 8-row tiles by more than
/// kTileRowsGain: an edge tile computes its padding rows for nothing. mnist_mlp's 100 rows take
/// 10 × 32 (104 rows as 8-row tiles; `kiln_gemm_tune --threads 1 100 128 784`, medians of three:
/// 147–149 GFLOP/s as 10 × 32, 144–145 as 8 × 48); a convolution of 32 or 64 channels, and every
/// M that is a multiple of 8, 8 × 48.
///
/// A transposed B (k contiguous: a layer's forward product x·Wᵀ) of at most kNarrowTileRows rows
/// that would take 8 × 48 takes 8 × 32 where N makes four equal blocks of its panels: its column
/// blocks then give the threads work without splitting M (which packs B once per M block) or K.
/// On the Xeon with AMX (`kiln_gemm_tune [--mr 8 --nr 32] M N K 0 1`, 2T medians): 16×128·784
/// 105 → 213 GFLOP/s, 32× 157 → 188, 64× 200 → 233, 64×512·1000 236 → 262; at 100 rows 8 × 32
/// lost 5 %, an untransposed B 2–10 % at every M, and 40×520·1000 (blocks of 160 columns and a
/// last one of 40: unequal shares) 12 %.
std::array<int, 2> tileShape(const kernels::GemmForm& f, const VectorIsa& isa, AccType acc) {
  const int64_t m = f.m;
  std::array<int, 2> tile = registerTile(isa, acc);
  if (!isa.avx512 || acc != AccType::F32 || m <= 0) return tile;
  double bestRows = static_cast<double>(roundUp(m, tile[0]));
  for (int rows : {10, 12}) {
    const double padded = static_cast<double>(roundUp(m, rows)) * (1 + kTileRowsGain);
    if (padded < bestRows) tile = {rows, 2 * isa.f32Lanes}, bestRows = padded;
  }
  if (tile[0] == 8 && narrowTransposedB(f, 2 * isa.f32Lanes)) tile[1] = 2 * isa.f32Lanes;
  return tile;
}

/// bf16 operands on an ISA that multiplies k pairs (natively or emulated), in a product of at
/// least kPairsLeastK k. A shallower one (a convolution of one or two input channels) widens to f32
/// for the FMAs: the pairs' second packing pass (windows are packed as f32 through their maps,
/// then rewritten) costs more than they save, and AMX tiles pad K to 32. cnn's first convolution,
/// 32×1×3×3 on 64×1×28×28 (K 9), in its bf16 training step: 336–338 → 278–285 µs (`kiln explain cnn
/// --batch 64 --train --optimizer adam --precision bf16 --measure`, Xeon with AMX); `kiln_gemm_tune
/// --bf16 [--no-pairs] conv 64 C 28 28 32 3`, 1T: K 9 1025 → 895 µs, K 18 1241 → 1191, K 27 1174 →
/// 1575 (tiles win from there).
bool pairsAvailable(const kernels::GemmForm& f, DType dtype, const VectorIsa& isa) {
  return dtype == DType::bf16 && (isa.bf16Dot() || isa.emulateBf16Dot) && f.k >= kPairsLeastK;
}

}  // namespace

bool usesBf16Pairs(const kernels::GemmForm& f, const Blocking& plan, DType dtype,
                   const VectorIsa& isa) {
  return plan.path != Path::Small && pairsAvailable(f, dtype, isa);
}

namespace {
/// The blocking of a product that does not take the small path, A packed.
Blocking packedBlocking(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa, DType dtype,
                        int64_t kcWanted = 0) {
  Blocking p;
  const int bytes = accBytes(acc);
  p.lanes = isa.f32Lanes * 4 / bytes;
  const std::array<int, 2> tile = tileShape(f, isa, acc);
  p.mr = isa.gemmMr > 0 ? isa.gemmMr : tile[0], p.nr = isa.gemmNr > 0 ? isa.gemmNr : tile[1];
  const bool pairs = pairsAvailable(f, dtype, isa);
  if (pairs && isa.amxTiles()) p.amx = true, p.mr = kAmxRows, p.nr = 2 * p.lanes, p.kUnit = kAmxK;
  // bf16 k pairs: a slice of twice the k in the f32 slice's bytes (the micro-kernel's tile, loaded
  // and stored once a slice, then serves twice the work). simplenet's bf16 products on 2 threads
  // (`kiln_gemm_tune --bf16 --kc 192|384`, three rounds): 10000×512·1000 719–734 → 730–742 GFLOP/s,
  // 10000×256·512 646–668 → 695–711 (one slice instead of three).
  //
  // AMX tiles take deeper slices (kAmxKc, so that a K of up to 864 is one slice): each slice
  // costs every micro-kernel call a round trip of its C tile (four tile loads and four stores,
  // 8 KiB) that its tdpbf16ps wait on: on a Xeon with AMX (2026-12-01), 1024³ on one thread ran
  // about 20 % faster with the round trips left out (and the result wrong). `kiln_gemm_tune
  // --bf16`, 384 → 576 (medians, 1 / 2 threads): 100×784·784×128 47 → 40 / 26 → 24 µs; 2048³
  // 715 → 765–790 / 1440 → 1570–1600 GFLOP/s; Aᵀ·B of 10000×1000 by 10000×512 1T the same, 2T
  // 1420–1440 → 1550–1590. Slices of 768 and 1024 (a B panel of 64 KiB, past L1) lost 10–15 %
  // on that Aᵀ·B.
  const int64_t kcOwn = p.amx ? kAmxKc : (isa.avx512 ? 192 : 256) * (pairs ? 2 : 1);
  const int64_t kcMost = roundUp(kcWanted > 0 ? kcWanted : isa.gemmKc > 0 ? isa.gemmKc : kcOwn, p.kUnit);
  const int64_t mbMost = isa.gemmMb > 0 ? isa.gemmMb : 144, nbMost = isa.gemmNb > 0 ? isa.gemmNb : 512 * 4 / bytes;
  // A K of up to 1.5 slices stays one slice: every C tile is then finished in one pass (cnn's
  // second convolution, K 288: 2T 225–231 → 251–264 GFLOP/s in `kiln_gemm_tune conv 64 32 14 14
  // 64 3` against two slices of 144).
  // f32 on AVX-512: deep products in deeper slices (kF32Kc).
  const bool deeper =
      kcWanted == 0 && isa.gemmKc == 0 && isa.avx512 && bytes == 4 && !pairs && workOf(f) >= kDeepSliceFlops;
  const int64_t sliceMost = deeper ? kF32Kc : kcMost;
  const int64_t slices = f.k <= sliceMost * 3 / 2 ? 1 : ceilDiv(f.k, sliceMost);
  p.kc = f.k == 0 ? 0 : roundUp(ceilDiv(f.k, slices), p.kUnit);
  p.kBlocks = f.k == 0 ? 1 : ceilDiv(f.k, p.kc);
  p.mb = evenBlock(f.m, mbMost, p.mr);
  // A K shallower than a slice packs a wider B block in the same bytes: all of N in one block
  // when it has at most NB · KC / K columns (and 4 NB), so that the threads split C into bands of
  // whole rows (below). Only then: wider blocks of a longer N made cnn's first convolution slower.
  const int64_t nbShallow = f.k > 0 && f.k < kcMost ? std::min(nbMost * 4, nbMost * kcMost / f.k) : nbMost;
  p.nb = evenBlock(f.n, f.n <= nbShallow ? f.n : nbMost, p.nr);
  // Keep B packed over all of K when that fits the budget with blocks of at least a quarter of
  // NB; the items of one B block then pack it once per thread instead of once each.
  const int64_t depth = std::max<int64_t>(p.kBlocks * p.kc, 1);
  const int64_t nbFits = kPackedBBudget / bytes / depth / p.nr * p.nr;
  p.reuseB = nbFits >= std::min(p.nb, nbMost / 4);
  if (p.reuseB && nbFits < p.nb) p.nb = evenBlock(f.n, nbFits, p.nr);
  const double flops = workOf(f);
  if (!p.reuseB && splitK(p, f, bytes, flops)) return p;
  const Blocking whole = p;  // before the parallel split below
  auto count = [&] {
    p.mBlocks = f.m == 0 ? 0 : ceilDiv(f.m, p.mb);
    p.nBlocks = f.n == 0 ? 0 : ceilDiv(f.n, p.nb);
    p.items = f.batch * p.mBlocks * p.nBlocks;
  };
  count();
  if (flops < kParallelFlops) {
    p.grain = std::max<int64_t>(p.items, 1);
  } else {
    // Halve the blocks of the dimension with more register tiles per block — with K in one slice
    // (B cheap to pack twice), the M blocks while they hold two register tiles or more. Items run
    // through the M blocks of an N block first, so with one N block each thread's items are a band
    // of whole rows of C; with two or more, a band of columns, which on the development machine's
    // VM makes every row's end a place where the cores trade cache lines (its prefetchers run
    // past it): mnist_mlp's weight gradient, 128×784 over K 100, took as long on two threads as on
    // one (`kiln_gemm_tune 128 784 100 1 0`: 2T 168–170 GFLOP/s in two column bands, 219–225 in
    // four row blocks). A deeper K keeps the rule: cnn's weight gradient of its second
    // convolution (64×288 over K 12544) is faster in column halves than in split K.
    // On AMX tiles a K of one deep slice splits columns first, so that each thread packs only its
    // share of B: bf16 100×784·784×128 on two threads 19.7–21.4 → 17.0–17.6 µs (`kiln_bench`, two
    // rounds; the mnist_mlp bf16 step 0.131–0.134 → 0.121–0.129 ms); shallower ones (100×128·(784 ×
    // 128)ᵀ, K 128) were slower that way, and 512³, 10000×256·512 and cnn's step the same.
    const bool rowsFirst = p.kBlocks == 1 && !(p.amx && f.k >= kAmxColumnsFirstK);
    // A few rows times a transposed B on 8 × 32 tiles (tileShape) split columns first, down to
    // single panels: splitting M would pack B once per M block, or send it to SplitK. mnist_mlp's
    // layer at batches 24–64 (`kiln_gemm_tune [--nb 32] M 128 784 0 1`, 2T): 24 rows 167 → 237
    // GFLOP/s, 32 187 → 259, 48 215 → 277, 64 230 → 281; 64×1000·(512×1000)ᵀ 214 → 261.
    const bool columnsFirst = p.mr == 8 && p.nr == 2 * p.lanes && !p.amx && narrowTransposedB(f, p.nr);
    while (p.items < 4 || (p.items < 16 && p.items % 2 != 0)) {
      const bool splitN = columnsFirst ? p.nb / p.nr >= 2
                          : rowsFirst  ? p.mb / p.mr < 2
                                       : p.nb / p.nr >= p.mb / p.mr;
      int64_t& block = splitN ? p.nb : p.mb;
      const int64_t size = splitN ? f.n : f.m, blocks = splitN ? p.nBlocks : p.mBlocks;
      const int64_t smaller = roundUp(ceilDiv(size, 2 * blocks), splitN ? p.nr : p.mr);
      if (smaller >= block) break;
      block = smaller;
      count();
    }
    // Items that split one M block share its B block, and with B kept packed every thread packs
    // all of it (a weight gradient of a narrow N and a deep K, or a small batch's layer: each of
    // two threads would pack the whole B). Splitting K instead packs every slice of B once.
    Blocking split = whole;
    split.mb = p.mb;  // the second phase's blocks: as many as the items of the packed path
    if (p.reuseB && p.mb < whole.mb && splitK(split, f, bytes, flops)) return split;
  }
  // Only the M blocks of a B block reuse it: with one, B is packed slice by slice, each used while
  // it is in cache, instead of all of K ahead.
  if (p.mBlocks == 1) p.reuseB = false;
  // Items of one M block and A the same in every batch (a convolution's weights): its packing
  // is the same for every item, so it is packed once per thread and kept.
  p.reuseA = p.mBlocks == 1 && p.items > 1 && batchInvariant(f.a, f.batchDims) &&
             packedBytes(p.kBlocks, p.mb, p.mr, p.kc, bytes, p.lanes) <= kPackedABudget;
  p.packBBytes = packedBytes(p.reuseB ? p.kBlocks : 1, p.nb, p.nr, p.kc, bytes, p.lanes);
  p.packABytes = packedBytes(p.reuseA ? p.kBlocks : 1, p.mb, p.mr, p.kc, bytes, p.lanes);
  p.tileBytes = align64(p.mb * p.nb * bytes);
  // A product of one shallow slice writes its tile about as fast as the epilogue reads it back:
  // the epilogue takes each panel's columns while they are in L1 (cnn's first convolution with
  // bias and ReLU, K 9, a tile of 32 × 800: 300–336 → 262–280 µs in eight interleaved pairs of
  // `kiln explain cnn --batch 64 --measure`, Emerald Rapids VM). Deeper products keep one call
  // after the last panel: per panel, the second convolution (K 288, 64 rows, seven panels, so
  // seven times the epilogue's row loops) measured 0–3 % slower, never faster, and groups of
  // panels of 32 KiB lost the first convolution's gain.
  p.epiloguePanels = p.kBlocks == 1 && p.kc <= kShallowSlice ? 1 : 0;
  p.ldt = p.nb;
  return p;
}

/// Whether operands of `dtype` are stored as accumulators of `acc` (read by the micro-kernel as they are).
bool storedAsAcc(DType dtype, AccType acc) {
  return (dtype == DType::f32 && acc == AccType::F32) || (dtype == DType::f64 && acc == AccType::F64) ||
         (dtype == DType::i64 && acc == AccType::I64);
}

/// Whether the micro-kernel may read A of the packed or SplitK blocking `p` where it lies: its
/// elements stored as the accumulators, no tiles or k pairs to pack them into, not forced packed.
bool aReadableInPlace(const kernels::GemmForm& f, const Blocking& p, DType dtype, AccType acc, const VectorIsa& isa) {
  return p.path != Path::Small && !p.amx && !isa.gemmPackA && storedAsAcc(dtype, acc) &&
         !usesBf16Pairs(f, p, dtype, isa);
}

/// Whether more of `rows` lines, `rowBytes` apart, fall into one set of the L1 data cache than
/// `ways` (all of its ways unless said): the micro-kernel reads a line of every row of a register
/// tile in turn, so they would evict each other at every step (a row stride of a multiple of 4 KiB
/// puts all of them in one set). See Gemm.cpp's file comment ("A in place").
bool rowsShareL1Sets(int64_t rowBytes, int64_t rows, const VectorIsa& isa, int ways = 0) {
  const int64_t sets = std::max(isa.l1Sets, 1), line = std::max(isa.l1Line, 1);
  std::vector<int> perSet(static_cast<size_t>(sets), 0);
  for (int64_t r = 0; r < rows; ++r)
    if (++perSet[static_cast<size_t>(r * rowBytes / line % sets)] > (ways > 0 ? ways : isa.l1Ways)) return true;
  return false;
}

/// Whether the packed or SplitK blocking `p` reads A's whole register tiles of rows in place:
/// A strided with its k contiguous (a transposing packing otherwise), stored as the accumulators,
/// its rows in enough sets of L1.
bool aRowsInPlace(const kernels::GemmForm& f, const Blocking& p, DType dtype, AccType acc, const VectorIsa& isa) {
  const std::optional<Strides> s = sharedStrides(f, true);
  return aReadableInPlace(f, p, dtype, acc, isa) && s && s->k == 1 && s->row != 1 &&
         !rowsShareL1Sets(s->row * accBytes(acc), p.mr, isa);
}

/// Whether the packed or SplitK blocking `p` reads A in place with its rows contiguous and its k
/// lda apart (Aᵀ·B's A: a weight gradient's layer input): stored as the accumulators, on AVX-512
/// (16 lanes: an 8-row register tile's k step is half a line), read by at most kInPlacePanels
/// panels of B, and its slice's kc rows of A, one line each, spread over L1's sets, at most half
/// its ways in any one (the micro-kernel reads the whole slice again for every panel of B, whose
/// own lines need the rest): a stride of a multiple of 2 KiB packs instead. A block read in place
/// comes back from L2 a line per k for every panel of B, slower than a packed one streams: on the
/// Xeon VM with AMX (`kiln_gemm_tune --threads 1 [--pack-a] M N K 1 0`, two rounds) mnist_mlp's
/// weight gradient 784×128 over K 100 (three panels) 122–123 → 108–110 µs and over K 200
/// 239 → 217 µs, but 1000×256 over K 120 (six panels) 325 → 352 µs and simplenet's 1000×512 over
/// K 10000 (eleven) 61 → 72–74 ms.
bool aColumnsInPlace(const kernels::GemmForm& f, const Blocking& p, DType dtype, AccType acc, const VectorIsa& isa) {
  const std::optional<Strides> s = sharedStrides(f, true);
  if (!aReadableInPlace(f, p, dtype, acc, isa) || !s || s->row != 1 || s->k == 1 || p.lanes != 16 || p.kc == 0 ||
      ceilDiv(std::min(p.nb, f.n), p.nr) > kInPlacePanels)
    return false;
  return !rowsShareL1Sets(s->k * accBytes(acc), p.kc, isa, std::max(isa.l1Ways / 2, 1));
}

/// Whether the AMX tile kernel reads A's whole register tiles of rows in place (tileloadd with A's
/// row stride; GemmAmx.cpp): bf16 A strided with its k contiguous, its rows in enough sets of L1,
/// on native tiles (the emulated kernel reads packed tiles only), and its packing not paid back:
/// a block of A that fits two thirds of L1 (its tiles then load from L1 wherever they lie), or
/// one read by at most kInPlacePanels panels of B. A block streamed from L2 loads slower as
/// rows 2 · lda bytes apart than as packed tiles (29–30 → 36–37 ns a step: GemmAmx.cpp), which
/// more panels of B pay again and again. On a Xeon with AMX (2026-12-01), `kiln_bench --filter
/// /bf16`, best of two, packed → in place: 1T 100×784·784×128 (four panels) 33.6 → 29.8 µs, 64×64·64×32
/// 1.1 → 0.6 µs, 100×128·(784×128)ᵀ (K 128: A in L1) 30.7 → 30.0 µs; but 512³ (16 panels) 0.243 →
/// 0.270 ms, 10000×256·512 (8) 2.28 → 2.61 ms, 10000×1000·512 10.3 → 14.1 ms.
bool amxRowsInPlace(const kernels::GemmForm& f, const Blocking& p, DType dtype, const VectorIsa& isa) {
  const std::optional<Strides> s = sharedStrides(f, true);
  if (!p.amx || !isa.amx || isa.emulateAmx || isa.gemmPackA || dtype != DType::bf16 || !s || s->k != 1 ||
      s->row == 1 || rowsShareL1Sets(s->row * 2, p.mr, isa))
    return false;
  const int64_t l1Bytes = int64_t{isa.l1Sets} * isa.l1Ways * isa.l1Line;
  const bool blockInL1 = std::min(p.mb, f.m) * p.kc * 2 <= l1Bytes * 2 / 3;
  return blockInL1 || ceilDiv(std::min(p.nb, f.n), p.nr) <= kInPlacePanels;
}

/// The K slice nearest to `kc` (from half of it to a quarter more) that divides `run` and is a
/// multiple of `unit`; 0 where there is none.
int64_t sliceInRun(int64_t run, int64_t kc, int unit) {
  int64_t best = 0;
  for (int64_t c = roundUp(std::max<int64_t>(kc / 2, 1), unit); c <= kc + kc / 4; c += unit)
    if (run % c == 0 && (best == 0 || std::abs(c - kc) < std::abs(best - kc))) best = c;
  return best;
}
}  // namespace

Blocking blockingFor(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa, DType dtype) {
  if (takesSmallPath(f, pairsAvailable(f, dtype, isa))) return smallBlocking(f, acc, isa);
  Blocking p = packedBlocking(f, acc, isa, dtype);
  p.aInPlace = aRowsInPlace(f, p, dtype, acc, isa) || amxRowsInPlace(f, p, dtype, isa);
  // A kept packed over all of K (Blocking::reuseA) is packed once per thread anyway.
  if (!p.aInPlace && !p.reuseA && aColumnsInPlace(f, p, dtype, acc, isa)) p.aInPlace = p.aColumns = true;
  // A in runs: read in place too, with K slices that divide the run (cnn's weight gradients: of
  // the first convolution, 32×9 over K 64·784 in slices of 196 instead of 192; `kiln explain
  // cnn --train --measure`: see Gemm.cpp's file comment).
  const std::optional<ARuns> runs = p.aInPlace ? std::nullopt : aRunsOf(f);
  if (runs && p.kc > 0 && aReadableInPlace(f, p, dtype, acc, isa) &&
      !rowsShareL1Sets(runs->row * accBytes(acc), p.mr, isa)) {
    const int64_t kc = sliceInRun(runs->run, p.kc, p.kUnit);
    const Blocking q = kc > 0 ? packedBlocking(f, acc, isa, dtype, kc) : p;
    if (kc > 0 && q.kc > 0 && runs->run % q.kc == 0) {  // the split for threads keeps kc, but check
      p = q;
      p.aInPlace = true, p.aRun = runs->run, p.aRunStride = runs->runStride;
    }
  }
  if (p.aInPlace) {  // only a block's last, partial register tile of rows is packed
    p.reuseA = false;
    p.packABytes = packedBytes(1, p.mr, p.mr, p.kc, accBytes(acc), p.lanes);
    // On AMX tiles, after it: the in-place panels' last, partial tile products (GemmDriver.cpp's aTails).
    if (p.amx) p.packABytes += packedBytes(1, p.mb, p.mr, kAmxK, accBytes(acc), p.lanes);
  }
  return p;
}

}  // namespace kiln::cpu::gemm
