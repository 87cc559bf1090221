// The CUDA runtime's host-side parts, on any machine (CI has no GPU): without a driver or a device,
// making a context is a kiln::Error saying "no CUDA device"; with one, it works. The loader looks up
// the versioned symbols cuda.h maps the API names to. Allocator size classes; matmul descriptions.
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace kiln::gpu {
namespace {

using ::testing::HasSubstr;

TEST(CudaDriver, ContextWithoutDeviceSaysNoCudaDevice) {
  std::string why;
  if (available(&why)) {
    EXPECT_TRUE(why.empty());
    EXPECT_GT(deviceCount(), 0);
    Context context(0);
    EXPECT_FALSE(context.properties().name.empty());
    EXPECT_EQ(context.properties().arch().rfind("sm_", 0), 0u);
    return;
  }
  EXPECT_THAT(why, HasSubstr("no CUDA device"));
  EXPECT_EQ(deviceCount(), 0);
  try {
    Context context(0);
    FAIL() << "a context was made without a CUDA device";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no CUDA device"));
    EXPECT_THAT(e.what(), HasSubstr("device 0"));
  }
  EXPECT_THROW(driver(), Error);
}

TEST(CudaDriver, LoadsTheVersionedEntryPoints) {
  const auto& symbols = driverSymbols();
  auto has = [&](const char* s) { return std::find(symbols.begin(), symbols.end(), s) != symbols.end(); };
  for (const char* s : {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuDeviceTotalMem_v2",
                        "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuStreamDestroy_v2",
                        "cuEventDestroy_v2", "cuEventElapsedTime_v2", "cuDevicePrimaryCtxRelease_v2",
                        "cuStreamBeginCapture_v2", "cuGraphInstantiateWithFlags", "cuLaunchKernel", "cuInit"})
    EXPECT_TRUE(has(s)) << s;
  for (const char* s : {"cuMemAlloc", "cuStreamBeginCapture", "cuGraphInstantiate", "cuEventElapsedTime"})
    EXPECT_FALSE(has(s)) << s << " is the unversioned (older) entry point";
}

TEST(CudaAllocator, SizeClassesWasteUnderAQuarter) {
  EXPECT_EQ(DeviceAllocator::sizeClass(1), 512u);
  EXPECT_EQ(DeviceAllocator::sizeClass(512), 512u);
  EXPECT_EQ(DeviceAllocator::sizeClass(513), 640u);
  EXPECT_EQ(DeviceAllocator::sizeClass(1000), 1024u);
  EXPECT_EQ(DeviceAllocator::sizeClass(1025), 1280u);
  EXPECT_EQ(DeviceAllocator::sizeClass(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(DeviceAllocator::sizeClass((size_t(3) << 20) + 1), size_t(7) << 19);  // 3 MiB + 1 → 3.5 MiB
  for (size_t bytes = 1; bytes < (size_t(1) << 40); bytes = bytes * 3 + 1) {
    size_t block = DeviceAllocator::sizeClass(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_TRUE(block == 512 || block < bytes + bytes / 4 + 1) << bytes << " -> " << block;
    EXPECT_EQ(DeviceAllocator::sizeClass(block), block) << bytes;
  }
}

TEST(CudaMatmulDesc, DescribesProducts) {
  MatmulDesc d;
  d.m = 37, d.n = 19, d.k = 23;
  d.transA = true;
  d.batch = 3;
  d.inputType = DType::bf16;
  d.epilogue = Epilogue::biasRelu;
  EXPECT_EQ(d.str(), "37x19x23 (transA) batch 3, bf16 -> f32, bias_relu");
  EXPECT_EQ(epilogueName(Epilogue::biasGradB), "bias_grad_b");
}

}  // namespace
}  // namespace kiln::gpu
