// The generated GEMM's paths (packed, split K, small M, small products in L1), its blocking and register
// tiles, and the functions contractions of one module share; each product is also checked against the
// reference interpreter (GemmTestSupport.h).
#include "tests/codegen/GemmTestSupport.h"

#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/GemmEmitter.h"
#include "codegen/cpu/Program.h"
#include "ir/Parser.h"
#include "kernels/Kernel.h"

#include <gtest/gtest.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::cpu::gemmtest {
namespace {

// A the same in every batch (a convolution's weights, a broadcast matrix) within one M block is
// packed over all of K once per thread and kept across items, unless its rows are read in place;
// an A that varies is packed per item.
TEST(Gemm, KeepsABatchInvariantAPacked) {
  const Case broadcast{"{t}[300,33]", "{t}[5,300,257]", "matmul", "transpose_a=true", "{t}[5,33,257]"};
  const gemm::Blocking plan = planOf(broadcast);
  EXPECT_TRUE(plan.reuseA);
  EXPECT_FALSE(plan.aInPlace);
  EXPECT_GT(plan.kBlocks, 1) << "slices kept side by side";
  check(hostJit(), broadcast, DType::f32);
  const Case rows{"{t}[33,300]", "{t}[5,300,257]", "matmul", "", "{t}[5,33,257]"};
  EXPECT_TRUE(planOf(rows).aInPlace) << "A's k contiguous: read in place, nothing kept";
  EXPECT_FALSE(planOf(rows).reuseA);
  check(hostJit(), rows, DType::f32);
  const Conv conv{4, 16, 20, 20, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // K of the input gradient 360: two slices
  EXPECT_TRUE(planOf(conv.forward()).aInPlace) << "the weights' rows";
  EXPECT_TRUE(planOf(conv.gradInput()).reuseA);
  EXPECT_GT(planOf(conv.gradInput()).kBlocks, 1);
  check(hostJit(), conv.forward(), DType::f32);
  check(hostJit(), conv.gradInput(), DType::f32);
  check(hostJit(), conv.forward(), DType::bf16);  // bf16 weights: converted, packed once and kept
  EXPECT_FALSE(planOf(kConvs[1].gradInput()).reuseA) << "grouped: the weights differ per group";
  EXPECT_FALSE(planOf({"{t}[5,300,33]", "{t}[5,300,257]", "matmul", "transpose_a=true", "{t}[5,33,257]"}).reuseA);
}

// A whose k is contiguous (A of A·B and A·Bᵀ, stored as the accumulators) is read in place by the
// micro-kernel, a whole register tile of rows at a time, instead of being transposed into panels;
// only a block's last, partial tile of rows is packed. The products stay right for every depth
// (K tails of 1 to 3 after whole steps of four), every path (packed, several slices, split K,
// batches), edge rows, 1 and 2 threads, and the AVX2 and SSE tiles.
TEST(Gemm, ReadsARowsInPlace) {
  EXPECT_TRUE(planOf(matmul(131, 70, 301)).aInPlace);
  EXPECT_TRUE(planOf(matmul(131, 70, 301, false, true)).aInPlace);
  EXPECT_TRUE(planOf(matmul(131, 70, 301, true, false)).aColumns) << "A's rows contiguous: Gemm.ReadsAColumnsInPlace";
  EXPECT_FALSE(planOf(matmul(131, 70, 301)).aColumns);
  const VectorIsa host = isaOf(hostJit());
  for (DType t : {DType::f16, DType::bf16, DType::i32}) {
    const gemm::Blocking plan =
        gemm::blockingFor(formOf(matmul(131, 70, 301)), t == DType::i32 ? AccType::I64 : AccType::F32, host, t);
    // bf16 on AMX tiles: read in place by the tile loads (Gemm.AmxReadsARowsInPlace).
    EXPECT_EQ(plan.aInPlace, plan.amx && host.amx) << dtypeName(t) << ": converted while packed";
  }
  EXPECT_TRUE(gemm::blockingFor(formOf(matmul(131, 70, 301)), AccType::F64, host, DType::f64).aInPlace);
  for (int64_t k : {297, 298, 299, 300, 301})
    for (bool tb : {false, true}) check(hostJit(), matmul(131, 70, k, false, tb), DType::f32, {1, 2});
  check(hostJit(), matmul(100, 128, 783), DType::f32, {1, 2});  // split K, 10-row tiles
  check(hostJit(), matmul(33, 130, 9001), DType::f32, {1, 2});  // B too deep to keep packed
  check(hostJit(), matmul(300, 520, 999), DType::f32, {2});     // several blocks of rows and columns
  check(hostJit(), {"{t}[3,37,301]", "{t}[3,301,70]", "matmul", "", "{t}[3,37,70]"}, DType::f32, {1, 2});
  check(hostJit(), matmul(131, 70, 301), DType::f64, {1, 2});
  for (const VectorIsa& isa : {isaOf(*makeJit("haswell")), isaOf(sse2Jit())}) {
    EXPECT_TRUE(gemm::blockingFor(formOf(matmul(131, 70, 301)), AccType::F32, isa).aInPlace);
    check(hostJit(), matmul(131, 70, 301), DType::f32, {1, 2}, isa);
  }
}

// A whose rows are contiguous (Aᵀ·B's A, a weight gradient's layer input) is read in place on
// AVX-512 too, its k lda apart, where few panels of B read each block (Blocking::aColumns); more
// panels, a stride that puts a slice's k into few L1 sets, A kept packed for every batch, other
// dtypes and narrower vectors pack it. Right for every K tail after whole steps of four, rows
// short of a register tile, split K, batches, 1 and 2 threads.
TEST(Gemm, ReadsAColumnsInPlace) {
  const VectorIsa host = isaOf(hostJit());
  if (!host.avx512) GTEST_SKIP() << "A's columns are read in place on AVX-512 only";
  EXPECT_TRUE(planOf(matmul(784, 128, 100, true, false)).aColumns) << "mnist_mlp's weight gradient: three panels";
  EXPECT_FALSE(planOf(matmul(1000, 512, 10000, true, false)).aColumns) << "eleven panels: packed";
  EXPECT_FALSE(planOf(matmul(512, 48, 300, true, false)).aColumns) << "2 KiB apart: two L1 sets";
  EXPECT_FALSE(planOf({"{t}[300,33]", "{t}[5,300,257]", "matmul", "transpose_a=true", "{t}[5,33,257]"}).aColumns)
      << "kept packed for every batch";
  EXPECT_FALSE(gemm::blockingFor(formOf(matmul(131, 70, 301, true, false)), AccType::F64, host, DType::f64).aColumns);
  EXPECT_FALSE(gemm::blockingFor(formOf(matmul(131, 70, 301, true, false)), AccType::F32, isaOf(*makeJit("haswell")))
                   .aColumns);
  std::vector<Case> cases;
  for (int64_t k : {1, 3, 4, 297, 298, 299, 300, 301}) cases.push_back(matmul(131, 70, k, true, false));
  cases.push_back(matmul(131, 70, 301, true, true));
  cases.push_back(matmul(784, 128, 100, true, false));
  cases.push_back(matmul(40, 48, 9001, true, false));  // split K
  cases.push_back({"{t}[3,301,37]", "{t}[3,301,70]", "matmul", "transpose_a=true", "{t}[3,37,70]"});
  EXPECT_EQ(planOf(cases[10]).path, gemm::Path::SplitK);
  for (const Case& c : cases) {
    EXPECT_TRUE(planOf(c).aColumns) << c.graph(DType::f32);
    check(hostJit(), c, DType::f32, {1, 2});
  }
}

// A's rows are packed instead where more of a register tile's rows fall into one L1 set than the
// cache has ways (a row stride of a multiple of 4 KiB: 1024 f32 columns): in place they would evict
// each other at every step. 512 columns (2 KiB) spread 12 rows over two sets, 6 in each. (12-row
// tiles, forced: AVX-512's own 8-row tiles fit Zen 4's 8 ways.)
TEST(Gemm, PacksARowsThatShareL1Sets) {
  VectorIsa isa = isaOf(*makeJit("znver4"));
  ASSERT_EQ(isa.l1Ways, 8) << "Zen 4: 32 KiB of 8 ways";
  EXPECT_TRUE(gemm::blockingFor(formOf(matmul(96, 64, 1024)), AccType::F32, isa).aInPlace) << "8 rows, 8 ways";
  isa.gemmMr = 12, isa.gemmNr = 32;
  EXPECT_FALSE(gemm::blockingFor(formOf(matmul(96, 64, 1024)), AccType::F32, isa).aInPlace);
  EXPECT_FALSE(gemm::blockingFor(formOf(matmul(96, 64, 2048, false, true)), AccType::F32, isa).aInPlace);
  EXPECT_TRUE(gemm::blockingFor(formOf(matmul(96, 64, 512)), AccType::F32, isa).aInPlace);
  EXPECT_TRUE(gemm::blockingFor(formOf(matmul(96, 64, 1000)), AccType::F32, isa).aInPlace);
  const VectorIsa wide = isaOf(*makeJit("sapphirerapids"));  // 48 KiB of 12 ways: a tile's rows fit one set
  EXPECT_EQ(wide.l1Ways, 12);
  EXPECT_TRUE(gemm::blockingFor(formOf(matmul(96, 64, 1024)), AccType::F32, wide).aInPlace);
  check(hostJit(), matmul(60, 70, 1024), DType::f32, {1, 2}, isa);
  check(hostJit(), matmul(60, 70, 1024, false, true), DType::f32, {1, 2}, isa);
}

// With K in one slice the parallel split halves M first, so each thread's items are a band of
// whole rows of C, and a K shallower than a slice takes all of N in one block (mnist_mlp's weight
// gradient, 128×784 over K 100); a K of up to 1.5 slices stays one slice (cnn's second
// convolution, K 288).
TEST(Gemm, ShallowProductsSplitIntoRowBands) {
  const Case weightGradient = matmul(128, 784, 100, true, false);
  const gemm::Blocking plan = planOf(weightGradient);
  EXPECT_EQ(plan.path, gemm::Path::Packed);
  EXPECT_EQ(plan.kBlocks, 1);
  EXPECT_EQ(plan.nBlocks, 1) << "all of N in one block";
  EXPECT_GE(plan.mBlocks, 4) << "bands of rows, two or more per thread";
  check(hostJit(), weightGradient, DType::f32, {2});
  const Conv conv2{2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(planOf(conv2.forward()).kBlocks, 1);
}

// A fused epilogue counts toward the work that decides the threads (gemm::workOf): mnist_mlp's
// batch-8 weight gradient, 128×784 over K 8, is 1.6 M flops alone (one thread, in L1's small
// path); Adam's update fused after it made it take 80 % of the training step on one thread.
TEST(Gemm, FusedEpiloguesCountTowardThreads) {
  ir::Graph g = ir::parseGraph(
      "graph @g {\n  input %a : f32[8,128]\n  input %b : f32[8,784]\n  input %v : f32[128,784]\n"
      "  kernel @k0 contraction {\n"
      "    %p = matmul(%a, %b) {transpose_a=true} : f32[128,784]\n"
      "    %s = sqrt(%v) : f32[128,784]\n    %d = div(%p, %s) : f32[128,784]\n  }\n"
      "  output %d = %d\n}\n",
      "epilogue.kir");
  const std::vector<kernels::Kernel> lowered = kernels::lowerGraph(g);
  ASSERT_EQ(lowered.size(), 1u);
  kernels::GemmForm f = kernels::gemmForm(lowered[0]);
  EXPECT_EQ(f.epilogueFlops, 2.0 * 128 * 784) << "a square root and a divide per element";
  const VectorIsa isa = isaOf(hostJit());
  kernels::GemmForm bare = formOf(matmul(128, 784, 8, true, false));
  EXPECT_EQ(bare.epilogueFlops, 0);
  const gemm::Blocking alone = gemm::blockingFor(bare, AccType::F32, isa);
  EXPECT_EQ(alone.path, gemm::Path::Small);
  EXPECT_GE(alone.grain, alone.items) << "one thread";
  bare.epilogueFlops = 13.0 * 128 * 784;  // Adam's update
  const gemm::Blocking fused = gemm::blockingFor(bare, AccType::F32, isa);
  EXPECT_LT(fused.grain * 2, fused.items + 1) << "two threads at least";
  check(hostJit(), matmul(128, 784, 8, true, false), DType::f32, {1, 2});
}

// A padded window's bounds repeat along k (channel, kh, kw) every kh·kw steps: their lane masks
// are computed once per panel and phase. K slices that start mid-period (160 = 17·9 + 7, 152 =
// 6·25 + 2), partial panels (143 and 90 pixels) and a 7×7 window (period 49, evaluated per row)
// check that each row takes its own phase.
TEST(Gemm, ConvWindowMasksRepeatAcrossKSlices) {
  const Conv convs[] = {
      {2, 34, 13, 11, 34, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 12, 10, 9, 12, 5, 5, 1, 1, 1, 2, 2, 1, 1},
      {1, 6, 9, 10, 6, 7, 7, 1, 1, 1, 3, 3, 1, 1},
  };
  for (const Conv& c : convs) {
    for (const Case& k : {c.forward(), c.gradInput()}) {
      const gemm::Blocking plan = planOf(k);
      if (c.kh == 3) {
        EXPECT_NE(plan.kc % 9, 0) << k.op << ": a slice starts mid-period";
      }
      if (c.kh == 5) {
        EXPECT_NE(plan.kc % 25, 0) << k.op << ": a slice starts mid-period";
      }
      check(hostJit(), k, DType::f32);
    }
  }
  // AVX-512's plan (16 lanes, masked loads of 16-bit elements too), run on the host.
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  check(hostJit(), convs[0].gradInput(), DType::f32, {2}, avx512);
  check(hostJit(), convs[1].forward(), DType::bf16, {1}, avx512);
}

// A weight gradient's k (image, row, column) over 31 images of 27×27 has too many steps for a k
// table of all of K (22599 × 3 functionals); the table holds one image and adds the image's
// stride. One channel: the images lie back to back, and 729 = 91·8 + 1, so runs of eight k
// steps cross from one image into the next (their bounds are not one vector of the table).
TEST(Gemm, WeightGradientOverManyImages) {
  const Conv c{31, 1, 27, 27, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  check(hostJit(), c.gradWeight(), DType::f32);
}

// A weight gradient's output gradient dY[image, channel, row, column] is A with its k (image, row,
// column) contiguous in runs of one image's pixels: read in place too (Blocking::aRun), with K
// slices that divide the run, so that no slice crosses from one image into the next (400 pixels:
// slices of 200; cnn's 784: 196). Only a block's last, partial register tile of channels is
// packed (13 channels: 8 in place, 5 packed). The products stay right on the packed path and on
// split K (64 images of 28×28), with groups (the group a batch coordinate), in f64, on the AVX2
// tile, on 1 and 2 threads. Runs with no such divisor (8×8 = 64 pixels) stay packed.
TEST(Gemm, WeightGradientReadsOutputGradientInPlace) {
  const Conv plain{5, 3, 20, 20, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  const gemm::Blocking plan = planOf(plain.gradWeight());
  EXPECT_TRUE(plan.aInPlace);
  EXPECT_EQ(plan.aRun, 400);
  EXPECT_EQ(plan.aRunStride, 13 * 400);
  EXPECT_EQ(plan.kc, 200);
  check(hostJit(), plain.gradWeight(), DType::f32, {1, 2});
  check(hostJit(), plain.gradWeight(), DType::f64, {2});
  const Conv deep{64, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // cnn's first convolution
  const gemm::Blocking deepPlan = planOf(deep.gradWeight());
  EXPECT_EQ(deepPlan.path, gemm::Path::SplitK);
  EXPECT_TRUE(deepPlan.aInPlace);
  EXPECT_EQ(deepPlan.kc, 196);
  check(hostJit(), deep.gradWeight(), DType::f32, {1, 2});
  const Conv grouped{4, 4, 16, 16, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(planOf(grouped.gradWeight()).aInPlace);
  check(hostJit(), grouped.gradWeight(), DType::f32, {1, 2});
  const Conv strided{3, 4, 16, 16, 10, 3, 3, 1, 2, 2, 1, 1, 1, 1};
  EXPECT_FALSE(planOf(strided.gradWeight()).aInPlace) << "64 pixels: no slice of 96 to 240 divides them";
  check(hostJit(), strided.gradWeight(), DType::f32, {1, 2});
  const VectorIsa avx2 = isaOf(*makeJit("haswell"));
  EXPECT_TRUE(gemm::blockingFor(formOf(plain.gradWeight()), AccType::F32, avx2).aInPlace);
  check(hostJit(), plain.gradWeight(), DType::f32, {1, 2}, avx2);
}

// M <= 8 streams B unpacked (GemmSmall.cpp): every M from 1 to 8 with odd N and K in every
// transpose form (dot form where B's k is contiguous, axpy form where its n is; A in place or
// converted into rows), every operand dtype, a broadcast batch, and B large enough to be split
// across threads.
TEST(Gemm, SmallM) {
  std::string ir;
  compileAll(hostJit(), {matmul(8, 9, 9), matmul(9, 7, 9)}, DType::f32, isaOf(hostJit()), &ir);
  EXPECT_NE(definition(ir, "gemm0").find("@kiln.gemm.small.chunk."), std::string::npos) << ir;
  EXPECT_EQ(definition(ir, "gemm1").find("@kiln.gemm.small.chunk."), std::string::npos) << ir;
  for (int64_t m = 1; m <= 8; ++m)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(m, 131 + 2 * m, 29 + 2 * m, ta, tb), DType::f32, {1});
  const int64_t ms[] = {1, 3, 5, 8};
  for (DType t : {DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (int form = 0; form < 4; ++form) check(hostJit(), matmul(ms[form], 67, 45, form & 1, form & 2), t, {1});
  check(hostJit(), {"{t}[3,1,2,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,2,257]"}, DType::f32);
  check(hostJit(), matmul(2, 1001, 301), DType::f32);
  check(hostJit(), matmul(5, 1001, 301, true, true), DType::f32);
  check(sse2Jit(), matmul(3, 67, 45, false, true), DType::f16, {2});
}

// A plain product on the small path writes its blocks straight into the result where they are
// whole vectors of columns (desc::Direct) and takes the tile where they are not: B split across
// threads into blocks of any width (5 × 1024 over K 301, 1.2 MB of B), the dot form (B's k
// contiguous), overlapping row groups (67 rows: 11 · 6 + 1), f64's 8-lane vectors.
TEST(Gemm, SmallPathIntoTheResult) {
  for (const Case& c : {matmul(5, 1024, 301), matmul(3, 1008, 300, false, true), matmul(67, 48, 70),
                        matmul(64, 32, 64, true, false), matmul(7, 40, 9)}) {
    EXPECT_EQ(planOf(c).path, gemm::Path::Small) << c.graph(DType::f32);
    check(hostJit(), c, DType::f32, {1, 2});
  }
  check(hostJit(), matmul(3, 64, 45), DType::f64, {1, 2});
  check(hostJit(), matmul(66, 40, 70), DType::f64, {1});
}

// A batch-1 layer of 256 KiB to 1 MiB of B (mnist_mlp's 784 × 128) splits into blocks for threads
// already awake (Blocking::awakeOnly), of half a step where B is one step wide (8 vectors of 16
// lanes for one row, 4 for two), with a tile spanning all of N so that one thread runs the whole
// of N in one pass (the small driver's whole item). A B of 1 MiB or more keeps waking workers.
// Same bits on one thread (whole) and two (halves); odd N and a partial last vector; A
// transposed; the dot form (B's k contiguous: blocks of rows of W, no half steps).
TEST(Gemm, SmallPathSplitsOneStepWideLayersInHalfSteps) {
  const VectorIsa host = isaOf(hostJit());
  if (!host.avx512) GTEST_SKIP() << "the widths below are AVX-512's";
  const gemm::Blocking mnist = planOf(matmul(1, 128, 784));
  EXPECT_EQ(mnist.path, gemm::Path::Small);
  EXPECT_TRUE(mnist.awakeOnly);
  EXPECT_EQ(mnist.nb, 64);
  EXPECT_EQ(mnist.nBlocks, 2);
  EXPECT_EQ(mnist.ldt, 128) << "the tile spans all of N";
  EXPECT_EQ(mnist.grain, 1);
  const gemm::Blocking two = planOf(matmul(2, 64, 1100));
  EXPECT_EQ(two.nb, 32);
  EXPECT_EQ(two.ldt, 64);
  EXPECT_FALSE(planOf(matmul(1, 128, 2100)).awakeOnly) << "1 MiB of B: any worker";
  EXPECT_EQ(planOf(matmul(1, 128, 400)).nBlocks, 1) << "under 256 KiB: one thread";
  for (const Case& c : {matmul(1, 128, 784), matmul(1, 100, 784), matmul(1, 121, 901, true, false),
                        matmul(1, 128, 784, false, true),
                        matmul(2, 64, 1100), matmul(2, 57, 1200)}) {
    EXPECT_EQ(planOf(c).path, gemm::Path::Small) << c.graph(DType::f32);
    EXPECT_GE(planOf(c).nBlocks, 2) << c.graph(DType::f32);
    check(hostJit(), c, DType::f32, {1, 2, 2});
  }
}

// More than 8 rows take the small path when the product stays in L1 (GemmSmall.cpp): B of at
// most 32 KiB with at least 16 columns, one thread's worth of flops. A is read in place, transposed
// or not; B too when its n is contiguous, else it is converted into one panel of K rows first (by
// the strided packing, which every contraction of the module shares). Rows go in groups of 6 and
// one of the rest (13 = 2·6 + 1; 67 = 11·6 + 1; 66 = 11·6); a narrow N, too many rows and too big
// a B keep the packed path.
TEST(Gemm, SmallPathForProductsInL1) {
  auto path = [](const Case& c) { return planOf(c).path; };
  const Case small[] = {matmul(64, 32, 64),          matmul(13, 17, 33),
                        matmul(66, 40, 70),          matmul(100, 128, 10),
                        matmul(128, 64, 64),         matmul(9, 2000, 4),
                        matmul(64, 64, 32, false, true),  // B converted
                        matmul(64, 32, 64, true, false),  // A transposed, in place
                        matmul(13, 17, 33, true, true),   // both; N = 17: a partial panel of 24
                        matmul(67, 40, 70, false, true),  // K = 70: transposed blocks and a tail
                        matmul(67, 24, 9, true, true)};
  for (const Case& c : small) {
    EXPECT_EQ(path(c), gemm::Path::Small) << c.graph(DType::f32);
    check(hostJit(), c, DType::f32, {1, 2});
  }
  EXPECT_TRUE(gemm::smallConvertsB(formOf(matmul(64, 64, 32, false, true))));
  EXPECT_FALSE(gemm::smallConvertsB(formOf(matmul(64, 32, 64, true, false))));
  // Rows in groups of 6, the last overlapping the one before when M is no multiple (13: rows 0–5,
  // 6–11, 7–12; 100, 67, 9): one axpy kernel for all of them, no kernel for the rest.
  {
    std::string ir;
    compileAll(hostJit(),
               {matmul(100, 128, 10), matmul(67, 40, 70, false, true), matmul(13, 17, 33), matmul(9, 2000, 4)},
               DType::f32, isaOf(hostJit()), &ir);
    std::vector<std::string> kernels;  // @kiln.gemm.axpy.f32.vLANES.mROWS.vV
    const std::string define = "define internal void @kiln.gemm.axpy.";
    for (size_t at = ir.find(define); at != std::string::npos; at = ir.find(define, at + 1))
      kernels.push_back(ir.substr(at + define.size(), ir.find('(', at) - at - define.size()));
    ASSERT_EQ(kernels.size(), 1u) << ::testing::PrintToString(kernels);
    EXPECT_NE(kernels[0].find(".m6."), std::string::npos) << kernels[0];
    for (bool wide : {false, true}) {
      EXPECT_EQ(gemm::smallRowGroups(13, wide), (std::vector<int>{6, 6}));
      EXPECT_EQ(gemm::smallRowGroups(12, wide), (std::vector<int>{6}));
    }
    EXPECT_EQ(gemm::smallRowGroups(7, false), (std::vector<int>{4, 3})) << "up to 8 rows: groups of at most 4";
    EXPECT_EQ(gemm::smallRowGroups(7, true), (std::vector<int>{7})) << "AVX-512's 32 registers: one group";
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check(hostJit(), matmul(13, 17, 33, ta, tb), DType::f64, {1});
      // f16 and bf16: A converted into rows, B converted to f32 (kernels of their own).
      check(hostJit(), matmul(19, 33, 21, ta, tb), DType::f16, {1});
      check(hostJit(), matmul(19, 33, 21, ta, tb), DType::bf16, {1});
    }
  check(hostJit(), {"{t}[3,20,30]", "{t}[30,48]", "matmul", "", "{t}[3,20,48]"}, DType::f32);
  EXPECT_EQ(path({"{t}[3,20,30]", "{t}[30,48]", "matmul", "", "{t}[3,20,48]"}), gemm::Path::Small);
  check(hostJit(), {"{t}[3,30,20]", "{t}[3,48,30]", "matmul", "transpose_a=true, transpose_b=true", "{t}[3,20,48]"},
        DType::f32);
  // Other vector widths: AVX-512's 16 lanes (run on the host, LLVM splits the vectors), SSE2's 4.
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  check(hostJit(), matmul(67, 40, 70, true, true), DType::f32, {1}, avx512);
  check(sse2Jit(), matmul(67, 40, 70, true, true), DType::f32, {1});
  // The converted B's panel is as wide as its block, which the strided packing divides by at run
  // time; in a module with a packed contraction that shares the routine, both stay right.
  const std::vector<Case> shared{matmul(64, 64, 32, false, true), matmul(33, 257, 300, false, true)};
  const VectorIsa isa = isaOf(hostJit());
  std::vector<Compiled> kernels = compileAll(hostJit(), shared, DType::f32, isa);
  for (size_t i = 0; i < shared.size(); ++i) verify(kernels[i], shared[i], DType::f32, {1, 2}, isa);
  // A layer's 10 outputs (mnist_mlp's last, 100 × 128 · 128 × 10): one masked vector of columns.
  check(hostJit(), matmul(100, 10, 128), DType::f32, {1, 2});
  check(hostJit(), matmul(100, 10, 128, false, true), DType::f32, {1});
  check(sse2Jit(), matmul(100, 10, 128), DType::f32, {1});
  check(*makeJit("haswell"), matmul(100, 10, 128, true, true), DType::f32, {1});
  EXPECT_EQ(path(matmul(100, 10, 128)), gemm::Path::Small);
  const Case packed[] = {matmul(100, 7, 128), matmul(129, 32, 64), matmul(64, 96, 100),
                         matmul(64, 96, 100, false, true), matmul(128, 64, 128)};
  for (const Case& c : packed) EXPECT_EQ(path(c), gemm::Path::Packed) << c.graph(DType::f32);
}

// K too deep to keep B packed over all of K (from about 8200 with N of 128 and more on AVX2) is
// split into parts whose partial products are summed in a fixed order (Gemm.cpp): every transpose
// form, f64, a batch.
TEST(Gemm, SplitK) {
  std::string ir;
  compileAll(hostJit(), {matmul(33, 130, 9001)}, DType::f32, isaOf(hostJit()), &ir);
  EXPECT_NE(definition(ir, "gemm0").find("@kiln.gemm.split.reduce."), std::string::npos) << ir;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check(hostJit(), matmul(33, 130, 9001, ta, tb), DType::f32);
  check(hostJit(), matmul(20, 70, 9001, true, false), DType::f64);
  check(hostJit(), {"{t}[2,17,9001]", "{t}[9001,130]", "matmul", "", "{t}[2,17,130]"}, DType::f32);
  // B narrow enough to keep packed, but two threads would each pack all of it for their rows of
  // one M block (a first convolution's weight gradient): K is split instead.
  const Case narrow = matmul(33, 9, 50000, true, false);
  EXPECT_EQ(planOf(narrow).path, gemm::Path::SplitK);
  check(hostJit(), narrow, DType::f32);
  // A small batch's layer (mnist_mlp's first, 100 × 784 · 784 × 128): M is one block that two
  // threads would split, each packing all of B; K splits into two parts of two slices, and the
  // second phase has blocks for both threads.
  const Case layer = matmul(100, 128, 784);
  const gemm::Blocking plan = planOf(layer);
  EXPECT_EQ(plan.path, gemm::Path::SplitK);
  EXPECT_EQ(plan.splits, 2);
  EXPECT_GE(plan.reduceItems, 2);
  check(hostJit(), layer, DType::f32, {1, 2});
  check(hostJit(), matmul(100, 128, 784, true, true), DType::f32, {2});
  // Three parts of one column block would leave one of two threads idle a third of the time: a
  // batch of 64 through a layer of 1000 inputs and 512 outputs (64 × 1000 · 1000 × 512) narrows its
  // column blocks into an even number of items, on every ISA that splits its K in three.
  for (const VectorIsa& isa : {isaOf(hostJit()), isaOf(*makeJit("skylake-avx512")), isaOf(sse2Jit())}) {
    const gemm::Blocking odd = gemm::blockingFor(formOf(matmul(64, 512, 1000)), AccType::F32, isa);
    if (odd.path != gemm::Path::SplitK) continue;
    EXPECT_EQ(odd.items % 2, 0) << isa.f32Lanes << " lanes: " << odd.splits << " parts, " << odd.nBlocks << " column blocks";
  }
  EXPECT_EQ(planOf(matmul(64, 512, 1000)).path, gemm::Path::SplitK);
  check(hostJit(), matmul(64, 512, 1000), DType::f32, {1, 2});
  check(hostJit(), matmul(64, 130, 1000, true, false), DType::f32, {2});
  // Three K slices make no parts of two slices each: the packed path. The slice depth is the ISA's
  // (AVX-512's is shallower), so K is found for each ISA rather than fixed.
  for (const VectorIsa& isa : {isaOf(hostJit()), isaOf(*makeJit("skylake-avx512")), isaOf(sse2Jit())}) {
    auto plan = [&](int64_t k) { return gemm::blockingFor(formOf(matmul(100, 128, k)), AccType::F32, isa); };
    EXPECT_EQ(plan(784).path, gemm::Path::SplitK) << isa.f32Lanes << " lanes";
    EXPECT_EQ(plan(784).splits, 2) << isa.f32Lanes << " lanes";
    int64_t three = 300;
    while (three < 2000 && plan(three).kBlocks != 3) three += 20;
    ASSERT_EQ(plan(three).kBlocks, 3) << isa.f32Lanes << " lanes: no K of three slices below 2000";
    EXPECT_EQ(plan(three).path, gemm::Path::Packed) << isa.f32Lanes << " lanes, K " << three << ": three slices";
  }
}

// A product of one slice of at most 48 k hands each panel's columns of its tile to the epilogue as
// soon as the micro-kernels finish them (Blocking::epiloguePanels; cnn's first convolution); deeper
// ones hand over the whole tile after its last panel. Blocks whose rows are not whole register
// tiles take the tile, so these run the epilogue per panel, the last one partial (600 columns:
// 18 panels and 24 columns), on 1 and 2 threads.
TEST(Gemm, ShallowSliceHandsPanelsToTheEpilogue) {
  EXPECT_EQ(planOf(matmul(37, 600, 20)).epiloguePanels, 1);
  EXPECT_EQ(planOf(matmul(37, 600, 300)).epiloguePanels, 0);
  const Conv shallow{3, 2, 20, 20, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // K 18, 13 channels
  EXPECT_EQ(planOf(shallow.forward()).epiloguePanels, 1);
  for (const Case& c : {matmul(37, 600, 20), matmul(37, 600, 20, true, true), shallow.forward()})
    check(hostJit(), c, DType::f32, {1, 2});
  check(hostJit(), matmul(37, 600, 20), DType::f64, {2});
}

// AVX-512's f32 register tile is 8 × 48; products whose rows 8-row tiles would pad take 10 × 32 or
// 12 × 32 where that saves more than 3 % of the rows (GemmBlocking.cpp's tileShape): mnist_mlp's
// batch of 100, 36 rows. f64 and AVX2 keep their tiles; the products stay right on every path and
// transpose, on 1 and 2 threads.
TEST(Gemm, NarrowTileRows) {
  const VectorIsa avx512 = isaOf(*makeJit("skylake-avx512"));
  auto tile = [&](const Case& c, AccType acc = AccType::F32) {
    const gemm::Blocking p = gemm::blockingFor(formOf(c), acc, avx512);
    return std::array<int, 2>{p.mr, p.nr};
  };
  using T = std::array<int, 2>;
  EXPECT_EQ(tile(matmul(100, 128, 784)), (T{10, 32}));
  EXPECT_EQ(tile(matmul(100, 10, 1280)), (T{10, 32}));
  EXPECT_EQ(tile(matmul(36, 100, 150)), (T{12, 32}));
  EXPECT_EQ(tile(matmul(64, 200, 150)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(32, 9, 50000, true, false)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(300, 200, 150)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(10000, 512, 1000)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(1024, 1024, 1024)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(64, 200, 150), AccType::F64), (T{12, 16}));
  // A transposed B (a layer's forward product) of up to 64 rows that would take 8 × 48 takes 8 × 32
  // where N makes four equal blocks of its panels, and splits its columns first.
  EXPECT_EQ(tile(matmul(16, 128, 784, false, true)), (T{8, 32}));
  EXPECT_EQ(tile(matmul(64, 512, 1000, false, true)), (T{8, 32}));
  EXPECT_EQ(tile(matmul(72, 128, 784, false, true)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(36, 128, 784, false, true)), (T{12, 32}));
  EXPECT_EQ(tile(matmul(40, 520, 1000, false, true)), (T{8, 48}));
  EXPECT_EQ(tile(matmul(64, 128, 784)), (T{8, 48}));
  for (int64_t m : {24, 48, 64}) {
    const gemm::Blocking p = gemm::blockingFor(formOf(matmul(m, 128, 784, false, true)), AccType::F32, avx512);
    EXPECT_EQ(p.path, gemm::Path::Packed) << m << " rows";
    EXPECT_EQ(p.mBlocks, 1) << m << " rows";
    EXPECT_EQ(p.nBlocks, 4) << m << " rows";
  }
  check(hostJit(), matmul(24, 128, 784, false, true), DType::f32, {1, 2});
  check(hostJit(), matmul(40, 256, 300, false, true), DType::f32, {2});
  check(hostJit(), matmul(16, 130, 784, false, true), DType::f32, {2});
  const VectorIsa avx2 = isaOf(*makeJit("haswell"));
  EXPECT_EQ(gemm::blockingFor(formOf(matmul(64, 200, 150)), AccType::F32, avx2).mr, 6);

  const VectorIsa host = isaOf(hostJit());
  for (int64_t m : {10, 16, 36, 64, 100})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(m, 70, 300, ta, tb), DType::f32, {1, 2});
  check(hostJit(), matmul(64, 128, 784), DType::f32, {1, 2});  // split K
  // A tile height the rule never picks (kiln_gemm_tune --mr), with partial panels.
  VectorIsa forced = host;
  forced.gemmMr = host.avx512 ? 14 : 4;
  check(hostJit(), matmul(37, 70, 300), DType::f32, {1, 2}, forced);
  check(hostJit(), matmul(37, 70, 300, true, true), DType::f32, {2}, forced);
}

// A block's last panel short of columns runs the micro-kernel of as many vectors as its columns
// need, which leaves the tile's other columns alone: products whose N leaves 1, 4, 16 or 17 columns
// over whole panels, in every transpose form, over several K slices and split K, and convolutions
// of 14 × 14 images (196 = 6 · 32 + 4), on 1 and 2 threads, f32 and f64.
TEST(Gemm, NarrowLastPanel) {
  for (int64_t n : {1, 4, 16, 17, 36, 196}) {
    const Case c = matmul(37, n, 2000);
    EXPECT_NE(planOf(c).path, gemm::Path::Small) << n << " columns";
    EXPECT_GT(planOf(c).kBlocks, 1);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(hostJit(), matmul(37, n, 2000, ta, tb), DType::f32, {1, 2});
  }
  check(hostJit(), matmul(37, 36, 2000), DType::f64, {1, 2});
  const Case deep = matmul(64, 20, 20000, true, false);
  EXPECT_EQ(planOf(deep).path, gemm::Path::SplitK);
  check(hostJit(), deep, DType::f32, {1, 2});
  const Conv conv = kConvs[6];
  check(hostJit(), conv.forward(), DType::f32, {1, 2});
  check(hostJit(), conv.gradInput(), DType::f32, {1, 2});
}

// kiln_gemm_tune's limits (VectorIsa::gemmKc, gemmMb, gemmNb) bound the packed path's blocks, rounded
// to the register tile, and the product stays right under any of them.
TEST(Gemm, TuningLimits) {
  VectorIsa isa = isaOf(hostJit());
  const Case c = matmul(130, 300, 700);
  const gemm::Blocking own = gemm::blockingFor(formOf(c), AccType::F32, isa);
  isa.gemmKc = 100, isa.gemmMb = 20, isa.gemmNb = 40;
  const gemm::Blocking tuned = gemm::blockingFor(formOf(c), AccType::F32, isa);
  EXPECT_LE(tuned.kc, 100);
  EXPECT_EQ(tuned.kBlocks, 7);
  EXPECT_LE(tuned.mb, gemm::roundUp(20, tuned.mr));
  EXPECT_LE(tuned.nb, gemm::roundUp(40, tuned.nr));
  EXPECT_GT(own.kc, tuned.kc);
  check(hostJit(), c, DType::f32, {1, 2}, isa);
  check(hostJit(), matmul(130, 300, 700, true, true), DType::f32, {2}, isa);
}

// f32 products of at least 10^8 FLOPs on AVX-512 cut K into deeper slices (GemmBlocking.cpp's
// kF32Kc) than smaller ones, and are still exact against the interpreter: 200×260·1000 (1.04·10^8
// FLOPs) in three slices of 334, a tenth of its rows (10^7 FLOPs) in six of 167.
TEST(Gemm, DeepF32ProductsTakeDeeperSlices) {
  const VectorIsa isa = isaOf(hostJit());
  if (!isa.avx512) GTEST_SKIP() << "deeper slices are for AVX-512";
  const Case deep = matmul(200, 260, 1000), shallow = matmul(20, 260, 1000);
  const gemm::Blocking big = gemm::blockingFor(formOf(deep), AccType::F32, isa);
  const gemm::Blocking small = gemm::blockingFor(formOf(shallow), AccType::F32, isa);
  EXPECT_EQ(big.kBlocks, 3);
  EXPECT_EQ(small.kBlocks, 6);
  EXPECT_GT(big.kc, small.kc);
  check(hostJit(), deep, DType::f32, {1, 2}, isa);
  check(hostJit(), matmul(200, 260, 1000, true, false), DType::f32, {2}, isa);
}

// Contractions of one module share the micro-kernel, the packing routines of strided operands and
// the drivers: one definition each, found by name; each keeps its own descriptor.
TEST(Gemm, SharedFunctions) {
  const std::vector<Case> cases{matmul(33, 257, 300), matmul(65, 100, 70, true, false), matmul(33, 257, 300),
                                matmul(2, 90, 77, false, true)};
  const VectorIsa isa = isaOf(hostJit());
  std::string ir;
  std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::f32, isa, &ir);
  for (size_t i = 0; i < cases.size(); ++i) verify(kernels[i], cases[i], DType::f32, {1, 2}, isa);
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = ir.find(text); at != std::string::npos; at = ir.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("define internal void @kiln.gemm.ukernel."), 4u)
      << "the tile's and the last panel's narrow one, from panels of A and from its rows in place";
  EXPECT_EQ(count("define internal void @kiln.gemm.item."), 1u);
  EXPECT_EQ(count("define internal void @kiln.gemm.chunk."), 1u);
  EXPECT_EQ(count("define internal void @kiln.gemm.pack."), 2u) << "k or rows contiguous, for A and B alike";
  EXPECT_EQ(count("define internal void @kiln.gemm.small.item."), 1u);
  EXPECT_EQ(count(".desc = internal constant"), 4u);
}

// A small GEMM stays on one thread and needs one scratch slot; a large one one per thread.
TEST(Gemm, ScratchAndThreads) {
  auto kernel = [](const Case& c) {
    ir::Graph g = ir::parseGraph(c.graph(DType::f32), "gemm_test.kir");
    return kernels::lowerGraph(g).at(0);
  };
  const kernels::Kernel small = kernel(matmul(64, 32, 64)), large = kernel(matmul(512, 512, 512));
  const VectorIsa isa = isaOf(hostJit());
  EXPECT_EQ(contractionScratchBytes(small, isa, 4), contractionScratchBytes(small, isa, 1));
  EXPECT_GT(contractionScratchBytes(large, isa, 2), contractionScratchBytes(large, isa, 1));
  EXPECT_EQ(contractionScratchBytes(kernel(matmul(0, 7, 33)), isa, 2), 0);
}

// A library's scratch covers what its kernels' code reads from their descriptors: every
// contraction's `NAME.desc` in the object (where its slots start and how many bytes each takes, as
// the compiled drivers read them) fits the scratch its layout asks the runtime for on one and two
// threads. Libraries render bf16 products without AMX tiles (compileObject), and their layout
// once sized the scratch for the tiles' blocking instead: cnn's second convolution at batch 2
// (f32 panels, 344 832 bytes a slot) wrote 16 KiB past a 328 448-byte scratch on an AMX host.
TEST(Gemm, LibraryScratchCoversItsDescriptors) {
  constexpr Conv kCnnConv2{2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  const std::vector<Case> cases{kCnnConv2.forward(), kCnnConv2.gradWeight(), kCnnConv2.gradInput(),
                                matmul(100, 128, 784), matmul(256, 256, 256, true, false), matmul(5, 33, 70)};
  for (DType t : {DType::bf16, DType::f32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.graph(t));
      const ProgramObject object = compileObject(ir::parseGraph(c.graph(t), "library_scratch.kir"));
      auto file = llvm::object::ObjectFile::createObjectFile(
          llvm::MemoryBufferRef(object.object, "library_scratch.o"));
      ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
      int descriptors = 0;
      for (const llvm::object::SymbolRef& symbol : (*file)->symbols()) {
        llvm::Expected<llvm::StringRef> name = symbol.getName();
        ASSERT_TRUE(static_cast<bool>(name));
        if (!name->ends_with(".desc")) continue;
        const std::string kernel = name->drop_back(5).str();
        auto call = std::find_if(object.layout.kernels.begin(), object.layout.kernels.end(),
                                 [&](const ProgramLayout::KernelCall& k) { return k.name == kernel; });
        ASSERT_NE(call, object.layout.kernels.end()) << kernel;
        llvm::Expected<llvm::object::section_iterator> section = symbol.getSection();
        ASSERT_TRUE(static_cast<bool>(section));
        llvm::Expected<llvm::StringRef> contents = (*section)->getContents();
        ASSERT_TRUE(static_cast<bool>(contents));
        const uint64_t at = llvm::cantFail(symbol.getValue());
        ASSERT_LE(at + gemm::desc::Count * 8, contents->size());
        auto field = [&](int i) {
          int64_t v;
          std::memcpy(&v, contents->data() + at + static_cast<uint64_t>(i) * 8, 8);
          return v;
        };
        ++descriptors;
        if (field(gemm::desc::Items) == 0) continue;
        const int64_t needed = field(gemm::desc::SlotsOffset) + field(gemm::desc::SlotBytes);  // one thread: one slot
        EXPECT_GE(call->scratchBase + call->scratchPerThread, needed) << kernel;
        EXPECT_GE(call->scratchBase + 2 * call->scratchPerThread, needed) << kernel;
      }
      EXPECT_GE(descriptors, 1);
    }
  }
}

}  // namespace
}  // namespace kiln::cpu::gemmtest
