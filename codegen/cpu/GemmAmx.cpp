// bf16 products on AMX tiles (Sapphire Rapids and later; VectorIsa::amx). The k-pair path of the
// packed GEMM (Gemm.cpp's "bf16 on AVX512-BF16") with the register tile replaced by four tile
// registers: where the CPU has amx-tile and amx-bf16 and Linux grants the process its tile data
// (support/PeakLoops.h's amxTileDataPermitted), a contraction on the pair path blocks with MR = 32, NR = 32 and
// K slices padded to 32 (Blocking::amx), and its micro-kernel computes the 32 × 32 tile of C as
// 2 × 2 tiles of 16 × 16 f32:
//
//   tmm0 tmm1   C rows 0-15, columns 0-15 and 16-31       (16 rows × 64 bytes each)
//   tmm2 tmm3   C rows 16-31
//   tmm4 tmm5   A rows 0-15 and 16-31, 32 k               (16 rows × 32 bf16)
//   tmm6 tmm7   B k pairs 16 rows, columns 0-15 and 16-31  (16 rows × 16 pairs)
//
// per 32 k: four tile loads and four tdpbf16ps (each 16 · 16 · 32 multiply-adds). B's panels are
// the pair path's own (a panel row holds NR k pairs, 128 bytes: tmm6 and tmm7 load its halves with
// that stride). A's panels hold, per 32 k, the step's two tiles one after the other
// (GemmKernels.cpp's amxKContiguous and amxRowsContiguous, StridedPacker::amxAt), so a panel is
// read as one sequential stream, and A's tiles are loaded with tileloaddt1 (data not reused) for
// slices of kAmxStreamKcLeast … kAmxStreamKc k: the driver runs a B panel against every A panel
// of the block, so B's panel should stay in L1 while A's stream past it from L2. L2 fills L1 at
// about 32 bytes a cycle: on a Xeon with AMX (2026-12-01, random bf16), a step of four tdpbf16ps
// took 26.7 ns with its tiles in L1, 29–30 with A's 2 KiB streaming from L2 in tiles, 36–37 with
// A's rows kcPad · 2 bytes apart (32 scattered lines a step), and 37–40 with both operands
// streaming, software prefetches or not. `kiln_gemm_tune --bf16`, medians of three interleaved
// runs, 1 / 2 threads, GFLOP/s: rows and tileloadd → tiles and tileloaddt1, 10000×1000·1000×512
// 769 / 1593 → 822 / 1715, 1024³ 784 / 1475 → 801 / 1522, Aᵀ·B over 10000 746 / 1527 → 847 /
// 1703, 2048³ 799 / 1632 → 843 / 1675. Where packing A does not pay back (GemmBlocking.cpp's
// amxRowsInPlace), the `aRows` kernel loads A's tiles from its rows in place, lda · 2 bytes apart,
// and a slice's last kc mod 32 k from packed tiles (GemmDriver.cpp's aTails). C's tile
// in the item's scratch is loaded (after the first slice) and stored with its row stride; a panel
// of at most 16 columns uses tmm0 and tmm2 only, a packed panel of at most 16 rows (a block's last)
// tmm0, tmm1 and tmm4 only: half the tile products (100×784·(128×784)ᵀ, whose last panel holds 4
// rows, 1T: its micro-kernel calls 13 → 7 % of the time). The tiles are configured (ldtilecfg from a
// constant) when a thread starts its share of a contraction's items, the driver's chunk, and
// released (tilerelease) when it ends, so the micro-kernel calls pay neither and no tile state
// outlives the contraction; nothing else in the chunk touches the tiles.
//
// VectorIsa::emulateAmx runs the same blocking and packing with the vector micro-kernel reading A's
// tiles (GemmKernels.cpp), which is how the tests check the layouts on CPUs without AMX; on a
// CPU with AMX, `Gemm.AmxTiles` compares the two.
#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <array>

