// The generated GEMM of contraction kernels (codegen/cpu/Gemm.h) against the reference interpreter, by op, dtype
// and ISA: matmul with transposes and broadcast batches, conv2d with strides, padding, dilation and groups and both
// convolution gradients over awkward sizes; f32, f16, bf16, f64, i32 and i64 operands; the host's vector ISA, plain
// x86-64 (SSE2), AVX-512 (compiled for Skylake-X, its IR run on the host) and bf16 dot products (k pairs).
#include "tests/codegen/GemmTestSupport.h"

#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/GemmEmitter.h"
#include "support/PeakLoops.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::cpu::gemmtest {
namespace {

// Sizes from 1, 7, 33, 257 and 1000: one or many M blocks (144 rows) and N blocks (512
// columns), one or many K slices (256), edge panels everywhere, one thread or the pool. K = 0
// gives zeros, M = 0 nothing; M <= 8 takes the small-M path (more in GemmPathTest.cpp).
TEST(Gemm, MatMulShapes) {
  const int64_t shapes[][3] = {{1, 1, 1},     {33, 7, 1000}, {257, 1000, 33}, {1000, 33, 257},
                               {3, 200, 9000}, {7, 33, 0},    {0, 7, 33}};
  for (const auto& s : shapes) check(hostJit(), matmul(s[0], s[1], s[2]), DType::f32);
}

// A plain product's blocks of whole register tiles of rows and whole vectors of columns are
// accumulated in the result itself (desc::Direct: no tile, no epilogue copy), over several K slices
// of the packed path, a block's last panel by a narrower micro-kernel (560 columns: 512, then 48,
// a panel and a vector; 784: 416, then 368), rows off vector boundaries too (570 columns: 2280
// bytes a row); blocks at a ragged edge of M (1154 rows: eight blocks of 144, then 2) or of N
// (570 columns: 288, then 282) take the tile, beside them in the same product; f64 and i64
// accumulate in their own types the same way.
TEST(Gemm, WholeBlocksIntoTheResult) {
  for (const Case& c : {matmul(1152, 128, 600), matmul(1154, 128, 600, true, false), matmul(576, 560, 600, false, true),
                        matmul(100, 784, 128, false, true), matmul(120, 570, 300)})
    check(hostJit(), c, DType::f32, {1, 2});
  check(hostJit(), matmul(1152, 128, 600), DType::f64, {2});
  check(hostJit(), matmul(1152, 128, 600), DType::i64, {2});
}

// Batched results go straight into the result too, each batch at its [M, N] of the result-level
// view: a batched matmul (packed path, and small path by its rows), convolutions of whole register
// tiles of channels and whole vectors of pixels (forward and input gradient: one batch per image),
// and weight gradients — with batches whose blocks take the tile at the edges beside them.
TEST(Gemm, BatchedBlocksIntoTheResult) {
  for (const Case& c : {Case{"{t}[3,48,160]", "{t}[3,160,96]", "matmul", "", "{t}[3,48,96]"},
                        Case{"{t}[3,50,160]", "{t}[3,96,160]", "matmul", "transpose_b=true", "{t}[3,50,96]"},
                        Case{"{t}[4,6,64]", "{t}[4,64,48]", "matmul", "", "{t}[4,6,48]"},
                        Conv{3, 2, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1}.forward(),
                        Conv{2, 3, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}.forward(),
                        Conv{3, 24, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1}.gradInput(),
                        Conv{3, 2, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1}.gradWeight()})
    check(hostJit(), c, DType::f32, {1, 2});
  check(hostJit(), Conv{3, 2, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1}.forward(), DType::f64, {2});
}

TEST(Gemm, MatMulTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check(hostJit(), matmul(33, 257, 257, ta, tb), DType::f32);
}

TEST(Gemm, MatMulBroadcastBatch) {
  check(hostJit(), {"{t}[3,1,7,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,7,257]"}, DType::f32);
  check(hostJit(), {"{t}[33,7]", "{t}[2,257,33]", "matmul", "transpose_a=true, transpose_b=true", "{t}[2,7,257]"},
        DType::f32);
}

TEST(Gemm, Conv2d) {
  for (const Conv& c : {kConvs[0], kConvs[1], kConvs[4]}) check(hostJit(), c.forward(), DType::f32);
}

TEST(Gemm, Conv2dGradWeight) {
  for (const Conv& c : {kConvs[0], kConvs[1], kConvs[3], kConvs[4], kConvs[6], kConvs[7]})
    check(hostJit(), c.gradWeight(), DType::f32);
}

TEST(Gemm, Conv2dGradInput) {
  for (const Conv& c : {kConvs[1], kConvs[2], kConvs[4]}) check(hostJit(), c.gradInput(), DType::f32);
}

TEST(Gemm, OperandTypes) {
  check(hostJit(), matmul(33, 257, 257), DType::f16);
  check(hostJit(), matmul(33, 257, 257, true, false), DType::bf16);
  check(hostJit(), matmul(33, 257, 257, false, true), DType::f64);
  check(hostJit(), matmul(33, 257, 257, true, true), DType::i32);
  check(hostJit(), matmul(33, 257, 257), DType::i64);
  check(hostJit(), kConvs[1].gradWeight(), DType::f16, {1});
}

// A module may link the shared routines prebuilt with kiln instead of defining them
// (VectorIsa::linkedGemm, PrebuiltGemm.h): it then defines none, and every path and operand type
// still computes the product (cpu_backend_tests compares whole programs bit for bit).
TEST(Gemm, PrebuiltRoutines) {
  VectorIsa isa = isaOf(hostJit());
  isa.linkedGemm = hostJit().prebuiltGemm();
  if (!isa.linkedGemm) GTEST_SKIP() << "kiln has no prebuilt GEMM routines for this CPU";
  const std::vector<Case> cases{matmul(300, 200, 150, true, false), matmul(100, 128, 784, false, true),
                                matmul(5, 33, 70, false, true), matmul(3, 33, 70, true, false),
                                matmul(13, 64, 64, false, true), kConvs[0].gradWeight()};
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64}) {
    std::string ir;
    std::vector<Case> typed = cases;
    if (!isFloat(t)) typed.pop_back();  // convolutions take float operands
    std::vector<Compiled> kernels = compileAll(hostJit(), typed, t, isa, &ir);
    EXPECT_EQ(ir.find("define internal void @kiln.gemm."), std::string::npos) << dtypeName(t);
    EXPECT_NE(ir.find("declare void @kiln.gemm."), std::string::npos) << dtypeName(t);
    for (size_t i = 0; i < kernels.size(); ++i) verify(kernels[i], typed[i], t, {1, 2}, isa);
  }
}

