// Small public data sets for examples, tests and benchmarks, read from the files Debian ships
// (see docs/DATASETS.md). Nothing is downloaded: a missing data set is a kiln::Error that names the
// path, the Debian package that provides it and scripts/setup.sh, which installs it.
//
// Default directories come from the helpers below, the only place the KILN_DATA_DIR environment
// variable is read; pass a directory explicitly to bypass them.
#pragma once

#include "runtime/Csv.h"
#include "runtime/HostTensor.h"
#include "runtime/Idx.h"

#include <string>
#include <vector>

namespace kiln::rt {

enum class Split { Train, Test };

struct ImageDataset {
  HostTensor images;  // f32 [N, C, H, W], pixel values scaled to [0, 1]
  HostTensor labels;  // i64 [N], class indices in [0, classNames.size())
  std::vector<std::string> classNames;
  int64_t size() const { return labels.numel(); }
};

struct TabularDataset {
  HostTensor features;  // f32 [N, F]
  HostTensor labels;    // i64 [N], class indices in [0, classNames.size())
  std::vector<std::string> classNames;
  int64_t size() const { return labels.numel(); }
};

/// $KILN_DATA_DIR/fashion-mnist if the variable is set, else /usr/share/datasets/fashion-mnist
/// (Debian package dataset-fashion-mnist).
std::string defaultFashionMnistDir();
/// $KILN_DATA_DIR/sklearn if the variable is set, else /usr/local/share/kiln/datasets/sklearn
/// (CSV files that scripts/setup.sh extracts from Debian package python3-sklearn).
std::string defaultSklearnDir();

/// Fashion-MNIST (Zalando): 60000 training and 10000 test 28x28 grey images of 10 clothing classes
/// (T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, Ankle boot).
/// images f32 [N,1,28,28] = byte / 255. `limit` >= 0 keeps only the first `limit` examples.
/// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in `dir`.
ImageDataset loadFashionMnist(Split split, const std::string& dir = defaultFashionMnistDir(), int64_t limit = -1);

/// scikit-learn's digits: 1797 8x8 images of handwritten digits, features f32 [1797, 64] holding
/// the raw pixel counts 0..16 (not rescaled), labels 0..9. Reads digits.csv.gz in `dir`.
TabularDataset loadDigits(const std::string& dir = defaultSklearnDir());
/// scikit-learn's iris: 150 flowers, 4 features (cm), 3 classes (setosa, versicolor, virginica).
TabularDataset loadIris(const std::string& dir = defaultSklearnDir());
/// scikit-learn's breast cancer (Wisconsin): 569 samples, 30 features, classes malignant, benign.
TabularDataset loadBreastCancer(const std::string& dir = defaultSklearnDir());
/// scikit-learn's wine: 178 samples, 13 features, 3 classes.
TabularDataset loadWine(const std::string& dir = defaultSklearnDir());

/// A CSV in scikit-learn's layout: a first line "N,F,class0,class1,...", then N rows of F feature
/// values and an integer class label. `name` is the data set's name for messages.
TabularDataset readSklearnCsv(const std::string& path, std::string_view name);

}  // namespace kiln::rt
