// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). Element i of a random tensor
// drawn with (seed, offset) at training step `step` depends only on the key `seed` and the 128-bit
// counter (offset + i, step), so the reference interpreter, the CPU backend and CUDA kernels draw
// bit-identical numbers in any order and on any number of threads. The step occupies the counter's
// high 64 bits (as curand's subsequence does): every step has a 2^64-long stream of its own, which
// no offset of another step can reach. Parameter initializers use the same generator at step 0.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln {

struct Philox4x32 {
  uint32_t out[4];

  /// Runs ten Philox rounds on the counter (counter lo, counter hi, high lo, high hi) with key
  /// (seed lo, seed hi).
  static Philox4x32 run(uint64_t seed, uint64_t counter, uint64_t high = 0) {
    uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
    uint32_t c2 = static_cast<uint32_t>(high), c3 = static_cast<uint32_t>(high >> 32);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      uint32_t n1 = static_cast<uint32_t>(p1);
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      uint32_t n3 = static_cast<uint32_t>(p0);
      c0 = n0; c1 = n1; c2 = n2; c3 = n3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return Philox4x32{{c0, c1, c2, c3}};
  }
};

/// A uniform float in [0, 1) with 24 random bits, for element `index` of stream (seed, offset) at
/// training step `step`.
inline float philoxUniform(uint64_t seed, uint64_t offset, uint64_t index, uint64_t step = 0) {
  uint32_t bits = Philox4x32::run(seed, offset + index, step).out[0];
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// A standard normal float (Box-Muller on two 32-bit draws of the same counter).
inline float philoxNormal(uint64_t seed, uint64_t offset, uint64_t index, uint64_t step = 0) {
  Philox4x32 r = Philox4x32::run(seed, offset + index, step);
  // u1 in (0, 1] so the log is finite; u2 in [0, 1).
  float u1 = static_cast<float>((r.out[0] >> 8) + 1) * (1.0f / 16777216.0f);
  float u2 = static_cast<float>(r.out[1] >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

}  // namespace kiln