// Plain x86-64: SSE2 vectors of 4 floats, no FMA, f16 converted with integer operations.
TEST(Gemm, Sse2) {
  EXPECT_EQ(isaOf(sse2Jit()).f32Lanes, 4);
  check(sse2Jit(), matmul(33, 257, 257, true, true), DType::f16, {2});
  check(sse2Jit(), matmul(33, 7, 300), DType::f64, {2});
  check(sse2Jit(), matmul(33, 7, 300, false, true), DType::i64, {2});
  check(sse2Jit(), kConvs[1].gradInput(), DType::bf16, {2});
}

// AVX-512 code cannot run on every machine: it is compiled (verified, optimized, assembled) for
// Skylake-X, and the same IR — its 12 × 32 tiles, 16-lane vectors, 16 × 16 transposes and masked
// 16-bit loads — runs on the host, where LLVM splits the wide vectors.
TEST(Gemm, Avx512) {
  auto jit = makeJit("skylake-avx512");
  const VectorIsa avx512 = isaOf(*jit);
  EXPECT_EQ(avx512.f32Lanes, 16);
  EXPECT_NO_THROW(compile(*jit, matmul(33, 257, 257, false, true), DType::f32, avx512));
  EXPECT_NO_THROW(compile(*jit, kConvs[1].forward(), DType::bf16, avx512));
  check(hostJit(), matmul(257, 1000, 33, false, true), DType::f32, {2}, avx512);
  check(hostJit(), kConvs[1].forward(), DType::f16, {1}, avx512);
  check(hostJit(), kConvs[2].gradInput(), DType::f64, {1}, avx512);
  check(hostJit(), matmul(7, 33, 300, true, false), DType::i64, {1}, avx512);
}

