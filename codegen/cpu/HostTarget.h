// What the LLVM CPU backend will compile for on this machine: the host triple, the CPU name LLVM
// detects and the vector features that decide kernel shapes (AVX2, AVX-512, AVX512-BF16, AMX).
#pragma once

#include <string>
#include <vector>

namespace kiln::cpu {

struct HostTarget {
  std::string triple;                 // e.g. x86_64-pc-linux-gnu
  std::string cpu;                    // e.g. sapphirerapids
  std::vector<std::string> features;  // enabled features, sorted ("avx2", "avx512f", …)
  std::string llvmVersion;

  bool has(const std::string& feature) const;
  /// Widest float vector in 32-bit lanes: 16 with AVX-512, 8 with AVX2, 4 otherwise.
  int f32Lanes() const;
};

/// Asks LLVM about the machine it runs on.
HostTarget detectHostTarget();

}  // namespace kiln::cpu
