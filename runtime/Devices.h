// The devices this machine offers: the CPU (model, cores, vector extensions) and CUDA GPUs, found
// through the CUDA driver opened with dlopen at run time, so every kiln binary starts and reports
// "no CUDA device" cleanly on a machine without a GPU or without a driver.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct CpuInfo {
  std::string model;                 // /proc/cpuinfo "model name"
  int logicalCores = 0;
  std::vector<std::string> isa;      // of interest to kernels: avx2, fma, avx512f, avx512_bf16, amx_tile, …
};

/// The geometry of one cache: sets × ways lines of lineBytes. Zero where Linux does not say.
struct CacheGeometry {
  int sets = 0, ways = 0, lineBytes = 0;
  bool known() const { return sets > 0 && ways > 0 && lineBytes > 0; }
};

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0, ccMinor = 0;      // compute capability
  int multiprocessors = 0;
  uint64_t memoryBytes = 0;
};

struct CudaStatus {
  bool driverLoaded = false;
  int driverVersion = 0;             // e.g. 13000
  std::string problem;               // why there is no usable device, when there is none
  std::vector<CudaDeviceInfo> devices;
};

CpuInfo cpuInfo();
/// The first core's level-1 data cache, from /sys/devices/system/cpu/cpu0/cache (read once per
/// process; unknown where that is absent).
CacheGeometry hostL1Data();
/// Never throws: a missing driver or a failing cuInit is reported in `problem`.
CudaStatus cudaStatus();

}  // namespace kiln::rt
