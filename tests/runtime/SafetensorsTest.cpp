#include "runtime/Safetensors.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kiln::rt {
namespace {

using test::ScratchDir;

std::string headerOf(const std::vector<std::byte>& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return std::string(reinterpret_cast<const char*>(file.data() + 8), n);
}

template <typename T>
HostTensor raw(DType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_EQ(t.bytes(), values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data(), values.data(), t.bytes());
  return t;
}

NamedTensors everyDType() {
  NamedTensors m;
  m["f32"] = HostTensor::fromVector<double>(DType::f32, {2, 3}, {1, -2, 3.5, 0, -0.0, 1e-40});
  // f16 and bf16 by bit pattern: 1, -0, inf, NaN, smallest subnormal, largest finite.
  m["f16"] = raw<uint16_t>(DType::f16, {6}, {0x3C00, 0x8000, 0x7C00, 0x7E01, 0x0001, 0x7BFF});
  m["bf16"] = raw<uint16_t>(DType::bf16, {2, 3}, {0x3F80, 0x8000, 0x7F80, 0x7FC1, 0x0001, 0x7F7F});
  m["f64"] = HostTensor::fromVector<double>(DType::f64, {2}, {3.141592653589793, -1e300});
  m["i32"] = raw<int32_t>(DType::i32, {3}, {INT32_MIN, -1, INT32_MAX});
  m["i64"] = raw<int64_t>(DType::i64, {2}, {INT64_MIN, INT64_MAX});
  m["bool"] = raw<uint8_t>(DType::boolean, {2, 2}, {1, 0, 0, 1});
  m["scalar"] = HostTensor::fromVector<double>(DType::f32, {}, {42});
  m["empty"] = HostTensor(DType::f32, {0});
  m["empty2d"] = HostTensor(DType::i64, {3, 0});
  return m;
}

void expectSameTensors(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    EXPECT_TRUE(t.identical(it->second)) << name << ": " << t.typeStr() << " vs " << it->second.typeStr();
  }
}

TEST(Safetensors, RoundTripsEveryDTypeBitExactly) {
  NamedTensors m = everyDType();
  std::vector<std::byte> file = serializeSafetensors(m);
  NamedTensors back = parseSafetensors(file, "mem");
  expectSameTensors(m, back);
  EXPECT_EQ(back.at("scalar").rank(), 0);
  EXPECT_EQ(back.at("scalar").at(0), 42.0);
  EXPECT_EQ(back.at("empty").shape(), (std::vector<int64_t>{0}));
  EXPECT_EQ(back.at("empty2d").shape(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(back.at("f16").as<uint16_t>()[3], 0x7E01);  // NaN payload kept
}

TEST(Safetensors, SaveAndLoadFileWithMetadata) {
  ScratchDir dir;
  std::string path = dir.file("w.safetensors");
  NamedTensors m = everyDType();
  Metadata meta{{"format", "kiln"}, {"note", "quote \" and newline \n and \xC3\xA9"}};
  saveSafetensors(path, m, meta);
  Metadata got;
  NamedTensors back = loadSafetensors(path, &got);
  expectSameTensors(m, back);
  EXPECT_EQ(got, meta);
  // Nothing but the file itself is left in the directory (the temporary was renamed).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(Safetensors, LayoutMatchesReferenceImplementation) {
  NamedTensors m;
  m["a"] = raw<uint8_t>(DType::boolean, {1}, {1});
  m["b"] = HostTensor::fromVector<double>(DType::f64, {1}, {2.0});
  m["c"] = raw<uint16_t>(DType::f16, {3}, {0x3C00, 0x4000, 0x4200});
  std::vector<std::byte> file = serializeSafetensors(m, {{"k", "v"}});
  std::string header = headerOf(file);
  // Largest elements first, then by name; compact JSON; padded with spaces to a multiple of 8.
  std::string expected =
      R"({"__metadata__":{"k":"v"},"b":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
      R"("c":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},"a":{"dtype":"BOOL","shape":[1],"data_offsets":[14,15]}})";
  ASSERT_EQ(header.substr(0, expected.size()), expected);
  EXPECT_EQ(header.size() % 8, 0u);
  EXPECT_EQ(header.size() - expected.size(), (8 - expected.size() % 8) % 8);
  EXPECT_EQ(header.find_first_not_of(' ', expected.size()), std::string::npos);
  ASSERT_EQ(file.size(), 8 + header.size() + 15);
  const std::byte* data = file.data() + 8 + header.size();
  double b;
  std::memcpy(&b, data, 8);
  EXPECT_EQ(b, 2.0);
  EXPECT_EQ(std::to_integer<int>(data[8]), 0x00);  // 0x3C00 little endian
  EXPECT_EQ(std::to_integer<int>(data[9]), 0x3C);
  EXPECT_EQ(std::to_integer<int>(data[14]), 1);
}

TEST(Safetensors, EmptyMapIsAValidFile) {
  std::vector<std::byte> file = serializeSafetensors({});
  EXPECT_EQ(file.size(), 16u);
  EXPECT_EQ(headerOf(file), "{}      ");
  EXPECT_TRUE(parseSafetensors(file, "mem").empty());
}

TEST(Safetensors, ReadsHandWrittenFileWithSpacesAndAnyKeyOrder) {
  // As Python's json.dumps would write it: spaces after separators, fields in another order.
  std::string header =
      R"({"w": {"shape": [], "data_offsets": [0, 8], "dtype": "I64"}, "__metadata__": {"format": "pt"}})";
  std::vector<std::byte> file(8);
  uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  for (char c : header) file.push_back(static_cast<std::byte>(c));
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::byte>(i == 0 ? 0xFE : 0xFF));  // -2
  Metadata meta;
  NamedTensors m = parseSafetensors(file, "mem", &meta);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.at("w").typeStr(), "i64[]");
  EXPECT_EQ(m.at("w").as<int64_t>()[0], -2);
  EXPECT_EQ(meta.at("format"), "pt");
}

TEST(Safetensors, OverwritesExistingFile) {
  ScratchDir dir;
  std::string path = dir.file("w.safetensors");
  saveSafetensors(path, {{"x", HostTensor::fromVector<double>(DType::f32, {1}, {1})}});
  saveSafetensors(path, {{"y", HostTensor::fromVector<double>(DType::f32, {2}, {2, 3})}});
  NamedTensors back = loadSafetensors(path);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back.at("y").toDoubles(), (std::vector<double>{2, 3}));
}

TEST(Safetensors, DTypeNames) {
  for (DType t : kAllDTypes) EXPECT_EQ(dtypeFromSafetensors(safetensorsDTypeName(t)), t);
  EXPECT_EQ(safetensorsDTypeName(DType::bf16), "BF16");
  EXPECT_EQ(dtypeFromSafetensors("U8"), std::nullopt);
}

}  // namespace
}  // namespace kiln::rt
