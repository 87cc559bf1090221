// Every class of malformed safetensors input is a kiln::Error whose message names the file, the
// tensor and the problem; no input crashes the reader.
#include "runtime/Safetensors.h"

#include "TestFiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace kiln::rt {
namespace {

using test::errorOf;
using test::ScratchDir;
using ::testing::HasSubstr;

std::vector<std::byte> fileWith(const std::string& header, size_t dataBytes, uint64_t declaredLength = ~0ull) {
  std::vector<std::byte> file(8);
  uint64_t n = declaredLength == ~0ull ? header.size() : declaredLength;
  std::memcpy(file.data(), &n, 8);
  for (char c : header) file.push_back(static_cast<std::byte>(c));
  file.resize(file.size() + dataBytes, std::byte{0});
  return file;
}

std::string parseError(const std::string& header, size_t dataBytes) {
  return errorOf([&] { parseSafetensors(fileWith(header, dataBytes), "model.safetensors"); });
}

TEST(SafetensorsErrors, ShortFile) {
  std::string e = errorOf([] { parseSafetensors(test::toBytes({1, 0, 0}), "x.safetensors"); });
  EXPECT_THAT(e, HasSubstr("x.safetensors"));
  EXPECT_THAT(e, HasSubstr("shorter than the 8-byte header length"));
}

TEST(SafetensorsErrors, HeaderLengthBeyondFile) {
  std::string e = errorOf([] { parseSafetensors(fileWith("{}", 0, 1000), "m"); });
  EXPECT_THAT(e, HasSubstr("header length 1000 exceeds the 2 bytes"));
  e = errorOf([] { parseSafetensors(fileWith("{}", 0, ~0ull - 1), "m"); });
  EXPECT_THAT(e, HasSubstr("exceeds the limit"));
}

TEST(SafetensorsErrors, InvalidJson) {
  EXPECT_THAT(parseError(R"({"a": {"dtype": "F32",})", 0), HasSubstr("model.safetensors: header: invalid json at byte"));
  EXPECT_THAT(parseError(R"({"a": 1} trailing)", 0), HasSubstr("unexpected characters after the value"));
  EXPECT_THAT(parseError("{\"a\xFF\": 1}", 0), HasSubstr("invalid utf-8"));
  EXPECT_THAT(parseError(R"({"a": 1, "a": 2})", 0), HasSubstr("duplicate key \"a\""));
  EXPECT_THAT(parseError("{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}", 0),
              HasSubstr("nesting deeper than 64"));
  EXPECT_THAT(parseError("[1, 2]", 0), HasSubstr("must be a json object"));
  EXPECT_THAT(parseError("", 0), HasSubstr("must be a json object"));
}

TEST(SafetensorsErrors, BadTensorEntries) {
  EXPECT_THAT(parseError(R"({"w": 3})", 0), HasSubstr("tensor \"w\": expected an object"));
  EXPECT_THAT(parseError(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4),
              HasSubstr("tensor \"w\": missing \"dtype\""));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), HasSubstr("missing \"shape\""));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [1]}})", 4), HasSubstr("missing \"data_offsets\""));
  EXPECT_THAT(parseError(R"({"w": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})", 4),
              HasSubstr("\"dtype\" must be a string"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", 4),
              HasSubstr("\"shape\" must be an array"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
              HasSubstr("shape entries must be non-negative integers, found -1"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
              HasSubstr("found 1.5"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
              HasSubstr("array of two integers"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
              HasSubstr("must be non-negative integers"));
  EXPECT_THAT(parseError(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4),
              HasSubstr("end before they begin"));
}

TEST(SafetensorsErrors, UnknownAndUnsupportedDTypes) {
  std::string e = parseError(R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_THAT(e, HasSubstr("model.safetensors: tensor \"w\": unknown dtype \"F33\""));
  e = parseError(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", 1);
  EXPECT_THAT(e, HasSubstr("unsupported dtype \"U8\""));
  EXPECT_THAT(e, HasSubstr("BF16"));  // lists what is supported
}

TEST(SafetensorsErrors, ShapeDoesNotMatchOffsets) {
  std::string e = parseError(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 20);
  EXPECT_THAT(e, HasSubstr("tensor \"w\": data_offsets [0, 20] span 20 bytes but F32[2,3] needs 24 bytes"));
}

TEST(SafetensorsErrors, ShapeProductOverflow) {
  // 2^32 * 2^32 * 4 bytes wraps to 0 in 64 bits: must be caught, not matched against [0, 0].
  std::string e = parseError(
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0);
  EXPECT_THAT(e, HasSubstr("tensor \"w\": shape [4294967296,4294967296] is too large"));
  e = parseError(R"({"w": {"dtype": "F32", "shape": [99999999999999999999], "data_offsets": [0, 0]}})", 0);
  EXPECT_THAT(e, HasSubstr("non-negative integers"));
  // Even with a zero dimension the other dimensions may not overflow (element counts must fit).
  e = parseError(R"({"w": {"dtype": "F32", "shape": [0, 4294967296, 4294967296], "data_offsets": [0, 0]}})", 0);
  EXPECT_THAT(e, HasSubstr("is too large"));
  EXPECT_NO_THROW(parseSafetensors(
      fileWith(R"({"w": {"dtype": "F32", "shape": [65536, 0, 65536], "data_offsets": [0, 0]}})", 0), "m"));
}

TEST(SafetensorsErrors, OffsetsOutOfRange) {
  std::string e = parseError(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4);
  EXPECT_THAT(e, HasSubstr("tensor \"w\": data_offsets [0, 8] run past the end of the 4-byte data buffer"));
  e = parseError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551616]}})", 4);
  EXPECT_THAT(e, HasSubstr("non-negative integers"));  // 2^64 does not fit
}

TEST(SafetensorsErrors, OverlappingOffsets) {
  std::string e = parseError(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12);
  EXPECT_THAT(e, HasSubstr("tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" ([0, 8])"));
  e = parseError(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_THAT(e, HasSubstr("overlap"));
}

TEST(SafetensorsErrors, GapsAndUncoveredBytes) {
  std::string e = parseError(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  EXPECT_THAT(e, HasSubstr("tensor \"a\": data_offsets [4, 8] leave a gap: bytes [0, 4) belong to no tensor"));
  e = parseError(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 6);
  EXPECT_THAT(e, HasSubstr("the data buffer has 6 bytes but the tensors cover only 4"));
}

TEST(SafetensorsErrors, Metadata) {
  EXPECT_THAT(parseError(R"({"__metadata__": {"k": 1}})", 0),
              HasSubstr("\"__metadata__\" value for \"k\" must be a string, found a number"));
  EXPECT_THAT(parseError(R"({"__metadata__": []})", 0), HasSubstr("\"__metadata__\" must be an object"));
}

TEST(SafetensorsErrors, BoolBytesMustBeZeroOrOne) {
  std::vector<std::byte> file = fileWith(R"({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}})", 3);
  file[file.size() - 2] = std::byte{2};
  std::string e = errorOf([&] { parseSafetensors(file, "m.safetensors"); });
  EXPECT_THAT(e, HasSubstr("tensor \"m\": BOOL element 1 has byte value 2"));
}

TEST(SafetensorsErrors, FileErrorsNameThePath) {
  ScratchDir dir;
  std::string missing = dir.file("nope.safetensors");
  EXPECT_THAT(errorOf([&] { loadSafetensors(missing); }), HasSubstr("cannot open '" + missing + "'"));
  std::string bad = dir.file("bad.safetensors");
  test::writeBytes(bad, fileWith(R"({"w": {"dtype": "X", "shape": [], "data_offsets": [0, 4]}})", 4));
  EXPECT_THAT(errorOf([&] { loadSafetensors(bad); }), HasSubstr("'" + bad + "': tensor \"w\": unknown dtype"));
  EXPECT_THAT(errorOf([&] { loadSafetensors(dir.path().string()); }), HasSubstr("is a directory"));
}

TEST(SafetensorsErrors, FailedSaveKeepsExistingFile) {
  ScratchDir dir;
  std::string path = dir.file("w.safetensors");
  NamedTensors good{{"x", HostTensor::fromVector<double>(DType::f32, {2}, {1, 2})}};
  saveSafetensors(path, good);
  NamedTensors bad{{"x", HostTensor::fromVector<double>(DType::f32, {1}, {9})}, {"y", HostTensor()}};
  EXPECT_THAT(errorOf([&] { saveSafetensors(path, bad); }), HasSubstr("tensor \"y\""));
  EXPECT_THAT(errorOf([&] { saveSafetensors(path, {{"__metadata__", HostTensor(DType::f32, {1})}}); }),
              HasSubstr("reserved"));
  EXPECT_TRUE(loadSafetensors(path).at("x").identical(good.at("x")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);  // no temporaries left
  std::string inMissingDir = dir.file("no/such/dir/w.safetensors");
  EXPECT_THAT(errorOf([&] { saveSafetensors(inMissingDir, good); }), HasSubstr("cannot write '" + inMissingDir + "'"));
}

std::vector<std::byte> sampleFile() {
  NamedTensors m;
  m["weight"] = HostTensor::fromVector<double>(DType::f32, {2, 2}, {1, 2, 3, 4});
  m["bias"] = HostTensor::fromVector<double>(DType::bf16, {2}, {0.5, -0.5});
  m["mask"] = HostTensor::fromVector<double>(DType::boolean, {3}, {1, 0, 1});
  m["step"] = HostTensor::fromVector<double>(DType::i64, {}, {7});
  return serializeSafetensors(m, {{"format", "kiln"}});
}

TEST(SafetensorsErrors, EveryTruncationThrowsCleanly) {
  std::vector<std::byte> file = sampleFile();
  ASSERT_EQ(parseSafetensors(file, "full").size(), 4u);
  for (size_t len = 0; len < file.size(); ++len) {
    std::span<const std::byte> prefix(file.data(), len);
    EXPECT_THROW(parseSafetensors(prefix, "prefix"), kiln::Error) << "prefix of " << len << " bytes";
  }
}

TEST(SafetensorsErrors, EverySingleByteCorruptionParsesOrThrows) {
  std::vector<std::byte> file = sampleFile();
  int parsed = 0, rejected = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (int value : {0x00, 0x01, 0x22, 0x2C, 0x30, 0x5B, 0x7B, 0x7D, 0xFF}) {
      std::vector<std::byte> bad = file;
      bad[i] = static_cast<std::byte>(value);
      try {
        parseSafetensors(bad, "corrupt");
        ++parsed;
      } catch (const kiln::Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(parsed, 0);  // data bytes may change freely
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace kiln::rt