// bf16 operands on a CPU with vdpbf16ps (AVX512-BF16) are packed as k pairs, 32 bits each, and
// multiplied by the dot-product micro-kernel (GemmEmitter.h's usesBf16Pairs). The path runs here
// emulated (VectorIsa::emulateBf16Dot: the same packing, each vdpbf16ps as the two FMAs it
// computes) on the host's vectors, AVX-512's 16 lanes and SSE2's 4, over odd K (the last pair half zero),
// partial panels, every transpose (both packings of both operands), split K, a broadcast batch, a
// product that fits L1 (whose f32 path is the small one) and convolutions, whose windows are packed
// through their index maps as f32 and rewritten as pairs (emitPairPackFunction): forward, both
// gradients, with groups, stride, padding and dilation. Products of at most 8 rows, and of a K under
// 16 (a convolution of one or two input channels: the pairs would not pay for their packing), keep
// converting to f32.
// A 1×1 convolution of stride 1 over 17 channels: its windows' rows are contiguous, and K is odd.
constexpr Conv kOneByOne{2, 17, 6, 6, 7, 1, 1, 1, 1, 1, 0, 0, 1, 1};

TEST(Gemm, Bf16PairsEmulated) {
  constexpr Conv kThreeGroups{1, 12, 8, 10, 6, 2, 3, 3, 3, 3, 2, 0, 1, 2};  // kConvs[2], K 24 instead of 12
  // Window panels packed straight into k pairs by every way of GemmPack.cpp: periodic (kConvs[0],
  // K 27: an odd last pair), general with quotients (kConvs[1]'s input gradient), runs and their
  // breaks (the weight gradients), contiguous rows (a 1×1 convolution over 17 channels).
  for (VectorIsa isa : {isaOf(hostJit()), isaOf(*makeJit("skylake-avx512")), isaOf(sse2Jit())}) {
    SCOPED_TRACE(fmt::format("{} lanes", isa.f32Lanes));
    isa.avx512bf16 = false;  // emulated even where this CPU has vdpbf16ps
    isa.amx = false;         // and not on its tiles
    isa.emulateBf16Dot = true;
    std::string ir;
    const std::vector<Case> cases{matmul(33, 257, 257),
                                  matmul(257, 1000, 33, false, true),
                                  matmul(150, 45, 301, true, false),
                                  matmul(33, 130, 9001, true, true),
                                  matmul(100, 128, 784),
                                  {"{t}[3,1,20,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,20,257]"},
                                  matmul(64, 64, 32, false, true),  // fits L1: packed, not the small path
                                  kConvs[0].forward(),
                                  kConvs[1].gradInput(),
                                  kConvs[6].gradWeight(),
                                  kConvs[4].gradWeight(),
                                  kConvs[7].gradWeight(),
                                  kOneByOne.forward(),
                                  kThreeGroups.forward(),
                                  kConvs[2].forward(),  // K 12
                                  matmul(5, 33, 70, false, true)};
    std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::bf16, isa, &ir);
    EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32."), std::string::npos);
    EXPECT_NE(ir.find(".bf16dot.emulated("), std::string::npos) << "the pair micro-kernel";
    EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v" + std::to_string(isa.f32Lanes) + ".pairs.rows("), std::string::npos);
    EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v" + std::to_string(isa.f32Lanes) + ".pairs.k("), std::string::npos);
    EXPECT_EQ(planOf(cases[3]).path, gemm::Path::SplitK);
    for (size_t i = 0; i < kernels.size(); ++i) {
      const gemm::Blocking plan = gemm::blockingFor(kernels[i].form, AccType::F32, isa, DType::bf16);
      const bool pairs = gemm::usesBf16Pairs(kernels[i].form, plan, DType::bf16, isa);
      EXPECT_EQ(pairs, i + 2 < cases.size()) << cases[i].graph(DType::bf16);
      verify(kernels[i], cases[i], DType::bf16, {1, 2}, isa);
    }
  }
}

// The native path: compiled for Cooper Lake (vdpbf16ps on zmm, no AMX), and where this CPU has
// AVX512-BF16, run against the interpreter and bit for bit against the emulation (the same sums
// in the same order; random operands in [-1, 1] have no subnormal products), its tiles left aside.
TEST(Gemm, Bf16DotProducts) {
  const std::vector<Case> cases{matmul(33, 257, 257, true, false), matmul(257, 100, 33, false, true),
                                matmul(33, 130, 9001)};
  auto spr = makeJit("cooperlake");
  const VectorIsa native = isaOf(*spr);
  ASSERT_FALSE(native.amx);
  ASSERT_TRUE(native.avx512bf16);
  std::string ir;
  EXPECT_NO_THROW(compileAll(*spr, cases, DType::bf16, native, &ir));
  EXPECT_NE(ir.find("@llvm.x86.avx512bf16.dpbf16ps.512("), std::string::npos);
  EXPECT_NE(ir.find(".bf16dot("), std::string::npos);
  VectorIsa host = isaOf(hostJit());
  // Where vdpbf16ps is slower than the FMAs, bf16 programs convert to f32 instead (unless AMX tiles
  // multiply the pairs); it is still run.
  EXPECT_EQ(host.bf16Dot(), host.avx512bf16 && host.avx512 && (host.amx || bf16DotOutrunsFma()));
  host.amx = false;
  host.bf16DotPays = true;
  if (!host.avx512bf16 || !host.avx512)
    GTEST_SKIP() << "this CPU has no AVX512-BF16: the native kernels were compiled, not run";
  VectorIsa emulated = host;
  emulated.avx512bf16 = false;
  emulated.emulateBf16Dot = true;
  std::vector<Compiled> got = compileAll(hostJit(), cases, DType::bf16, host);
  std::vector<Compiled> want = compileAll(hostJit(), cases, DType::bf16, emulated);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verify(got[i], cases[i], DType::bf16, {1, 2}, host)
                    .identical(verify(want[i], cases[i], DType::bf16, {1}, emulated)))
        << cases[i].graph(DType::bf16);
}

