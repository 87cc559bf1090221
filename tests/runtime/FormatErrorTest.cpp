// Error messages of the JSON, IDX and CSV readers and of missing data sets.
#include "runtime/Datasets.h"
#include "runtime/FileIO.h"
#include "runtime/Json.h"

#include "TestFiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt {
namespace {

using test::errorOf;
using test::ScratchDir;
using test::toBytes;
using ::testing::HasSubstr;

std::string jsonError(std::string_view text) {
  return errorOf([&] { json::parse(text, "doc"); });
}

TEST(JsonErrors, SyntaxErrorsNameTheByte) {
  EXPECT_THAT(jsonError("[1,]"), HasSubstr("doc: invalid json at byte 3"));
  EXPECT_THAT(jsonError("{\"a\" 1}"), HasSubstr("expected ':'"));
  EXPECT_THAT(jsonError("01"), HasSubstr("leading zeros"));
  EXPECT_THAT(jsonError("1."), HasSubstr("expected a digit"));
  EXPECT_THAT(jsonError("\"abc"), HasSubstr("unterminated string"));
  EXPECT_THAT(jsonError("\"a\nb\""), HasSubstr("control character"));
  EXPECT_THAT(jsonError(R"("\x")"), HasSubstr("invalid escape"));
  EXPECT_THAT(jsonError(R"("\ud800")"), HasSubstr("unpaired high surrogate"));
  EXPECT_THAT(jsonError(R"("\udc00")"), HasSubstr("unpaired low surrogate"));
  EXPECT_THAT(jsonError("\"\xC0\xAF\""), HasSubstr("invalid utf-8"));  // overlong '/'
  EXPECT_THAT(jsonError("\"\xED\xA0\x80\""), HasSubstr("invalid utf-8"));  // encoded surrogate
  EXPECT_THAT(jsonError("tru"), HasSubstr("unknown literal"));
  EXPECT_THAT(jsonError(""), HasSubstr("unexpected end of input"));
  EXPECT_THAT(jsonError("{} {}"), HasSubstr("unexpected characters"));
  EXPECT_THAT(jsonError(std::string(100, '[')), HasSubstr("nesting deeper"));
}

TEST(JsonErrors, EveryPrefixOfADocumentParsesOrThrows) {
  std::string doc = R"({"a": [1, -2.5e+3, "x\u00e9\ud83d\ude00"], "b": {"c": true, "d": null}})";
  for (size_t len = 0; len < doc.size(); ++len)
    EXPECT_THROW(json::parse(std::string_view(doc).substr(0, len), "p"), kiln::Error) << len;
  EXPECT_NO_THROW(json::parse(doc, "p"));
}

TEST(IdxErrors, MalformedFiles) {
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0}), "f.idx"); }), HasSubstr("f.idx: not an idx file: only 2 bytes"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({1, 0, 8, 1, 0, 0, 0, 0}), "f.idx"); }),
              HasSubstr("first two bytes must be zero (magic number 0x01000801)"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0, 0x0A, 1, 0, 0, 0, 0}), "f.idx"); }),
              HasSubstr("unknown idx element type code 0x0a"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0, 8, 2, 0, 0, 0, 1}), "f.idx"); }),
              HasSubstr("truncated idx header: 2 dimensions need 12 bytes, the file has 8"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0, 0x0B, 1, 0, 0, 0, 2, 1, 2, 3}), "f.idx"); }),
              HasSubstr("idx dimensions [2] of 2-byte elements need 4 bytes of data, the file has 3 (truncated?)"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0, 8, 1, 0, 0, 0, 1, 1, 2}), "f.idx"); }),
              HasSubstr("need 1 bytes of data, the file has 2"));
  EXPECT_THAT(errorOf([] { parseIdx(toBytes({0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}),
                                    "f.idx"); }),
              HasSubstr("are too large"));
}

TEST(IdxErrors, TruncatedAndCorruptGzip) {
  ScratchDir dir;
  std::vector<std::byte> plain = toBytes({0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4});
  std::vector<std::byte> gz = gzip(plain);
  for (size_t len = 2; len < gz.size(); ++len) {
    std::string path = dir.file("cut.gz");
    test::writeBytes(path, std::vector<std::byte>(gz.begin(), gz.begin() + static_cast<long>(len)));
    EXPECT_THROW(readIdx(path), kiln::Error) << "gzip prefix of " << len << " bytes";
  }
  std::string path = dir.file("cut.gz");
  test::writeBytes(path, std::vector<std::byte>(gz.begin(), gz.end() - 4));
  EXPECT_THAT(errorOf([&] { readIdx(path); }), HasSubstr("'" + path + "': truncated gzip data"));
  std::vector<std::byte> corrupt = gz;
  corrupt[12] ^= std::byte{0x55};
  corrupt[13] ^= std::byte{0x55};
  test::writeBytes(path, corrupt);
  EXPECT_THAT(errorOf([&] { readIdx(path); }), HasSubstr("gzip data"));
  EXPECT_THAT(errorOf([&] { readIdx(dir.file("absent")); }), HasSubstr("cannot open '" + dir.file("absent") + "'"));
}

