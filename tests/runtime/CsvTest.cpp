#include "runtime/Csv.h"

#include "runtime/FileIO.h"
#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::rt {
namespace {

using test::ScratchDir;

TEST(Csv, ParsesNumbersWithHeader) {
  CsvTable t = parseCsv("x, y ,label\r\n1.5,-2,0\r\n\r\n +3 ,\"4e2\",1\n", "mem", {.header = true});
  EXPECT_EQ(t.header, (std::vector<std::string>{"x", "y", "label"}));
  EXPECT_EQ(t.rows, 2);
  EXPECT_EQ(t.cols, 3);
  EXPECT_EQ(t.values, (std::vector<double>{1.5, -2, 0, 3, 400, 1}));
  EXPECT_EQ(t.at(1, 1), 400);
}

TEST(Csv, ColumnsBecomeTensors) {
  CsvTable t = parseCsv("1,2,3\n4,5,6\n", "mem");
  HostTensor x = t.columns(0, 2, DType::f32);
  EXPECT_EQ(x.typeStr(), "f32[2,2]");
  EXPECT_EQ(x.toDoubles(), (std::vector<double>{1, 2, 4, 5}));
  HostTensor y = t.column(2, DType::i64);
  EXPECT_EQ(y.typeStr(), "i64[2]");
  EXPECT_EQ(y.toDoubles(), (std::vector<double>{3, 6}));
}

TEST(Csv, OtherDelimitersAndSpecialValues) {
  CsvTable t = parseCsv("nan;inf;-inf;1e999\n", "mem", {.delimiter = ';'});
  ASSERT_EQ(t.cols, 4);
  EXPECT_TRUE(std::isnan(t.at(0, 0)));
  EXPECT_EQ(t.at(0, 1), INFINITY);
  EXPECT_EQ(t.at(0, 2), -INFINITY);
  EXPECT_EQ(t.at(0, 3), INFINITY);
}

TEST(Csv, EmptyInputIsAnEmptyTable) {
  CsvTable t = parseCsv("\n\n", "mem");
  EXPECT_EQ(t.rows, 0);
  EXPECT_EQ(t.cols, 0);
}

TEST(Csv, ReadsPlainAndGzipFiles) {
  ScratchDir dir;
  std::string text = "a,b\n1,2\n3,4\n";
  test::writeText(dir.file("t.csv"), text);
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data() + text.size()));
  test::writeBytes(dir.file("t.csv.gz"), gzip(bytes));
  CsvTable plain = readCsv(dir.file("t.csv"), {.header = true});
  CsvTable gz = readCsv(dir.file("t.csv.gz"), {.header = true});
  EXPECT_EQ(plain.values, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(gz.values, plain.values);
  EXPECT_EQ(gz.header, plain.header);
}

}  // namespace
}  // namespace kiln::rt