// AMX tiles (GemmAmx.cpp): the pair path blocked 32 × 32 with K slices padded to 32, A packed in
// tile rows by both packings, B the pair path's panels. Emulated here (VectorIsa::emulateAmx: the
// vector micro-kernel reads A's tile rows) over K short of a multiple of 32 and odd, partial panels
// of rows and of columns (a last panel of at most 16 takes one tile of columns), every transpose,
// split K, a broadcast batch and convolutions (their windows, and the flipped weights of an input
// gradient, packed through their maps and rewritten as pairs or tiles), on one thread and two.
std::vector<Case> amxCases() {
  return {matmul(33, 257, 257),
          matmul(257, 1000, 33, false, true),
          matmul(150, 45, 301, true, false),
          matmul(33, 130, 9001, true, true),
          matmul(100, 128, 784),
          {"{t}[3,1,20,33]", "{t}[5,33,257]", "matmul", "", "{t}[3,5,20,257]"},
          matmul(64, 64, 32, false, true),
          kConvs[0].forward(),
          kConvs[1].gradInput(),
          kConvs[6].gradWeight(),
          kConvs[7].gradWeight(),
          kOneByOne.forward(),
          kConvs[5].forward()};
}

TEST(Gemm, AmxTilesEmulated) {
  VectorIsa isa = isaOf(hostJit());
  if (!isa.avx512) GTEST_SKIP() << "the AMX path is emulated on AVX-512 CPUs only";
  isa.amx = false;
  isa.emulateAmx = true;
  isa.emulateBf16Dot = !isa.bf16Dot();
  const std::vector<Case> cases = amxCases();
  std::string ir;
  std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::bf16, isa, &ir);
  EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32.32x32.v16.amx.emulated"), std::string::npos);
  EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v16.pairs.amx.k("), std::string::npos);
  EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v16.pairs.amx.rows("), std::string::npos);
  EXPECT_NE(ir.find("@kiln.gemm.pack.bf16.v16.pairs.rows("), std::string::npos) << "B: the pair path's panels";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const gemm::Blocking plan = gemm::blockingFor(kernels[i].form, AccType::F32, isa, DType::bf16);
    EXPECT_TRUE(plan.amx && plan.mr == gemm::kAmxRows && plan.kc % gemm::kAmxK == 0) << cases[i].graph(DType::bf16);
    verify(kernels[i], cases[i], DType::bf16, {1, 2}, isa);
  }
  EXPECT_EQ(gemm::blockingFor(kernels[3].form, AccType::F32, isa, DType::bf16).path, gemm::Path::SplitK);
  // Convolution windows take the tiles too (packed through their maps, then rewritten); f32
  // operands stay off them.
  EXPECT_TRUE(gemm::blockingFor(formOf(kConvs[0].forward()), AccType::F32, isa, DType::bf16).amx);
  // A K under 16 (here 12) would pad every tile product's 32 k: widened to f32 instead.
  const Case shallow = kConvs[2].forward();
  EXPECT_FALSE(gemm::blockingFor(formOf(shallow), AccType::F32, isa, DType::bf16).amx);
  verify(compileAll(hostJit(), {shallow}, DType::bf16, isa).at(0), shallow, DType::bf16, {1, 2}, isa);
  EXPECT_NE(ir.find(".pack_a.pairs("), std::string::npos) << "A through its map, in tiles";
  EXPECT_NE(ir.find(".pack_b.pairs("), std::string::npos);
  EXPECT_FALSE(gemm::blockingFor(kernels[0].form, AccType::F32, isa, DType::f32).amx);
}

