// Internal to the CUDA contraction renderer (RenderGemm.cpp: dispatch, cuBLASLt steps, epilogues;
// GemmKernel.cpp: the generated GEMM): the block tiles of the generated GEMM and the entry that
// computes a contraction's GEMM form (kernels/Gemm.h) tile by tile.
#pragma once

#include "codegen/cuda/Render.h"
#include "kernels/Gemm.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda::gemm {

/// The blocking of one generated GEMM. A block computes a bm × bn tile of one batch's product over
/// all of K, bk at a time, from two shared-memory stages.
///   SIMT (f32, f64, integers; f16/bf16 before sm_80): tx × ty threads, each a micro-tile of
///     (4·cm) × (4·cn) accumulators in registers: thread (x, y) has the cm chunks of 4 rows from
///     4·y + c·4·ty and the cn chunks of 4 columns from 4·x + c·4·tx.
///   MMA (f16/bf16 on sm_80+): warps wm × wn, each a warp tile of mt × nt built from
///     mma.sync.m16n8k16 (f32 accumulators), fragments loaded with ldmatrix.
struct Tile {
  bool mma = false;
  int bm = 0, bn = 0, bk = 0, threads = 0;
  int tx = 0, ty = 0, cm = 0, cn = 0;  // SIMT
  int wm = 0, wn = 0, mt = 0, nt = 0;  // MMA
};

/// The tiles for operands of `operand` type on SM `sm`: MMA tiles (bk 32) for f16/bf16 on sm_80+,
/// SIMT tiles (bk 16) otherwise; 128×128, 128×64, 64×128, 64×64, 32×128, 128×32, 32×64, 64×32 and
/// 32×32 (64-bit accumulators: not the largest).
std::vector<Tile> candidateTiles(DType operand, int sm);

/// The tile for form `f`: among the candidates no larger than the problem (rounded up to 32), the
/// largest whose grid has at least three quarters of a wave of blocks (132 SMs of an H100), equal
/// areas ordered by the share of the padded tiles that is real work; else the smallest. A SIMT
/// tile's K step is simtStep's.
Tile chooseTile(const kernels::GemmForm& f, DType operand, int sm);

/// The K step of SIMT tile `t` for form `f`: 16, widened to 32 or 64 for a short K (K ≤ 64 in one
/// step, K ≤ 256 in steps of 32: each step is a memory round trip the block waits for) while both
/// stages (one when a single step covers K) fit in 48 KiB of shared memory.
int simtStep(const kernels::GemmForm& f, const Tile& t, DType operand);

/// Tiles of the result: batch × ⌈M / bm⌉ × ⌈N / bn⌉ (the grid has one block per tile and split).
int64_t tileCount(const kernels::GemmForm& f, const Tile& t);

/// What the GEMM entry needs from its kernel.
struct GemmEntry {
  std::string name;      // the entry point
  std::string params;    // its parameter list (every buffer of the kernel)
  std::string epilogue;  // "F(b0, b1, …, " : the call F(…, b, m, n, acc) runs the epilogue at one point
  std::string index;     // "int" or "long long": the type of b, m and n
  DType acc = DType::f32;  // the accumulators' dtype (f32, f64 or i64)
  /// Split-K: `splits` blocks per tile, split s over k in [s·chunk, (s+1)·chunk) (chunk a multiple
  /// of bk), each writing its partial products to `partials` (a pointer among the parameters) at
  /// ((s · batch + b) · M + m) · N + n instead of running the epilogue.
  int64_t splits = 1, chunk = 0;
  std::string partials;
};

/// Split-K for form `f` with tile `t`: {splits, chunk}, {1, K} for none. When the tiles alone leave
/// most SMs idle and K is long (a weight gradient: a small result summed over the batch and the
/// pixels), enough splits of at least 256 of K each to fill about a wave, as long as the partial
/// products (of dtype `acc`) stay within 64 MiB.
std::pair<int64_t, int64_t> splitK(const kernels::GemmForm& f, const Tile& t, DType acc);

/// The CUDA C++ of the entry computing `f` for kernel `k` with tile `t` (one block per tile and
/// split, N tiles fastest, then M tiles, batches, splits): operands loaded through their index maps, bounds and quotient terms (padding reads 0),
/// staged in shared memory, and every result point (b, m, n) handed to the epilogue call once (or,
/// with splits, its partial products written once per split).
std::string gemmKernelSource(const kernels::Kernel& k, const kernels::GemmForm& f, const Tile& t, const GemmEntry& e);

/// Contraction kernel `k` rendered as the generated GEMM with tile `t` (renderContraction picks the
/// tile itself; tests run every tile on small problems).
RenderedKernel renderGeneratedGemm(const kernels::Kernel& k, const Tile& t);

}  // namespace kiln::cuda::gemm
