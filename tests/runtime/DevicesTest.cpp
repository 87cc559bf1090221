// The CPU's level-1 data cache as Linux describes it (runtime/Devices.h's l1DataFrom), read from
// fake cache folders: the instruction cache skipped, malformed or missing numbers leave it unknown.
#include "runtime/Devices.h"
#include "tests/runtime/TestFiles.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace kiln::rt::test {
namespace {

void writeIndex(const ScratchDir& dir, int i, const std::map<std::string, std::string>& files) {
  const std::filesystem::path index = dir.path() / ("index" + std::to_string(i));
  std::filesystem::create_directories(index);
  for (const auto& [name, text] : files) std::ofstream(index / name) << text << "\n";
}

const std::map<std::string, std::string> kZen4Data{
    {"level", "1"}, {"type", "Data"}, {"number_of_sets", "64"}, {"ways_of_associativity", "8"}, {"coherency_line_size", "64"}};

TEST(Devices, L1DataCacheFromLinuxCacheFolders) {
  ScratchDir dir;
  writeIndex(dir, 0, {{"level", "1"}, {"type", "Instruction"}, {"number_of_sets", "64"}, {"ways_of_associativity", "8"}});
  writeIndex(dir, 1, kZen4Data);
  writeIndex(dir, 2, {{"level", "2"}, {"type", "Unified"}, {"number_of_sets", "2048"}, {"ways_of_associativity", "8"}});
  const CacheGeometry l1 = l1DataFrom(dir.path().string());
  ASSERT_TRUE(l1.known());
  EXPECT_EQ(l1.sets, 64);
  EXPECT_EQ(l1.ways, 8);
  EXPECT_EQ(l1.lineBytes, 64);
}

TEST(Devices, L1DataCacheUnknownWhereLinuxDoesNotSay) {
  EXPECT_FALSE(l1DataFrom("/nonexistent/kiln/cache").known());
  ScratchDir noData;
  writeIndex(noData, 0, {{"level", "2"}, {"type", "Unified"}});
  EXPECT_FALSE(l1DataFrom(noData.path().string()).known());
  ScratchDir malformed;
  std::map<std::string, std::string> files = kZen4Data;
  files["ways_of_associativity"] = "eight";
  writeIndex(malformed, 0, files);
  EXPECT_FALSE(l1DataFrom(malformed.path().string()).known());
  ScratchDir huge;
  files = kZen4Data;
  files["number_of_sets"] = "99999999999999999999";
  writeIndex(huge, 0, files);
  EXPECT_FALSE(l1DataFrom(huge.path().string()).known()) << "a number past int reads as unknown, not a throw";
}

}  // namespace
}  // namespace kiln::rt::test