namespace kiln::cpu::gemm {
namespace {

constexpr int kTileRows = 16, kTileBytes = 64;  // of every tile used here
constexpr uint8_t kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7;
// The deepest slice whose B panel (64 bytes per k) fits L1 beside A's streaming tiles: 40 KiB.
constexpr int64_t kAmxStreamKc = 640;
// The shallowest slice whose A block (GemmBlocking.cpp's 4–5 panels of 64 bytes per k) no longer
// fits L1 with B's panel: shallower, A's block stays in L1 for every B panel of the item.
constexpr int64_t kAmxStreamKcLeast = 256;

/// The 64-byte tile configuration: palette 1, tiles 0-7 of 16 rows × 64 bytes.
llvm::Constant* tileConfig(llvm::Module& m) {
  const std::string name = "kiln.gemm.amx.config";
  if (llvm::GlobalVariable* g = m.getGlobalVariable(name, true)) return g;
  std::array<uint8_t, 64> bytes{};
  bytes[0] = 1;  // palette
  for (int t = 0; t < 8; ++t) {
    bytes[16 + 2 * t] = kTileBytes;  // colsb, little-endian u16
    bytes[48 + t] = kTileRows;       // rows
  }
  auto* data = llvm::ConstantDataArray::get(m.getContext(), bytes);
  auto* g = new llvm::GlobalVariable(m, data->getType(), /*isConstant=*/true, llvm::GlobalValue::InternalLinkage,
                                     data, name);
  g->setAlignment(llvm::Align(64));
  return g;
}

}  // namespace

void amxConfigure(GemmBuilder& g) { g.b.CreateIntrinsic(llvm::Intrinsic::x86_ldtilecfg, {}, {tileConfig(g.m)}); }

void amxRelease(GemmBuilder& g) { g.b.CreateIntrinsic(llvm::Intrinsic::x86_tilerelease, {}, {}); }

void emitAmxMicroKernel(GemmBuilder& g, llvm::Function* f, int nv, bool aRows, int mi) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value *kc = f->getArg(0), *a = f->getArg(1), *bp = f->getArg(2), *c = f->getArg(3), *ldc = f->getArg(4);
  auto tile = [&](llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) { b.CreateIntrinsic(id, {}, args); };
  auto imm = [&](int t) { return b.getInt8(static_cast<uint8_t>(t)); };
  auto bytes = [&](llvm::Value* base, llvm::Value* offset) { return b.CreateInBoundsGEP(b.getInt8Ty(), base, offset); };
  // C tile (i, j) is tmm(2i + j): rows 16i…, columns 16j… of the micro-tile.
  llvm::Value* cStride = b.CreateMul(ldc, g.i64(4));
  auto cTile = [&](int i, int j) {
    return bytes(c, b.CreateAdd(b.CreateMul(cStride, g.i64(kTileRows * i)), g.i64(kTileBytes * j)));
  };
  auto* load = llvm::BasicBlock::Create(g.ctx, "c.load", f);
  auto* zero = llvm::BasicBlock::Create(g.ctx, "c.zero", f);
  auto* ready = llvm::BasicBlock::Create(g.ctx, "c.ready", f);
  b.CreateCondBr(f->getArg(5), load, zero);
  b.SetInsertPoint(load);
  for (int i = 0; i < mi; ++i)
    for (int j = 0; j < nv; ++j) tile(llvm::Intrinsic::x86_tileloadd64, {imm(2 * i + j), cTile(i, j), cStride});
  b.CreateBr(ready);
  b.SetInsertPoint(zero);
  for (int i = 0; i < mi; ++i)
    for (int j = 0; j < nv; ++j) tile(llvm::Intrinsic::x86_tilezero, {imm(2 * i + j)});
  b.CreateBr(ready);
  b.SetInsertPoint(ready);
  llvm::Value* bStride = g.i64(int64_t{g.plan.nr} * 4);  // one panel row of k pairs
  // One tile product step at k: A's two tiles (rows 0–15 at a0, 16–31 at a1, rows aStride bytes
  // apart), then B's k pairs from row k / 2 of its panel.
  auto step = [&](llvm::Intrinsic::ID aLoad, llvm::Value* a0, llvm::Value* a1, llvm::Value* aStride, llvm::Value* k) {
    llvm::Value* bAt = bytes(bp, b.CreateMul(b.CreateLShr(k, g.i64(1)), bStride));
    tile(aLoad, {imm(kA0), a0, aStride});
    if (mi > 1) tile(aLoad, {imm(kA1), a1, aStride});
    tile(llvm::Intrinsic::x86_tileloadd64, {imm(kB0), bAt, bStride});
    if (nv > 1) tile(llvm::Intrinsic::x86_tileloadd64, {imm(kB1), bytes(bAt, g.i64(kTileBytes)), bStride});
    for (int j = 0; j < nv; ++j) {
      tile(llvm::Intrinsic::x86_tdpbf16ps, {imm(j), imm(kA0), imm(j == 0 ? kB0 : kB1)});
      if (mi > 1) tile(llvm::Intrinsic::x86_tdpbf16ps, {imm(2 + j), imm(kA1), imm(j == 0 ? kB0 : kB1)});
    }
  };
  llvm::Value* tileStride = g.i64(kTileBytes);  // a packed tile's rows: 32 k each
  llvm::Value* aSecond = g.i64(kTileRows * kTileBytes);
  if (aRows) {
    // A's rows in place (Blocking::aInPlace): kc's whole steps straight from them, lda · 2 bytes
    // apart, and its last kc mod 32 k, if any, from the packed tiles at `tails` (zero past kc,
    // as B's panel is).
    llvm::Value* rowStride = b.CreateMul(f->getArg(6), g.i64(2));
    llvm::Value* whole = b.CreateAnd(kc, g.i64(-kAmxK));
    llvm::Value* a1 = bytes(a, b.CreateMul(rowStride, g.i64(kTileRows)));
    g.loop(g.i64(0), whole, kAmxK, "k.rows", [&](llvm::Value* k) {
      llvm::Value* at = b.CreateMul(k, g.i64(2));
      step(llvm::Intrinsic::x86_tileloadd64, bytes(a, at), bytes(a1, at), rowStride, k);
    });
    auto* rest = llvm::BasicBlock::Create(g.ctx, "k.tail", f);
    auto* restDone = llvm::BasicBlock::Create(g.ctx, "k.tail.done", f);
    b.CreateCondBr(b.CreateICmpNE(whole, kc), rest, restDone);
    b.SetInsertPoint(rest);
    llvm::Value* tails = f->getArg(7);
    step(llvm::Intrinsic::x86_tileloadd64, tails, bytes(tails, aSecond), tileStride, whole);
    b.CreateBr(restDone);
    b.SetInsertPoint(restDone);
  } else {
    // A's tiles with tileloaddt1 (not kept) where B's panel fits L1 beside them and A's block does
    // not (kAmxStreamKcLeast … kAmxStreamKc); a deeper slice's B panel streams from L2 anyway, and
    // A's panels, which every B panel of the block reads again, are then better kept
    // (100×784·784×128, one slice of 800 k: 1T 40 → 44 µs with tileloaddt1).
    auto kLoop = [&](llvm::Intrinsic::ID aLoad, const char* label) {
      g.loop(g.i64(0), kc, kAmxK, label, [&](llvm::Value* k) {
        llvm::Value* aAt = bytes(a, b.CreateMul(k, g.i64(2 * kAmxRows)));  // 2 KiB per step
        step(aLoad, aAt, bytes(aAt, aSecond), tileStride, k);
      });
    };
    auto* streamA = llvm::BasicBlock::Create(g.ctx, "a.stream", f);
    auto* keepA = llvm::BasicBlock::Create(g.ctx, "a.keep", f);
    auto* done = llvm::BasicBlock::Create(g.ctx, "k.done", f);
    llvm::Value* stream =
        b.CreateAnd(b.CreateICmpUGE(kc, g.i64(kAmxStreamKcLeast)), b.CreateICmpULE(kc, g.i64(kAmxStreamKc)));
    b.CreateCondBr(stream, streamA, keepA);
    b.SetInsertPoint(streamA);
    kLoop(llvm::Intrinsic::x86_tileloaddt164, "k.stream");
    b.CreateBr(done);
    b.SetInsertPoint(keepA);
    kLoop(llvm::Intrinsic::x86_tileloadd64, "k");
    b.CreateBr(done);
    b.SetInsertPoint(done);
  }
  for (int i = 0; i < mi; ++i)
    for (int j = 0; j < nv; ++j) tile(llvm::Intrinsic::x86_tilestored64, {imm(2 * i + j), cTile(i, j), cStride});
  b.CreateRetVoid();
}

}  // namespace kiln::cpu::gemm
