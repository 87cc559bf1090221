// The CUDA backend's programs and libraries on the host, for the tests of aot_cuda_emulated_tests:
// the stand-in driver (FakeCudaDriver.cpp) and the host emulator of the rendered kernels
// (tests/codegen/CudaEmulation.h) it runs each launch on.
#pragma once

#include "AotCudaSupport.h"
#include "FakeCudaDriver.h"

#include "codegen/cuda/Layout.h"
#include "codegen/cuda/Program.h"
#include "passes/Pipeline.h"
#include "tests/codegen/CudaEmulation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::aottest {

/// The stand-in driver, loaded once per process by its path (its soname is libcuda.so.1).
inline KilnFakeCuda& fake() {
  static KilnFakeCuda* state = [] {
    void* h = ::dlopen(KILN_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (!h) throw std::runtime_error(std::string("dlopen of the fake driver: ") + ::dlerror());
    auto get = reinterpret_cast<KilnFakeCuda* (*)()>(::dlsym(h, "kiln_fake_cuda"));
    if (!get) throw std::runtime_error("the fake driver has no kiln_fake_cuda");
    return get();
  }();
  return *state;
}

/// A program's kernels on the host emulator, run launch by launch from the fake driver.
class EmulatedDevice {
 public:
  /// `chain`: as the layout of the programs it runs (cuda::ProgramOptions::chain; off when profiling).
  explicit EmulatedDevice(const ir::Graph& g, passes::Precision precision = passes::Precision::F32, bool chain = true)
      : compiled_(passes::compiledCopy(g, precision, "")),
        layout_(cuda::layoutProgram(compiled_, 80, false, cuda::RenderOptions::kBlasMinMacs, chain)) {
    for (const cuda::StepLayout& s : layout_.steps) args_[s.entry] = s.args.size();
    // What the emulator's harness lacks (it serves the kernel tests, which need less), placed
    // before the first kernel: __noinline__ (the parts of multi kernels) and the warp broadcast
    // __shfl_sync, built like its __shfl_down_sync.
    std::vector<cuda::RenderedKernel> rendered = layout_.rendered;
    if (!rendered.empty()) rendered.front().code = cudatest::kEmulatorShim + rendered.front().code;
    emulator_ = std::make_unique<cudatest::Emulator>(rendered);
    KilnFakeCuda& f = fake();
    f.launch = &EmulatedDevice::launch;
    f.user = this;
  }
  ~EmulatedDevice() {
    fake().launch = nullptr;
    fake().user = nullptr;
  }
  const cuda::ProgramLayout& layout() const { return layout_; }
  const std::string& error() const { return error_; }

 private:
  static bool launch(void* user, const char* entry, const unsigned grid[3], const unsigned block[3], unsigned shared,
                     void** params) {
    auto* d = static_cast<EmulatedDevice*>(user);
    try {
      auto it = d->args_.find(entry);
      if (it == d->args_.end()) throw std::runtime_error(fmt::format("unknown entry {}", entry));
      cuda::RenderedKernel r;
      r.name = entry;
      cuda::Step& s = r.steps.emplace_back();
      s.launch.entry = entry;
      for (int i = 0; i < 3; ++i) {
        s.launch.grid[static_cast<size_t>(i)] = grid[i];
        s.launch.block[static_cast<size_t>(i)] = static_cast<int32_t>(block[i]);
      }
      s.launch.sharedBytes = static_cast<int32_t>(shared);
      std::vector<void*> buffers;
      for (size_t a = 0; a < it->second; ++a) {
        unsigned long long address = 0;
        std::memcpy(&address, params[a], sizeof address);
        buffers.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(address)));
        s.launch.args.push_back(static_cast<cuda::BufferRef>(a));
      }
      d->emulator_->run(r, buffers, {});
      return true;
    } catch (const std::exception& e) {
      d->error_ = fmt::format("launch of {}: {}", entry, e.what());
      return false;
    }
  }

  ir::Graph compiled_;
  cuda::ProgramLayout layout_;
  std::map<std::string, size_t> args_;
  std::unique_ptr<cudatest::Emulator> emulator_;
  std::string error_;
};

/// kiln's own cuda::Program of `g` in f32 for the stand-in driver, which has neither cuBLASLt nor
/// graphs.
inline std::unique_ptr<cuda::Program> emulatedProgram(const ir::Graph& g, bool profile) {
  cuda::ProgramOptions options;
  options.blasLt = false;
  options.graphs = false;
  options.profile = profile;
  return cuda::Program::compile(passes::compiledCopy(g, passes::Precision::F32, ""), options);
}

/// Tests on the stand-in driver: skipped without the host emulation; each starts from a driver that
/// reports an sm_90 device with 16 GiB free and fails nothing.
class AotCudaEmulated : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cudatest::emulationAvailable(&why)) GTEST_SKIP() << "no host emulation: " << why;
    KilnFakeCuda& f = fake();
    f.ccMajor = 9;
    f.ccMinor = 0;
    f.failAllocs = false;
    f.failLaunch = 0;
    f.pendingError = 0;
    f.freeBytes = size_t(16) << 30;
  }
};

}  // namespace kiln::aottest
