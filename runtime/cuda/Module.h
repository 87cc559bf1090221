// Loaded device code: a Module is a cubin (or PTX, which the driver compiles for the device) loaded
// into the current context; a Kernel is one of its __global__ functions, launched on a stream.
#pragma once

#include <cuda.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln::gpu {

class Context;
class Stream;

/// Grid or block dimensions.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// A __global__ function of a loaded Module (valid while the module is).
class Kernel {
 public:
  /// Launches on `stream`. `params` holds one pointer per kernel parameter, pointing at its value
  /// (cuLaunchKernel's convention). Dynamic shared memory beyond the default (48 KiB less the static
  /// shared memory) is allowed up to the device's opt-in limit: the kernel's limit
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) is raised on the first launch that needs it —
  /// make that launch before capturing a graph.
  void launch(Stream& stream, Dim3 grid, Dim3 block, unsigned sharedBytes, void** params);

  /// launch() with the arguments given by value: launchWith(s, grid, block, 0, n, alpha, x, y),
  /// each argument of exactly the kernel parameter's type (device pointers as CUdeviceptr).
  template <typename... Args>
  void launchWith(Stream& stream, Dim3 grid, Dim3 block, unsigned sharedBytes, Args... args) {
    void* params[sizeof...(Args) + 1] = {static_cast<void*>(&args)...};
    launch(stream, grid, block, sharedBytes, params);
  }

  CUfunction handle() const { return function_; }
  const std::string& name() const { return name_; }
  /// Bytes of statically declared shared memory.
  int staticSharedBytes() const { return staticShared_; }

 private:
  friend class Module;
  Kernel(CUfunction function, std::string name, int staticShared, int dynamicLimit, int optinLimit)
      : function_(function),
        name_(std::move(name)),
        staticShared_(staticShared),
        optinLimit_(optinLimit),
        dynamicSharedLimit_(static_cast<unsigned>(dynamicLimit)) {}

  CUfunction function_ = nullptr;
  std::string name_;
  int staticShared_ = 0;
  int optinLimit_ = 0;               // the device's opt-in shared memory per block
  unsigned dynamicSharedLimit_ = 0;  // the dynamic shared memory the function allows now
};

/// A loaded cubin or PTX image; unloaded on destruction. Move-only.
class Module {
 public:
  /// Loads a cubin (an ELF image, e.g. CompiledCuda::cubin) built for the device's architecture.
  /// `what` names the module in error messages.
  Module(const Context& context, const std::vector<char>& cubin, const std::string& what);
  /// Loads PTX text; the driver compiles it for the device.
  Module(const Context& context, const std::string& ptx, const std::string& what);
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  /// The extern "C" __global__ function `name`; a kiln::Error when the module has none.
  Kernel kernel(const std::string& name) const;

 private:
  void load(const void* image, const std::string& what);

  CUmodule module_ = nullptr;
  std::string what_;
  int optinLimit_ = 0;
};

}  // namespace kiln::gpu
