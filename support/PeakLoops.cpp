#include "support/PeakLoops.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln {

bool amxTileDataPermitted() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool permitted = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // asm/prctl.h, the XSAVE feature number
    return __builtin_cpu_supports("amx-bf16") && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return permitted;
#else
  return false;
#endif
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float fmaRoundsAvx2(int64_t rounds) {
  __m256 x[kFmaChainsAvx2];
  for (int c = 0; c < kFmaChainsAvx2; ++c) x[c] = _mm256_set1_ps(0.5f + c);
  const __m256 a = _mm256_set1_ps(0.9995f), b = _mm256_set1_ps(0.0005f);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int c = 0; c < kFmaChainsAvx2; ++c) x[c] = _mm256_fmadd_ps(x[c], a, b);
  }
  for (int c = 1; c < kFmaChainsAvx2; ++c) x[0] = _mm256_add_ps(x[0], x[c]);
  return _mm256_cvtss_f32(x[0]);
}

__attribute__((target("avx512f"))) float fmaRoundsAvx512(int64_t rounds) {
  __m512 x[kFmaChainsAvx512];
  for (int c = 0; c < kFmaChainsAvx512; ++c) x[c] = _mm512_set1_ps(0.5f + c);
  const __m512 a = _mm512_set1_ps(0.9995f), b = _mm512_set1_ps(0.0005f);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int c = 0; c < kFmaChainsAvx512; ++c) x[c] = _mm512_fmadd_ps(x[c], a, b);
  }
  for (int c = 1; c < kFmaChainsAvx512; ++c) x[0] = _mm512_add_ps(x[0], x[c]);
  return _mm512_cvtss_f32(x[0]);
}

__attribute__((target("avx512f,avx512bf16"))) float bf16DotRounds(int64_t rounds) {
  __m512 acc[kBf16DotChains];
  for (int j = 0; j < kBf16DotChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh one = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3f803f80));  // bf16 pairs of 1.0
  for (int64_t i = 0; i < rounds; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < kBf16DotChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], one, one);
  }
  for (int j = 1; j < kBf16DotChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_cvtss_f32(acc[0]);
}

__attribute__((target("amx-tile,amx-bf16"))) float amxRounds(int64_t rounds) {
  struct alignas(64) Config {
    uint8_t palette = 1, startRow = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  alignas(64) static thread_local uint16_t ones[16 * 32];
  alignas(64) static thread_local float out[16 * 16];
  std::fill(std::begin(ones), std::end(ones), uint16_t{0x3f80});
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (int64_t i = 0; i < rounds; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

bool bf16DotOutrunsFma() {
  static const bool outruns = [] {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return false;
    // 10000 rounds: 0.05-0.2 ms a sample, under 1 ms in all: every process whose JIT targets
    // the host pays it once (the prebuilt GEMM routines it links depend on the answer). The loops
    // alternate, so a frequency change or another process slows both alike, and each keeps its
    // best sample: load only ever slows a loop.
    constexpr int64_t kRounds = 10000;
    volatile float sink = 0;
    auto secondsOf = [&](float (*loop)(int64_t)) {
      const auto t0 = std::chrono::steady_clock::now();
      sink = sink + loop(kRounds);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double fma = 1e30, dot = 1e30;
    for (int sample = 0; sample < 3; ++sample) {
      fma = std::min(fma, secondsOf(fmaRoundsAvx512));
      dot = std::min(dot, secondsOf(bf16DotRounds));
    }
    return kBf16DotFlopsPerRound / dot > kFmaAvx512FlopsPerRound / fma;
  }();
  return outruns;
}
#else
float fmaRoundsAvx2(int64_t) { return 0; }
float fmaRoundsAvx512(int64_t) { return 0; }
float bf16DotRounds(int64_t) { return 0; }
float amxRounds(int64_t) { return 0; }
bool bf16DotOutrunsFma() { return false; }
#endif

}  // namespace kiln
