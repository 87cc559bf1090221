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
/// The level-1 data cache described by a Linux cache folder such as
/// /sys/devices/system/cpu/cpu0/cache (its index0, index1, … folders); unknown where none says
/// level 1 and type Data with whole numbers for its sets, ways and line size.
CacheGeometry l1DataFrom(const std::string& cacheDir);
/// The first core's level-1 data cache (l1DataFrom of cpu0's folder, read once per process).
CacheGeometry hostL1Data();
/// Never throws: a missing driver or a failing cuInit is reported in `problem`.
CudaStatus cudaStatus();

}  // namespace kiln::rt
