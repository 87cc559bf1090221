// The control block of the stand-in CUDA driver (FakeCudaDriver.cpp): what it reports, what it
// recorded, and the launcher that runs kernels. A test reaches it with
// dlsym(handle, "kiln_fake_cuda") after dlopen of the fake's path.
#pragma once

#include <cstddef>
#include <string>

struct KilnFakeCuda {
  // What the "device" is.
  int devices = 1;
  int ccMajor = 9, ccMinor = 0;
  int initResult = 0;                 // cuInit's result (a CUresult)
  size_t freeBytes = size_t(16) << 30;
  bool failAllocs = false;            // cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY
  int failLaunch = 0;                 // cuLaunchKernel's result when not 0
  int pendingError = 0;               // the next cuStreamSynchronize's result when not 0
  // What happened.
  std::string loaded;                 // the last module: "sm_90 cubin", "ptx sm_80"
  std::string lastError;
  int depth = 0;                      // pushed contexts
  bool current = false;               // a context made current by cuCtxSetCurrent (kiln's JIT)
  int events = 0;
  int retained = 0, streams = 0, modules = 0, allocations = 0, hostAllocations = 0;
  long launches = 0;
  int sharedRaisedTo = 0;
  // Runs one launch; false: the kernel failed (the next synchronisation reports it). `params` as
  // cuLaunchKernel's: each points to a CUdeviceptr (a host address here).
  bool (*launch)(void* user, const char* entry, const unsigned grid[3], const unsigned block[3], unsigned shared,
                 void** params) = nullptr;
  void* user = nullptr;
};

extern "C" KilnFakeCuda* kiln_fake_cuda();
