#include "runtime/Idx.h"

#include "runtime/FileIO.h"
#include "TestFiles.h"

#include <gtest/gtest.h>

namespace kiln::rt {
namespace {

using test::ScratchDir;
using test::toBytes;

// A 2x3 unsigned-byte image followed by nothing else, written byte by byte as the format defines.
std::vector<std::byte> ubyteFile() {
  return toBytes({0, 0, 0x08, 2, /*dims*/ 0, 0, 0, 2, 0, 0, 0, 3, /*data*/ 0, 1, 127, 128, 254, 255});
}

TEST(Idx, ReadsPlainUnsignedBytes) {
  ScratchDir dir;
  std::string path = dir.file("images-idx2-ubyte");
  test::writeBytes(path, ubyteFile());
  HostTensor t = readIdx(path);
  EXPECT_EQ(t.typeStr(), "i32[2,3]");
  EXPECT_EQ(t.toDoubles(), (std::vector<double>{0, 1, 127, 128, 254, 255}));
}

TEST(Idx, ReadsGzipCompressedFiles) {
  ScratchDir dir;
  std::vector<std::byte> plain = ubyteFile();
  std::string path = dir.file("images-idx2-ubyte.gz");
  test::writeBytes(path, gzip(plain));
  EXPECT_TRUE(readIdx(path).identical(parseIdx(plain, "mem")));
  // Detection is by content: a gzip file without the .gz suffix still reads.
  std::string misnamed = dir.file("misnamed");
  test::writeBytes(misnamed, gzip(plain));
  EXPECT_TRUE(readIdx(misnamed).identical(parseIdx(plain, "mem")));
}

TEST(Idx, SignedAndWideElementTypesAreBigEndian) {
  HostTensor i8 = parseIdx(toBytes({0, 0, 0x09, 1, 0, 0, 0, 3, 0x7F, 0x80, 0xFF}), "i8");
  EXPECT_EQ(i8.typeStr(), "i32[3]");
  EXPECT_EQ(i8.toDoubles(), (std::vector<double>{127, -128, -1}));

  HostTensor i16 = parseIdx(toBytes({0, 0, 0x0B, 1, 0, 0, 0, 2, 0x01, 0x02, 0xFF, 0xFE}), "i16");
  EXPECT_EQ(i16.toDoubles(), (std::vector<double>{258, -2}));

  HostTensor i32 = parseIdx(toBytes({0, 0, 0x0C, 1, 0, 0, 0, 2, 0x00, 0x01, 0x00, 0x00, 0x80, 0, 0, 0}), "i32");
  EXPECT_EQ(i32.toDoubles(), (std::vector<double>{65536, -2147483648.0}));

  HostTensor f32 = parseIdx(toBytes({0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3F, 0xC0, 0, 0, 0xC1, 0x20, 0, 0}), "f32");
  EXPECT_EQ(f32.typeStr(), "f32[2]");
  EXPECT_EQ(f32.toDoubles(), (std::vector<double>{1.5, -10.0}));

  HostTensor f64 = parseIdx(toBytes({0, 0, 0x0E, 1, 0, 0, 0, 1, 0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}), "f64");
  EXPECT_EQ(f64.typeStr(), "f64[1]");
  EXPECT_EQ(f64.at(0), 3.141592653589793);
}

TEST(Idx, ZeroDimensionalAndEmptyArrays) {
  HostTensor scalar = parseIdx(toBytes({0, 0, 0x08, 0, 42}), "scalar");
  EXPECT_EQ(scalar.typeStr(), "i32[]");
  EXPECT_EQ(scalar.at(0), 42);
  HostTensor empty = parseIdx(toBytes({0, 0, 0x0D, 2, 0, 0, 0, 0, 0, 0, 0, 5}), "empty");
  EXPECT_EQ(empty.typeStr(), "f32[0,5]");
}

}  // namespace
}  // namespace kiln::rt
