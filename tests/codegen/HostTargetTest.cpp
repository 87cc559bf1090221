#include "codegen/cpu/HostTarget.h"
#include "runtime/Devices.h"

#include <gtest/gtest.h>

#include <algorithm>

using kiln::cpu::detectHostTarget;

TEST(HostTarget, DescribesThisMachine) {
  auto t = detectHostTarget();
  EXPECT_NE(t.triple.find("x86_64"), std::string::npos) << t.triple;
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_TRUE(std::is_sorted(t.features.begin(), t.features.end()));
  EXPECT_EQ(t.llvmVersion.substr(0, 3), "19.");
  // Every x86-64 CPU has SSE2, so at least 4 lanes; the lanes follow the features LLVM reports.
  EXPECT_TRUE(t.has("sse2"));
  EXPECT_EQ(t.f32Lanes(), t.has("avx512f") ? 16 : t.has("avx2") ? 8 : 4);
}

TEST(HostTarget, AgreesWithProcCpuinfo) {
  auto cpu = kiln::rt::cpuInfo();
  auto t = detectHostTarget();
  EXPECT_GT(cpu.logicalCores, 0);
  bool procAvx512 = std::find(cpu.isa.begin(), cpu.isa.end(), "avx512f") != cpu.isa.end();
  EXPECT_EQ(procAvx512, t.has("avx512f"));
  bool procAvx2 = std::find(cpu.isa.begin(), cpu.isa.end(), "avx2") != cpu.isa.end();
  EXPECT_EQ(procAvx2, t.has("avx2"));
}

TEST(Devices, CudaStatusNeverThrowsAndExplainsAbsence) {
  auto st = kiln::rt::cudaStatus();
  if (st.devices.empty()) {
    EXPECT_FALSE(st.problem.empty());
  }
  for (const auto& d : st.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.ccMajor, 3);
    EXPECT_GT(d.memoryBytes, 0u);
  }
}
