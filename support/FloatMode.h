// The floating-point mode that CPU kernels run in: subnormal (denormal) floats flushed to zero, or
// kept as IEEE 754 has them. On x86 an arithmetic instruction that meets a subnormal input or
// result takes a microcode assist of about a hundred cycles, vector instructions included: a
// model whose Adam moments or gradients decay into the subnormal range runs several times slower
// (mnist_mlp's training step at batch 1, repeated on one example: 0.224 → 0.057 ms flushed). The
// CPU backend flushes by default, as XLA's and TensorFlow's CPU runtimes do; the interpreter and
// the CUDA backend (whose GPUs take subnormals at full speed) keep them.
#pragma once

#include <cstdint>

namespace kiln {

enum class Denormals : uint8_t {
  Flush,  // subnormal inputs read as zero, subnormal results written as zero (x86: MXCSR DAZ + FTZ)
  Keep,   // IEEE 754 gradual underflow
};

/// KILN_DENORMALS: "flush" (also when unset or empty) or "keep". Throws kiln::Error otherwise.
Denormals denormalsFromEnvironment();

/// The calling thread's floating-point control word (x86: MXCSR, whose rounding, exception-mask
/// and denormal bits SSE and AVX arithmetic follow; 0 on other CPUs), and setting it.
uint32_t floatControl();
void setFloatControl(uint32_t control);
/// The control word's sticky exception flags (MXCSR bits 0–5), raised by arithmetic: no part of
/// the mode, so the functions below leave them as they find them.
inline constexpr uint32_t kFloatFlags = 0x3F;
/// Gives the calling thread the mode bits of `control` (all but kFloatFlags), when it has others.
void setFloatMode(uint32_t control);

/// While alive, the calling thread's arithmetic treats subnormals as `mode` says (nothing on CPUs
/// other than x86); the destructor restores the mode it found.
class ScopedDenormals {
 public:
  explicit ScopedDenormals(Denormals mode);
  ~ScopedDenormals();
  ScopedDenormals(const ScopedDenormals&) = delete;
  ScopedDenormals& operator=(const ScopedDenormals&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace kiln
