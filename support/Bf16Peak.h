// Register-only loops of bf16 dot products, the physical limit of bf16 matmuls on this CPU:
// vdpbf16ps on zmm (AVX512-BF16) and tdpbf16ps on AMX tiles. The benchmark's anchors
// (bench/anchors.cpp, `peak/bf16dot`, `peak/amx`) and the machine profile (cost/MeasureCpu.cpp)
// both time them.
#pragma once

#include <cstdint>

namespace kiln {

/// Whether this process may use AMX tiles: the CPU has amx-bf16 and Linux grants the tile data
/// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, asked once per process; the grant is the
/// process's). False elsewhere.
bool amxTileDataPermitted();

/// Multiply-adds (2 flops each) of one round of each loop below.
inline constexpr double kBf16DotFlopsPerRound = 24.0 * 16 * 2 * 2;       // 24 vdpbf16ps of 16 lanes, 2 pairs
inline constexpr double kAmxFlopsPerRound = 4.0 * 16 * 16 * 32 * 2;     // 4 tdpbf16ps of 16 × 16 × 32

/// `rounds` rounds of 24 independent vdpbf16ps (the CPU must have AVX512-BF16); returns a value
/// that depends on every one.
float bf16DotRounds(int64_t rounds);

/// `rounds` rounds of 4 tdpbf16ps on four accumulator tiles, as kiln's AMX micro-kernel uses them
/// (amxTileDataPermitted() must hold).
float amxRounds(int64_t rounds);

}  // namespace kiln
