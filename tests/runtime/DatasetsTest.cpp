// Loads the real data sets that scripts/setup.sh installs; each test skips with a message naming the
// package when its data set is absent.
#include "runtime/Datasets.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace kiln::rt {
namespace {

bool present(const std::string& path) { return std::filesystem::exists(path); }

#define REQUIRE_DATA(path, package)                                                                  \
  if (!present(path))                                                                                \
  GTEST_SKIP() << path << " is absent: install the Debian package " package " (scripts/setup.sh does)"

TEST(Datasets, FashionMnistTestSplit) {
  REQUIRE_DATA(defaultFashionMnistDir() + "/t10k-images-idx3-ubyte.gz", "dataset-fashion-mnist");
  ImageDataset ds = loadFashionMnist(Split::Test);
  EXPECT_EQ(ds.images.typeStr(), "f32[10000,1,28,28]");
  EXPECT_EQ(ds.labels.typeStr(), "i64[10000]");
  ASSERT_EQ(ds.classNames.size(), 10u);
  EXPECT_EQ(ds.classNames[0], "T-shirt/top");
  EXPECT_EQ(ds.classNames[9], "Ankle boot");
  // First labels and per-class counts, read from the file with an independent script.
  const int64_t* labels = ds.labels.as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(labels, labels + 10), (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  std::vector<int> counts(10);
  for (int64_t i = 0; i < ds.size(); ++i) ++counts.at(labels[i]);
  EXPECT_EQ(counts, std::vector<int>(10, 1000));
  // The first image: its bytes sum to 33456, row 10 column 15 holds 53, the maximum 255 at index 577.
  const float* px = ds.images.as<float>();
  double sum = 0;
  for (int i = 0; i < 784; ++i) sum += px[i];
  EXPECT_NEAR(sum, 33456.0 / 255.0, 1e-3);
  EXPECT_FLOAT_EQ(px[10 * 28 + 15], 53.0f / 255.0f);
  EXPECT_FLOAT_EQ(px[577], 1.0f);
}

TEST(Datasets, FashionMnistLimitAndTrainSplit) {
  REQUIRE_DATA(defaultFashionMnistDir() + "/train-images-idx3-ubyte.gz", "dataset-fashion-mnist");
  ImageDataset ds = loadFashionMnist(Split::Train, defaultFashionMnistDir(), 4);
  EXPECT_EQ(ds.images.typeStr(), "f32[4,1,28,28]");
  EXPECT_EQ(ds.labels.toDoubles(), (std::vector<double>{9, 0, 0, 3}));
}

TEST(Datasets, Digits) {
  REQUIRE_DATA(defaultSklearnDir() + "/digits.csv.gz", "python3-sklearn");
  TabularDataset ds = loadDigits();
  EXPECT_EQ(ds.features.typeStr(), "f32[1797,64]");
  EXPECT_EQ(ds.labels.typeStr(), "i64[1797]");
  ASSERT_EQ(ds.classNames.size(), 10u);
  std::vector<double> first = ds.features.toDoubles();
  first.resize(8);
  EXPECT_EQ(first, (std::vector<double>{0, 0, 5, 13, 9, 1, 0, 0}));
  EXPECT_EQ(ds.labels.at(0), 0);
  EXPECT_EQ(ds.labels.at(1), 1);
  EXPECT_EQ(ds.labels.at(2), 2);
  double lo = 1e9, hi = -1e9;
  for (double v : ds.features.toDoubles()) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 16);
}

TEST(Datasets, Iris) {
  REQUIRE_DATA(defaultSklearnDir() + "/iris.csv", "python3-sklearn");
  TabularDataset ds = loadIris();
  EXPECT_EQ(ds.features.typeStr(), "f32[150,4]");
  EXPECT_EQ(ds.classNames, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  std::vector<double> first = ds.features.toDoubles();
  first.resize(4);
  EXPECT_EQ(first, (std::vector<double>{5.1f, 3.5f, 1.4f, 0.2f}));
  EXPECT_EQ(ds.labels.at(0), 0);
  EXPECT_EQ(ds.labels.at(149), 2);
}

TEST(Datasets, BreastCancerAndWine) {
  REQUIRE_DATA(defaultSklearnDir() + "/wine_data.csv", "python3-sklearn");
  TabularDataset bc = loadBreastCancer();
  EXPECT_EQ(bc.features.typeStr(), "f32[569,30]");
  EXPECT_EQ(bc.classNames, (std::vector<std::string>{"malignant", "benign"}));
  TabularDataset wine = loadWine();
  EXPECT_EQ(wine.features.typeStr(), "f32[178,13]");
  EXPECT_EQ(wine.classNames.size(), 3u);
}

TEST(Datasets, DataDirEnvironmentVariable) {
  const char* old = std::getenv("KILN_DATA_DIR");
  std::string saved = old ? old : "";
  ::setenv("KILN_DATA_DIR", "/data/here", 1);
  EXPECT_EQ(defaultSklearnDir(), "/data/here/sklearn");
  EXPECT_EQ(defaultFashionMnistDir(), "/data/here/fashion-mnist");
  ::unsetenv("KILN_DATA_DIR");
  EXPECT_EQ(defaultSklearnDir(), "/usr/local/share/kiln/datasets/sklearn");
  EXPECT_EQ(defaultFashionMnistDir(), "/usr/share/datasets/fashion-mnist");
  if (old) ::setenv("KILN_DATA_DIR", saved.c_str(), 1);
}

TEST(Datasets, SklearnCsvFromScratchDirectory) {
  test::ScratchDir dir;
  test::writeText(dir.file("iris.csv"), "3,2,a,b\n1.0,2.0,0\n3,4,1\n5,6,1\n");
  TabularDataset ds = loadIris(dir.path().string());
  EXPECT_EQ(ds.features.toDoubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ds.labels.toDoubles(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(ds.classNames, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace kiln::rt