// Native tiles: compiled for Sapphire Rapids (the tile configuration, tile loads and stores,
// tdpbf16ps), and where this CPU has AMX and Linux grants the process its tile data, run against
// the interpreter.
TEST(Gemm, AmxTiles) {
  auto spr = makeJit("sapphirerapids");
  const VectorIsa native = isaOf(*spr);
  ASSERT_TRUE(native.amx);
  const std::vector<Case> cases = amxCases();
  std::string ir;
  EXPECT_NO_THROW(compileAll(*spr, cases, DType::bf16, native, &ir));
  EXPECT_NE(ir.find("@llvm.x86.tdpbf16ps("), std::string::npos);
  EXPECT_NE(ir.find("@llvm.x86.ldtilecfg("), std::string::npos);
  EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32.32x32.v16.amx.cols16("), std::string::npos);
  EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32.32x32.v16.amx.rows16("), std::string::npos) << "a last panel of 1-16 rows";
  EXPECT_NE(ir.find("@kiln.gemm.ukernel.f32.32x32.v16.amx.arows("), std::string::npos) << "A in place";
  const VectorIsa host = isaOf(hostJit());
  if (!host.amx) GTEST_SKIP() << "this CPU has no AMX (or Linux refused its tile data): compiled, not run";
  std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::bf16, host);
  for (size_t i = 0; i < kernels.size(); ++i) {
    // On the tiles whatever vdpbf16ps's speed here (an H100 host's Sapphire Rapids, whose vdpbf16ps
    // is slower than its FMAs, once converted them to f32: 1024³ 720 → 236 GFLOP/s on 2 threads).
    EXPECT_TRUE(gemm::blockingFor(kernels[i].form, AccType::F32, host, DType::bf16).amx) << cases[i].graph(DType::bf16);
    verify(kernels[i], cases[i], DType::bf16, {1, 2}, host);
  }
}

// On native AMX tiles, bf16 A whose k is contiguous is read in place by the tile loads, its rows
// lda apart; a slice's last kc mod 32 k and a block's last, partial register tile of rows are
// packed. Right for every K tail (1, 31, none), several slices (the last one's tail), split K,
// batches, B transposed or not, 1 and 2 threads; rows 2 KiB apart (1024 bf16) share L1 sets and
// are packed instead.
TEST(Gemm, AmxReadsARowsInPlace) {
  const VectorIsa host = isaOf(hostJit());
  if (!host.amx) GTEST_SKIP() << "this CPU has no AMX (or Linux refused its tile data)";
  auto plan = [&](const Case& c) { return gemm::blockingFor(formOf(c), AccType::F32, host, DType::bf16); };
  EXPECT_TRUE(plan(matmul(100, 128, 784)).aInPlace);
  EXPECT_TRUE(plan(matmul(100, 784, 128, false, true)).aInPlace);
  EXPECT_FALSE(plan(matmul(150, 45, 301, true, false)).aInPlace) << "A's rows contiguous: packed";
  EXPECT_FALSE(plan(matmul(64, 64, 1024)).aInPlace) << "rows sharing L1 sets: packed";
  EXPECT_GT(plan(matmul(131, 70, 1300)).kBlocks, 2);
  EXPECT_EQ(plan(matmul(33, 130, 9001, false, true)).path, gemm::Path::SplitK);
  std::vector<Case> cases;
  for (int64_t k : {1, 31, 32, 33, 63, 301, 1300}) cases.push_back(matmul(131, 70, k));
  cases.push_back(matmul(131, 70, 301, false, true));
  cases.push_back(matmul(33, 130, 9001, false, true));
  cases.push_back({"{t}[3,37,301]", "{t}[3,301,70]", "matmul", "", "{t}[3,37,70]"});
  cases.push_back(matmul(64, 64, 1024));
  std::vector<Compiled> kernels = compileAll(hostJit(), cases, DType::bf16, host);
  for (size_t i = 0; i < kernels.size(); ++i) verify(kernels[i], cases[i], DType::bf16, {1, 2}, host);
}

}  // namespace
}  // namespace kiln::cpu::gemmtest
