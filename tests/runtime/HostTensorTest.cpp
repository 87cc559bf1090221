// Host tensors' memory: 64-byte aligned and zeroed, and under KILN_GUARD_PAGES=1 (which the test
// suite sets) ending where a page without access begins, so a write past a buffer faults at once.
#include "runtime/HostTensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kiln::rt {
namespace {

bool guarded() {
  const char* v = std::getenv("KILN_GUARD_PAGES");
  return v && *v && std::strcmp(v, "0") != 0;
}

TEST(HostTensor, BuffersAreAlignedZeroedAndWholeToTheirLastByte) {
  for (int64_t n : {0, 1, 15, 16, 17, 1024, 1025, 100000}) {
    SCOPED_TRACE(n);
    HostTensor t(DType::f32, {n});
    ASSERT_NE(t.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
    const auto* bytes = static_cast<const unsigned char*>(t.data());
    for (int64_t i = 0; i < n * 4; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
    const int64_t rounded = std::max<int64_t>((n * 4 + 63) / 64 * 64, 64);
    std::memset(t.data(), 0x5a, static_cast<size_t>(rounded));  // the whole rounded buffer is ours
    HostTensor copy = t;
    EXPECT_EQ(std::memcmp(copy.data(), t.data(), static_cast<size_t>(n * 4)), 0);
  }
}

TEST(HostTensorDeathTest, AWritePastTheEndFaultsWithGuardPages) {
  if (!guarded()) GTEST_SKIP() << "KILN_GUARD_PAGES is not set (ctest sets it)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int64_t n : {1, 16, 1000, 4096}) {
    SCOPED_TRACE(n);
    const int64_t rounded = std::max<int64_t>((n * 4 + 63) / 64 * 64, 64);
    EXPECT_DEATH(
        {
          HostTensor t(DType::f32, {n});
          static_cast<volatile unsigned char*>(t.data())[rounded] = 1;
        },
        "");
  }
}

}  // namespace
}  // namespace kiln::rt
