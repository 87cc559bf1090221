#include "runtime/cuda/Module.h"

#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"

#include <utility>

namespace kiln::gpu {

void Kernel::launch(Stream& stream, Dim3 grid, Dim3 block, unsigned sharedBytes, void** params) {
  const DriverApi& api = driver();
  if (sharedBytes > dynamicSharedLimit_) {
    KILN_CHECK(static_cast<int64_t>(sharedBytes) + staticShared_ <= optinLimit_,
               "kernel '{}' asks for {} bytes of dynamic shared memory; with its {} static bytes that exceeds the "
               "device's {} bytes per block",
               name_, sharedBytes, staticShared_, optinLimit_);
    check(api.cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(sharedBytes)),
          "cuFuncSetAttribute('{}', max dynamic shared memory = {} bytes)", name_, sharedBytes);
    dynamicSharedLimit_ = sharedBytes;
  }
  check(api.cuLaunchKernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z, sharedBytes,
                           stream.handle(), params, nullptr),
        "cuLaunchKernel('{}', grid {}x{}x{}, block {}x{}x{}, {} bytes of shared memory)", name_, grid.x, grid.y,
        grid.z, block.x, block.y, block.z, sharedBytes);
}

Module::Module(const Context& context, const std::vector<char>& cubin, const std::string& what)
    : what_(what), optinLimit_(context.properties().maxSharedPerBlockOptin) {
  KILN_CHECK(!cubin.empty(), "cannot load {}: the cubin is empty", what);
  load(cubin.data(), fmt::format("{} (a cubin of {} bytes) on {}", what, cubin.size(), context.properties().label()));
}

Module::Module(const Context& context, const std::string& ptx, const std::string& what)
    : what_(what), optinLimit_(context.properties().maxSharedPerBlockOptin) {
  KILN_CHECK(!ptx.empty(), "cannot load {}: the PTX is empty", what);
  // c_str() is NUL-terminated, as the driver needs PTX to be.
  load(ptx.c_str(), fmt::format("{} (PTX) on {}", what, context.properties().label()));
}

void Module::load(const void* image, const std::string& what) {
  check(driver().cuModuleLoadData(&module_, image), "cuModuleLoadData({})", what);
}

Module::Module(Module&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)), what_(std::move(other.what_)), optinLimit_(other.optinLimit_) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_) driver().cuModuleUnload(module_);
    module_ = std::exchange(other.module_, nullptr);
    what_ = std::move(other.what_);
    optinLimit_ = other.optinLimit_;
  }
  return *this;
}

Module::~Module() {
  if (module_) driver().cuModuleUnload(module_);
}

Kernel Module::kernel(const std::string& name) const {
  KILN_CHECK(module_, "looking up kernel '{}' in an empty (moved-from) module", name);
  const DriverApi& api = driver();
  CUfunction fn = nullptr;
  check(api.cuModuleGetFunction(&fn, module_, name.c_str()), "cuModuleGetFunction('{}' in {})", name, what_);
  int staticShared = 0;
  check(api.cuFuncGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
        "cuFuncGetAttribute('{}', static shared memory)", name);
  // Without an opt-in this is 48 KiB less the static shared memory.
  int dynamicLimit = 0;
  check(api.cuFuncGetAttribute(&dynamicLimit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn),
        "cuFuncGetAttribute('{}', max dynamic shared memory)", name);
  return Kernel(fn, name, staticShared, dynamicLimit, optinLimit_);
}

}  // namespace kiln::gpu
