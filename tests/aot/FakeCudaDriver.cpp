// A stand-in for the CUDA driver (built as libcuda.so.1, soname libcuda.so.1, in a folder of its
// own) so that the runtime of CUDA libraries (aot/runtime/kiln_aot_cuda.c), and kiln's own
// cuda::Program without CUDA graphs or cuBLASLt, run without a GPU:
// "device memory" is host memory, copies are memcpy, streams run nothing asynchronously, and a
// kernel launch calls the test's launcher (FakeCudaDriver.h), which runs the rendered kernel on the
// host emulator. A test dlopens this file by its path before it creates a context: the library's
// dlopen("libcuda.so.1") then finds it already loaded (by soname).
//
// The entry points are defined through cuda.h's declarations, so their types and (versioned) names
// are the real driver's.
#include "tests/aot/FakeCudaDriver.h"

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

KilnFakeCuda state;

struct Function {
  std::string name;
};
/// A loaded image: a function exists in it when its name does (a cubin's symbol table, PTX's .entry).
struct Module {
  std::string image;
};

/// The bytes of a cubin (an ELF64 image) from its header: the furthest of the section header table
/// and every section's data.
size_t elfBytes(const unsigned char* b) {
  auto read = [&](size_t at, size_t bytes) {
    uint64_t v = 0;
    std::memcpy(&v, b + at, bytes);
    return v;
  };
  const uint64_t shoff = read(0x28, 8), shentsize = read(0x3A, 2), shnum = read(0x3C, 2);
  uint64_t end = shoff + shentsize * shnum;
  for (uint64_t i = 0; i < shnum; ++i) {
    const size_t at = shoff + i * shentsize;
    if (read(at + 4, 4) != 8) end = std::max(end, read(at + 0x18, 8) + read(at + 0x20, 8));  // not NOBITS
  }
  return end;
}

CUresult fail(CUresult r, const std::string& what) {
  state.lastError = what;
  return r;
}

/// A handle that is a host object of type T, counted in `live` while it exists (events, streams).
template <class T, class Handle>
CUresult createCounted(Handle* h, int& live, T init = T{}) {
  ++live;
  *h = reinterpret_cast<Handle>(new T(init));
  return CUDA_SUCCESS;
}
template <class T, class Handle>
CUresult destroyCounted(Handle h, int& live) {
  --live;
  delete reinterpret_cast<T*>(h);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) KilnFakeCuda* kiln_fake_cuda() { return &state; }

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  switch (error) {
    case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: *pStr = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED: *pStr = "CUDA_ERROR_LAUNCH_FAILED"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *pStr = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_IMAGE: *pStr = "CUDA_ERROR_INVALID_IMAGE"; return CUDA_SUCCESS;
    default: *pStr = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  *pStr = error == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : error == CUDA_ERROR_LAUNCH_FAILED ? "unspecified launch failure" : "fake";
  return CUDA_SUCCESS;
}
// NVRTC, too, opens libcuda.so.1 when it is loaded (cuInit, then this private interface): it
// gets nothing and compiles as it does without a driver.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuInit(unsigned int) { return static_cast<CUresult>(state.initResult); }
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = state.devices;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal >= state.devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "kiln fake GPU", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice) {
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = state.ccMajor; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = state.ccMinor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    default: return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: unexpected attribute");
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice) {
  ++state.retained;
  *pctx = reinterpret_cast<CUcontext>(&state);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  --state.retained;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext) {
  ++state.depth;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  if (state.depth == 0) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPopCurrent without a push");
  --state.depth;
  if (pctx) *pctx = reinterpret_cast<CUcontext>(&state);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  state.current = ctx != nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = state.freeBytes * 2;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* freeBytes, size_t* total) {
  *freeBytes = state.freeBytes;
  *total = state.freeBytes * 2;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  if (state.depth == 0 && !state.current) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuMemAlloc without a current context");
  if (state.failAllocs) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xa5, bytes);  // device memory starts as garbage
  ++state.allocations;
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::free(reinterpret_cast<void*>(p));
  --state.allocations;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytes, unsigned int) {
  *pp = std::malloc(bytes ? bytes : 1);
  ++state.hostAllocations;
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  std::free(p);
  --state.hostAllocations;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream) {
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream) {
  auto* p = reinterpret_cast<unsigned int*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}