TEST(IdxErrors, DecompressionBombGuard) {
  std::vector<std::byte> zeros(1 << 20);
  std::vector<std::byte> gz = gzip(zeros);
  EXPECT_THAT(errorOf([&] { gunzip(gz, "bomb", 1000); }), HasSubstr("bomb: gzip data decompresses to more than 1000 bytes"));
  EXPECT_EQ(gunzip(gz, "ok").size(), zeros.size());
}

TEST(CsvErrors, MessagesNameLineAndField) {
  EXPECT_THAT(errorOf([] { parseCsv("1,2\n3,abc\n", "t.csv"); }), HasSubstr("t.csv:2: field 2 is not a number: 'abc'"));
  EXPECT_THAT(errorOf([] { parseCsv("1,2\n\n3\n", "t.csv"); }),
              HasSubstr("t.csv:3: row has 1 fields, expected 2 (as in the first row)"));
  EXPECT_THAT(errorOf([] { parseCsv("a,b\n1,2,3\n", "t.csv", {.header = true}); }), HasSubstr("(as in the header)"));
  EXPECT_THAT(errorOf([] { parseCsv("1,,2\n", "t.csv"); }), HasSubstr("field 2 is not a number: ''"));
  EXPECT_THAT(errorOf([] { parseCsv("2\n\n1.5\n", "t.csv").column(0, DType::i64); }),
              HasSubstr("t.csv:3: field 1 is not a valid i64 value: 1.5"));
  EXPECT_THAT(errorOf([] { parseCsv("1\n", "t.csv").columns(0, 2, DType::f32); }), HasSubstr("t.csv: columns [0, 2) out of range"));
}

TEST(DatasetErrors, MissingFashionMnistNamesPackageAndSetup) {
  ScratchDir dir;
  std::string e = errorOf([&] { loadFashionMnist(Split::Test, dir.path().string()); });
  EXPECT_THAT(e, HasSubstr("fashion-mnist data set not found"));
  EXPECT_THAT(e, HasSubstr(dir.file("t10k-images-idx3-ubyte.gz")));
  EXPECT_THAT(e, HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(e, HasSubstr("scripts/setup.sh"));
}

TEST(DatasetErrors, MissingSklearnDataNamesPackageAndSetup) {
  ScratchDir dir;
  std::string e = errorOf([&] { loadDigits(dir.path().string()); });
  EXPECT_THAT(e, HasSubstr("digits data set not found"));
  EXPECT_THAT(e, HasSubstr(dir.file("digits.csv.gz")));
  EXPECT_THAT(e, HasSubstr("python3-sklearn"));
  EXPECT_THAT(e, HasSubstr("scripts/setup.sh"));
  EXPECT_THAT(errorOf([&] { loadIris(dir.path().string()); }), HasSubstr("iris data set not found"));
}

TEST(DatasetErrors, MalformedDataSetFiles) {
  ScratchDir dir;
  test::writeText(dir.file("iris.csv"), "3,2,a,b\n1,2,0\n3,4,5\n5,6,1\n");
  EXPECT_THAT(errorOf([&] { loadIris(dir.path().string()); }), HasSubstr("iris.csv':3: label 5 is not one of the 2 classes"));
  test::writeText(dir.file("iris.csv"), "4,2,a,b\n1,2,0\n");
  EXPECT_THAT(errorOf([&] { loadIris(dir.path().string()); }), HasSubstr("announces 4 iris samples, the file has 1"));
  test::writeText(dir.file("iris.csv"), "1,2,a\n1,2\n");
  EXPECT_THAT(errorOf([&] { loadIris(dir.path().string()); }), HasSubstr("rows have 2 fields, expected 2 features and a label"));
  test::writeText(dir.file("iris.csv"), "hello\n");
  EXPECT_THAT(errorOf([&] { loadIris(dir.path().string()); }), HasSubstr("expected scikit-learn's first line"));
  // Labels and images that disagree in count.
  test::writeBytes(dir.file("t10k-images-idx3-ubyte"), toBytes({0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 7, 8}));
  test::writeBytes(dir.file("t10k-labels-idx1-ubyte"), toBytes({0, 0, 8, 1, 0, 0, 0, 1, 3}));
  EXPECT_THAT(errorOf([&] { loadFashionMnist(Split::Test, dir.path().string()); }),
              HasSubstr("holds 2 images but"));
  test::writeBytes(dir.file("t10k-labels-idx1-ubyte"), toBytes({0, 0, 8, 1, 0, 0, 0, 2, 3, 10}));
  EXPECT_THAT(errorOf([&] { loadFashionMnist(Split::Test, dir.path().string()); }),
              HasSubstr("label 10 of example 1 is not a class index"));
  test::writeBytes(dir.file("t10k-labels-idx1-ubyte"), toBytes({0, 0, 8, 1, 0, 0, 0, 2, 3, 4}));
  ImageDataset ds = loadFashionMnist(Split::Test, dir.path().string());  // uncompressed files are accepted
  EXPECT_EQ(ds.images.typeStr(), "f32[2,1,1,1]");
  EXPECT_FLOAT_EQ(ds.images.as<float>()[1], 8.0f / 255.0f);
}

}  // namespace
}  // namespace kiln::rt
