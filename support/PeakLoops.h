// Register-only loops that time the physical limits of this CPU's arithmetic: f32 FMAs on AVX2 and
// AVX-512 vectors, bf16 dot products on zmm (vdpbf16ps, AVX512-BF16) and on AMX tiles (tdpbf16ps).
// The benchmark's anchors (bench/anchors.cpp, `peak/fma`, `peak/bf16dot`, `peak/amx`) and the
// machine profile (cost/MeasureCpu.cpp) time them, and the CPU backend asks bf16DotOutrunsFma()
// which of its two bf16 GEMM paths pays on the host.
#pragma once

#include <cstdint>

namespace kiln {

/// Whether this process may use AMX tiles: the CPU has amx-bf16 and Linux grants the tile data
/// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, asked once per process; the grant is the
/// process's). False elsewhere.
bool amxTileDataPermitted();

/// Independent accumulator chains of the FMA loops: enough to hide the FMA latency on two pipes
/// (4-5 cycles each: 8-10 in flight, or 2 × 4 zmm), few enough to stay in registers beside the
/// two operands (16 ymm, 32 zmm).
inline constexpr int kFmaChainsAvx2 = 12, kFmaChainsAvx512 = 24;
/// Independent vdpbf16ps accumulators of bf16DotRounds, the same count as the AVX-512 FMA loop's.
inline constexpr int kBf16DotChains = 24;

/// Flops (2 per multiply-add) of one round of each loop below.
inline constexpr double kFmaAvx2FlopsPerRound = 2.0 * 8 * kFmaChainsAvx2;
inline constexpr double kFmaAvx512FlopsPerRound = 2.0 * 16 * kFmaChainsAvx512;
inline constexpr double kBf16DotFlopsPerRound = 2.0 * 16 * 2 * kBf16DotChains;  // vdpbf16ps of 16 lanes, 2 pairs
inline constexpr double kAmxFlopsPerRound = 4.0 * 16 * 16 * 32 * 2;     // 4 tdpbf16ps of 16 × 16 × 32

/// `rounds` rounds of one FMA per chain on 8 (AVX2 + FMA) or 16 (AVX-512) lanes; x·a + b with
/// a < 1 converges, so nothing overflows or turns denormal however long it runs. Each returns a
/// value that depends on every chain. The CPU must have the ISA.
float fmaRoundsAvx2(int64_t rounds);
float fmaRoundsAvx512(int64_t rounds);

/// `rounds` rounds of 24 independent vdpbf16ps (the CPU must have AVX512-BF16); returns a value
/// that depends on every one.
float bf16DotRounds(int64_t rounds);

/// `rounds` rounds of 4 tdpbf16ps on four accumulator tiles, as kiln's AMX micro-kernel uses them
/// (amxTileDataPermitted() must hold).
float amxRounds(int64_t rounds);

/// Whether vdpbf16ps multiplies bf16 faster than AVX-512 FMAs multiply f32 on this CPU, in flops:
/// on Zen 4 and 5 it does twice the FMA's work per instruction at the same rate, but some Xeons
/// (the development machine's Emerald Rapids VM: a quarter of the FMA's rate, half its flops) run
/// it slower, and there bf16 products are faster converted to f32 for the FMA micro-kernel.
/// Measured once per process (best of three alternating samples of both loops, under 1 ms in
/// all); false without AVX-512 and AVX512-BF16.
bool bf16DotOutrunsFma();

}  // namespace kiln
