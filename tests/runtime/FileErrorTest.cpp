// support/File.h on what is not a plain file: links, devices, pipes, directories, endless streams.
// Every user file kiln reads or writes goes through readFileBytes and writeFileAtomically.
#include "support/File.h"

#include "TestFiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sys/stat.h>
#include <thread>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(FileErrors, WritingThroughALinkReplacesItsTargetAndKeepsTheLink) {
  ScratchDir dir;
  writeText(dir.file("real.kir"), "old");
  fs::create_symlink("real.kir", dir.file("link.kir"));
  fs::create_symlink("later.kir", dir.file("dangling.kir"));
  writeFileAtomically(dir.file("link.kir"), std::string_view("new"));
  writeFileAtomically(dir.file("dangling.kir"), std::string_view("made"));
  EXPECT_TRUE(fs::is_symlink(dir.file("link.kir")));
  EXPECT_EQ(readTextFile(dir.file("real.kir")), "new");
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.kir")));
  EXPECT_EQ(readTextFile(dir.file("later.kir")), "made");
  // Nothing but the four entries: no temporary file left beside them.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 4);
}

TEST(FileErrors, DevicesAndPipesAreWrittenThroughNotReplaced) {
  writeFileAtomically("/dev/null", std::string_view("discarded"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_THAT(errorOf([] { writeFileAtomically("/dev/full", std::string_view("x")); }),
              HasSubstr("cannot write '/dev/full'"));
  EXPECT_TRUE(fs::is_character_file("/dev/full"));

  ScratchDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = readTextFile(fifo); });
  writeFileAtomically(fifo, std::string_view("through the pipe"));
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));

  EXPECT_THAT(errorOf([&] { writeFileAtomically(dir.path().string(), std::string_view("x")); }),
              HasSubstr("it is a directory"));
}

TEST(FileErrors, AnEndlessStreamIsCutOffWithTheFileNamed) {
  EXPECT_THAT(errorOf([] { readFileBytes("/dev/zero"); }),
              HasSubstr("cannot read '/dev/zero': it is not a regular file and gave more than 1024 MiB"));
}

TEST(FileErrors, SealedCacheEntriesTellAnyDamage) {
  for (const std::string& payload : {std::string(), std::string("x"), std::string(1000, '\x7f') + "tail"}) {
    const std::string sealed = sealCacheEntry(payload);
    ASSERT_EQ(unsealCacheEntry(sealed), payload);
    for (size_t i = 0; i < sealed.size(); ++i) {  // every byte flipped, one at a time
      std::string damaged = sealed;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
      EXPECT_FALSE(unsealCacheEntry(damaged)) << payload.size() << " bytes, byte " << i;
    }
    EXPECT_FALSE(unsealCacheEntry(sealed.substr(0, sealed.size() - 1)));
    EXPECT_FALSE(unsealCacheEntry(sealed + "more"));
  }
}

}  // namespace
}  // namespace kiln::rt::test
