// NVRTC compiles generated CUDA in every CI run, with or without a GPU.
#include "codegen/cuda/Nvrtc.h"
#include "support/Error.h"

#include <gtest/gtest.h>

using kiln::cuda::compileCuda;

namespace {
const char* kSaxpy = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void to_half(int n, const float* x, __half* h, __nv_bfloat16* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { h[i] = __float2half_rn(x[i]); b[i] = __float2bfloat16_rn(x[i]); }
}
)";
}  // namespace

TEST(Nvrtc, ReportsVersion) { EXPECT_EQ(kiln::cuda::nvrtcVersion().substr(0, 3), "13."); }

TEST(Nvrtc, CompilesToPtxAndCubinForAmpereAndHopper) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    auto out = compileCuda(kSaxpy, "saxpy.cu", arch);
    EXPECT_NE(out.ptx.find(".entry saxpy"), std::string::npos) << arch;
    EXPECT_NE(out.ptx.find(".entry to_half"), std::string::npos) << arch;
    EXPECT_NE(out.ptx.find(std::string(".target ") + arch), std::string::npos) << arch;
    ASSERT_GE(out.cubin.size(), 4u) << arch;
    EXPECT_EQ(std::string(out.cubin.data() + 1, 3), "ELF") << arch;  // a cubin is an ELF image
  }
}

TEST(Nvrtc, VirtualArchitectureGivesPtxOnly) {
  auto out = compileCuda(kSaxpy, "saxpy.cu", "compute_90");
  EXPECT_NE(out.ptx.find(".entry saxpy"), std::string::npos);
  EXPECT_TRUE(out.cubin.empty());
}

TEST(Nvrtc, CompileErrorCarriesTheLog) {
  try {
    compileCuda("extern \"C\" __global__ void k() { undeclared_thing = 1; }", "broken.cu", "sm_90");
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undeclared_thing"), std::string::npos) << msg;
  }
}

TEST(Nvrtc, RejectsBadArchitectureName) {
  EXPECT_THROW(compileCuda("", "x.cu", "hopper"), kiln::Error);
}
