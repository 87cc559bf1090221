// The CUDA driver API, opened with dlopen at run time. Nothing links libcuda: a kiln binary starts
// on any machine, and on one without a driver or a GPU every entry point into the CUDA runtime
// reports "no CUDA device" as a kiln::Error instead of failing to load.
//
// cuda.h is included for its types and enums only. Each entry point is a member of DriverApi
// named and typed after the declaration in cuda.h. cuda.h maps many names to versioned symbols
// with macros (cuMemAlloc → cuMemAlloc_v2, cuStreamBeginCapture → cuStreamBeginCapture_v2,
// cuGraphInstantiate → cuGraphInstantiateWithFlags, cuEventElapsedTime → cuEventElapsedTime_v2);
// the table goes through the same macros, so `api.cuMemAlloc` is the `cuMemAlloc_v2` member, typed
// by its declaration, and loaded from the symbol "cuMemAlloc_v2" — the exact function the header
// would have called. The toolkit's headers are CUDA 13.0, so the driver must support 13.0.
#pragma once

#include "support/Error.h"

#include <cuda.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln::gpu {

// The driver entry points kiln uses. Keep in one list: the table, the loader and the symbol list
// all come from it.
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion)                        \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)               \
  X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
  X(cuCtxSetCurrent) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc)              \
  X(cuMemFreeHost) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)             \
  X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuStreamCreate) X(cuStreamDestroy)                 \
  X(cuStreamSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)         \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuEventCreate)              \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)              \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)        \
  X(cuGraphGetNodes) X(cuGraphExecDestroy) X(cuGraphDestroy)

#define KILN_CUDA_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;

/// The loaded driver entry points (see the file comment for the names).
struct DriverApi {
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_DECLARE_ENTRY)
};

#undef KILN_CUDA_DECLARE_ENTRY

/// True when the driver loaded, cuInit succeeded and there is at least one device. Otherwise
/// false, with the reason (which contains "no CUDA device") in `*why` when given. Never throws;
/// the driver is loaded and initialised once per process, on the first call of this or driver().
bool available(std::string* why = nullptr);

/// The driver's entry points; throws kiln::Error ("no CUDA device: …") when !available().
const DriverApi& driver();

/// Number of CUDA devices (0 when !available()).
int deviceCount();

/// The driver's CUDA version, e.g. 13000 (0 when it could not be loaded).
int driverVersion();

/// The exact symbols the loader looks up, in table order ("cuMemAlloc_v2", …).
const std::vector<std::string>& driverSymbols();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result code.
std::string errorText(CUresult result);

/// Throws kiln::Error "<what> failed: <errorText(result)>".
[[noreturn]] void throwCudaError(CUresult result, const std::string& what);

/// Checks a driver result: formats `what` (the call and its key arguments, e.g.
/// "cuMemAlloc({} bytes)") only when the call failed.
template <typename... Args>
inline void check(CUresult result, fmt::format_string<Args...> what, Args&&... args) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    throwCudaError(result, fmt::format(what, std::forward<Args>(args)...));
}

}  // namespace kiln::gpu
