#include "runtime/Devices.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

namespace kiln::rt {

CpuInfo cpuInfo() {
  CpuInfo info;
  info.logicalCores = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    auto value = [&] { return line.substr(std::min(line.size(), line.find(':') + 2)); };
    if (info.model.empty() && line.rfind("model name", 0) == 0) info.model = value();
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = value();
  }
  static const char* kInteresting[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                       "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
                                       "amx_int8"};
  std::istringstream fs(flags);
  std::vector<std::string> all;
  for (std::string f; fs >> f;) all.push_back(f);
  for (const char* f : kInteresting)
    if (std::find(all.begin(), all.end(), f) != all.end()) info.isa.emplace_back(f);
  return info;
}

CacheGeometry l1DataFrom(const std::string& cacheDir) {
  auto read = [&](const std::string& file) {
    std::ifstream in(cacheDir + "/" + file);
    std::string text;
    std::getline(in, text);
    return text;
  };
  auto number = [&](const std::string& file) {
    const std::string text = read(file);
    const bool digits = !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
    return digits ? std::stoi(text) : 0;
  };
  for (int i = 0; i < 16; ++i) {
    const std::string index = fmt::format("index{}/", i);
    const std::string level = read(index + "level");
    if (level.empty()) break;
    if (level != "1" || read(index + "type") != "Data") continue;
    return CacheGeometry{number(index + "number_of_sets"), number(index + "ways_of_associativity"),
                         number(index + "coherency_line_size")};
  }
  return CacheGeometry{};
}

CacheGeometry hostL1Data() {
  static const CacheGeometry geometry = l1DataFrom("/sys/devices/system/cpu/cpu0/cache");
  return geometry;
}

namespace {
// The few driver entry points kiln needs to list devices, declared here so the runtime includes
// no CUDA header. Signatures from the CUDA driver API (cuda.h).
using CUresult = int;
using CUdevice = int;
constexpr int kAttrMultiprocessors = 16, kAttrCcMajor = 75, kAttrCcMinor = 76;

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}
}  // namespace

CudaStatus cudaStatus() {
  CudaStatus st;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    st.problem = "no CUDA driver (libcuda.so.1 not found): no CUDA device";
    return st;
  }
  st.driverLoaded = true;
  auto cuInit = sym<CUresult (*)(unsigned)>(lib, "cuInit");
  auto cuDriverGetVersion = sym<CUresult (*)(int*)>(lib, "cuDriverGetVersion");
  auto cuDeviceGetCount = sym<CUresult (*)(int*)>(lib, "cuDeviceGetCount");
  auto cuDeviceGet = sym<CUresult (*)(CUdevice*, int)>(lib, "cuDeviceGet");
  auto cuDeviceGetName = sym<CUresult (*)(char*, int, CUdevice)>(lib, "cuDeviceGetName");
  auto cuDeviceGetAttribute = sym<CUresult (*)(int*, int, CUdevice)>(lib, "cuDeviceGetAttribute");
  auto cuDeviceTotalMem = sym<CUresult (*)(size_t*, CUdevice)>(lib, "cuDeviceTotalMem_v2");
  if (!cuInit || !cuDriverGetVersion || !cuDeviceGetCount || !cuDeviceGet || !cuDeviceGetName ||
      !cuDeviceGetAttribute || !cuDeviceTotalMem) {
    st.problem = "the CUDA driver lacks expected entry points";
    return st;
  }
  cuDriverGetVersion(&st.driverVersion);
  if (CUresult r = cuInit(0); r != 0) {
    st.problem = fmt::format("cuInit failed (CUDA error {}): no usable CUDA device", r);
    return st;
  }
  int count = 0;
  cuDeviceGetCount(&count);
  if (count == 0) st.problem = "the CUDA driver reports no device";
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (cuDeviceGet(&dev, i) != 0) continue;
    CudaDeviceInfo d;
    d.ordinal = i;
    char name[256] = {};
    cuDeviceGetName(name, sizeof(name) - 1, dev);
    d.name = name;
    cuDeviceGetAttribute(&d.ccMajor, kAttrCcMajor, dev);
    cuDeviceGetAttribute(&d.ccMinor, kAttrCcMinor, dev);
    cuDeviceGetAttribute(&d.multiprocessors, kAttrMultiprocessors, dev);
    size_t mem = 0;
    cuDeviceTotalMem(&mem, dev);
    d.memoryBytes = mem;
    st.devices.push_back(d);
  }
  // The library stays loaded: later CUDA work reuses it.
  return st;
}

}  // namespace kiln::rt
