#include "runtime/cuda/Driver.h"

#include <dlfcn.h>

namespace kiln::gpu {

// Two steps, so that the argument is macro-expanded (cuMemAlloc → cuMemAlloc_v2) before it is
// turned into the symbol name.
#define KILN_CUDA_STRINGIFY2(x) #x
#define KILN_CUDA_STRINGIFY(x) KILN_CUDA_STRINGIFY2(x)

namespace {

struct Loaded {
  DriverApi api;
  std::string problem;  // empty when the driver is usable
  int version = 0;
  int devices = 0;
};

std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &text);
  if (!name) return fmt::format("CUDA error {}", static_cast<int>(result));
  return text ? fmt::format("{} ({})", name, text) : std::string(name);
}

// Looks `symbol` up; the first one missing is remembered for the message.
template <typename F>
void resolve(void* lib, F& fn, const char* symbol, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn && missing.empty()) missing = symbol;
}

Loaded load() {
  Loaded l;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace; the handle is kept for the
  // life of the process.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.problem = fmt::format("no CUDA device: the CUDA driver (libcuda.so.1) is not installed ({})",
                            err ? err : "not found");
    return l;
  }
  std::string missing;
#define KILN_CUDA_RESOLVE_ENTRY(name) resolve(lib, l.api.name, KILN_CUDA_STRINGIFY(name), missing);
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE_ENTRY)
#undef KILN_CUDA_RESOLVE_ENTRY
  if (l.api.cuDriverGetVersion) l.api.cuDriverGetVersion(&l.version);
  if (!missing.empty()) {
    l.problem = fmt::format(
        "no CUDA device: the CUDA driver (CUDA {}.{}) lacks {}; kiln needs a driver for CUDA {}.{} or newer",
        l.version / 1000, l.version % 1000 / 10, missing, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    return l;
  }
  if (CUresult r = l.api.cuInit(0); r != CUDA_SUCCESS) {
    l.problem = fmt::format("no CUDA device: cuInit failed: {}", describe(l.api, r));
    return l;
  }
  if (CUresult r = l.api.cuDeviceGetCount(&l.devices); r != CUDA_SUCCESS) {
    l.problem = fmt::format("no CUDA device: cuDeviceGetCount failed: {}", describe(l.api, r));
    l.devices = 0;
  } else if (l.devices == 0) {
    l.problem = "no CUDA device: the CUDA driver reports no device";
  }
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

bool available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.problem;
  return l.problem.empty();
}

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.problem.empty()) throw Error(l.problem);
  return l.api;
}

int deviceCount() { return loaded().devices; }

int driverVersion() { return loaded().version; }

const std::vector<std::string>& driverSymbols() {
#define KILN_CUDA_SYMBOL_NAME(name) KILN_CUDA_STRINGIFY(name),
  static const std::vector<std::string> names = {KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_SYMBOL_NAME)};
#undef KILN_CUDA_SYMBOL_NAME
  return names;
}

std::string errorText(CUresult result) { return describe(loaded().api, result); }

void throwCudaError(CUresult result, const std::string& what) {
  KILN_THROW("{} failed: {}", what, errorText(result));
}

}  // namespace kiln::gpu
