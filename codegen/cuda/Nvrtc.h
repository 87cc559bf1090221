// Run-time compilation of CUDA C++ with NVRTC, to PTX or to a cubin for a given SM architecture.
// Works without a GPU, so every CI run compiles the generated CUDA even where it cannot run it.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

struct CompiledCuda {
  std::string ptx;                // always produced
  std::vector<char> cubin;        // produced when `arch` is a real architecture (sm_XX)
  std::string log;                // NVRTC's log (warnings)
};

/// NVRTC's version, e.g. "13.0".
std::string nvrtcVersion();

/// Compiles `source` (CUDA C++, named `name` in messages) for `arch` ("sm_80", "sm_90", or a
/// virtual "compute_90" for PTX only). The CUDA headers (fp16/bf16) are on the include path.
/// A compile error is a kiln::Error carrying NVRTC's log.
CompiledCuda compileCuda(const std::string& source, const std::string& name, const std::string& arch,
                         const std::vector<std::string>& extraOptions = {});

}  // namespace kiln::cuda
