// `kiln devices`: what this machine offers kiln — the CPU and the vector features the LLVM backend
// targets, and the CUDA GPUs with the NVRTC the CUDA backend compiles with.
#include "tools/kiln/Commands.h"

#include "codegen/cpu/HostTarget.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "runtime/Devices.h"
#include "support/FloatMode.h"
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
    // How mixed precision multiplies here (codegen/cpu/Gemm.cpp, GemmAmx.cpp): bf16 products of
    // matmuls and convolutions on AMX tiles or as vdpbf16ps k pairs where the CPU (and for AMX,
    // Linux) allows and vdpbf16ps outruns the FMAs; f16 and other CPUs widen to f32 when packing.
    const cpu::VectorIsa isa = cpu::isaOf(cpu::Jit::host());
    const bool amxHardware = std::any_of(cpu.isa.begin(), cpu.isa.end(), [](const std::string& f) {
      return f == "amx_bf16";
    });
    const char* bf16 = isa.amxTiles()   ? "AMX tiles (tdpbf16ps), f32 accumulation"
                       : isa.bf16Dot() ? "bf16 k pairs (vdpbf16ps), f32 accumulation"
                                       : "operands widened to f32 when packed, f32 arithmetic";
    const char* why = amxHardware && !isa.amx                    ? " (Linux refused this process AMX tile data)"
                      : !isa.amxTiles() && isa.avx512bf16 && !isa.bf16Dot() ? " (vdpbf16ps does fewer flops than the FMAs here)"
                                                                             : "";
    std::printf("  bf16 matmul and convolution products: %s%s\n", bf16, why);
    const rt::CacheGeometry l1 = rt::hostL1Data();
    if (l1.known())
      std::printf("  L1 data cache: %d KiB, %d ways of %d B lines (the GEMM packs A rows that would share a set)\n",
                  l1.sets * l1.ways * l1.lineBytes / 1024, l1.ways, l1.lineBytes);
    else
      std::printf("  L1 data cache: not reported by Linux; the GEMM assumes %d ways\n", isa.l1Ways);
    std::printf("  f16 products: operands widened to f32 when packed, f32 arithmetic\n");
    std::printf("  subnormal floats: %s\n", denormalsFromEnvironment() == Denormals::Flush
                                                 ? "flushed to zero in the kernels (KILN_DENORMALS=keep keeps them)"
                                                 : "kept (KILN_DENORMALS=keep)");
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
