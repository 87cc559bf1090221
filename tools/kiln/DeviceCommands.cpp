// `kiln devices`: what this machine offers kiln — the CPU and the vector features the LLVM backend
// targets, and the CUDA GPUs with the NVRTC the CUDA backend compiles with.
#include "tools/kiln/Commands.h"

#include "codegen/cpu/HostTarget.h"
#include "runtime/Devices.h"
#if KILN_HAVE_CUDA
#include "codegen/cuda/Nvrtc.h"
#endif

#include <fmt/format.h>

#include <algorithm>

#include <cstdio>

namespace kiln::cli {

void addDeviceCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  auto* cmd = app.add_subcommand("devices", "List the CPU and CUDA devices kiln can compile for");
  commands.emplace_back(cmd, [] {
    rt::CpuInfo cpu = rt::cpuInfo();
    cpu::HostTarget host = cpu::detectHostTarget();
    std::printf("cpu: %s, %d logical cores\n", cpu.model.c_str(), cpu.logicalCores);
    std::printf("  isa: %s\n", fmt::format("{}", fmt::join(cpu.isa, " ")).c_str());
    std::printf("  llvm %s target: %s, cpu %s, %d f32 lanes per vector\n", host.llvmVersion.c_str(),
                host.triple.c_str(), host.cpu.c_str(), host.f32Lanes());
    // Honest about mixed precision on the CPU: its contractions widen bf16/f16 operands to f32 as
    // they pack them (codegen/cpu/Gemm.cpp), whatever bf16 arithmetic the CPU has.
    const bool bf16Hardware = std::any_of(cpu.isa.begin(), cpu.isa.end(), [](const std::string& f) {
      return f == "avx512_bf16" || f == "amx_bf16";
    });
    std::printf("  bf16/f16 contractions: operands widened to f32 when packed, f32 arithmetic%s\n",
                bf16Hardware ? " (this CPU's AVX512-BF16/AMX are not used yet)" : "");
#if KILN_HAVE_CUDA
    std::printf("nvrtc: %s\n", cuda::nvrtcVersion().c_str());
#else
    std::printf("nvrtc: not built (no CUDA toolkit in /usr/local/cuda at build time)\n");
#endif
    rt::CudaStatus st = rt::cudaStatus();
    if (st.driverLoaded)
      std::printf("cuda driver: %d.%d\n", st.driverVersion / 1000, st.driverVersion % 1000 / 10);
    for (const rt::CudaDeviceInfo& d : st.devices)
      std::printf("cuda:%d: %s, sm_%d%d, %d SMs, %.1f GiB\n", d.ordinal, d.name.c_str(), d.ccMajor, d.ccMinor,
                  d.multiprocessors, d.memoryBytes / (1024.0 * 1024 * 1024));
    if (st.devices.empty()) std::printf("cuda: %s\n", st.problem.c_str());
    return 0;
  });
}

}  // namespace kiln::cli