// Events: the stream runs everything at once, so an event records the host clock when it is
// recorded, and two of them are the host time of the work between.
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) { return createCounted<double>(e, state.events); }
CUresult CUDAAPI cuEventDestroy(CUevent e) { return destroyCounted<double>(e, state.events); }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream) {
  *reinterpret_cast<double*>(e) =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  *ms = static_cast<float>(*reinterpret_cast<double*>(end) - *reinterpret_cast<double*>(start));
  return CUDA_SUCCESS;
}
// No CUDA graphs: a program that would capture one gets an error (tests run with graphs off).
CUresult CUDAAPI cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  return fail(CUDA_ERROR_NOT_SUPPORTED, "the fake driver has no CUDA graphs");
}
CUresult CUDAAPI cuStreamEndCapture(CUstream, CUgraph*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuGraphLaunch(CUgraphExec, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphGetNodes(CUgraph, CUgraphNode*, size_t* n) {
  if (n) *n = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) { return createCounted<char>(s, state.streams); }
CUresult CUDAAPI cuStreamDestroy(CUstream s) { return destroyCounted<char>(s, state.streams); }
CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  if (state.pendingError != CUDA_SUCCESS) return static_cast<CUresult>(state.pendingError);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  const auto* b = static_cast<const unsigned char*>(image);
  if (std::memcmp(b, "\x7f" "ELF", 4) == 0) {
    uint32_t flags = 0;
    std::memcpy(&flags, b + 48, 4);  // e_flags of an ELF64 header; the SM in bits 8-15
    state.loaded = "sm_" + std::to_string((flags >> 8) & 0xff) + " cubin";
  } else if (std::strstr(static_cast<const char*>(image), ".target sm_")) {
    state.loaded = std::string("ptx ") + (std::strstr(static_cast<const char*>(image), ".target sm_") + 8);
    state.loaded.resize(state.loaded.find('\n'));
  } else {
    return fail(CUDA_ERROR_INVALID_IMAGE, "neither a cubin nor PTX");
  }
  ++state.modules;
  const bool elf = std::memcmp(b, "\x7f" "ELF", 4) == 0;
  const size_t bytes = elf ? elfBytes(b) : std::strlen(static_cast<const char*>(image));
  *module = reinterpret_cast<CUmodule>(new Module{std::string(static_cast<const char*>(image), bytes)});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  --state.modules;
  delete reinterpret_cast<Module*>(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  const std::string& image = reinterpret_cast<Module*>(m)->image;
  const std::string n(name);
  if (image.find(n + '\0') == std::string::npos && image.find(n + '(') == std::string::npos)
    return fail(CUDA_ERROR_NOT_FOUND, std::string("cuModuleGetFunction: no function '") + name + "' in the module");
  *f = reinterpret_cast<CUfunction>(new Function{name});  // leaked: as many as the tests look up
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction) {
  *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? 48 * 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int value) {
  state.sharedRaisedTo = value;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream, void** params, void**) {
  if (state.depth == 0 && !state.current) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernel without a current context");
  if (state.failLaunch != CUDA_SUCCESS) return static_cast<CUresult>(state.failLaunch);
  ++state.launches;
  if (!state.launch) return CUDA_SUCCESS;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (!state.launch(state.user, reinterpret_cast<Function*>(f)->name.c_str(), grid, block, shared, params)) {
    state.pendingError = static_cast<int>(CUDA_ERROR_LAUNCH_FAILED);  // reported at the next synchronisation, as a fault is
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
