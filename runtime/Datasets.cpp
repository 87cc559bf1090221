#include "runtime/Datasets.h"

#include "runtime/FileIO.h"
#include "support/Error.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace kiln::rt {

namespace {

namespace fs = std::filesystem;

std::string dataDir(const char* sub, const char* fallback) {
  const char* env = std::getenv("KILN_DATA_DIR");
  if (env && *env) return (fs::path(env) / sub).string();
  return fallback;
}

[[noreturn]] void missing(std::string_view dataset, const std::string& path, std::string_view package,
                          std::string_view how) {
  KILN_THROW("{} data set not found: '{}' does not exist; it comes from the Debian package {}, {} "
             "(run scripts/setup.sh, or point KILN_DATA_DIR or the dir argument at a copy)",
             dataset, path, package, how);
}

// The path of `name` in `dir`, preferring the gzip file Debian ships and falling back to an
// uncompressed copy.
std::string findFashionFile(const std::string& dir, const std::string& name) {
  std::string gz = (fs::path(dir) / (name + ".gz")).string();
  std::string plain = (fs::path(dir) / name).string();
  std::error_code ec;
  if (fs::exists(gz, ec)) return gz;
  if (fs::exists(plain, ec)) return plain;
  missing("fashion-mnist", gz, "dataset-fashion-mnist", "which scripts/setup.sh installs");
}

std::string findSklearnFile(const std::string& dir, const std::string& name, std::string_view dataset) {
  std::string path = (fs::path(dir) / name).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    // Debian ships some of these gzip-compressed and some not; accept either.
    std::string other = name.ends_with(".gz") ? path.substr(0, path.size() - 3) : path + ".gz";
    if (fs::exists(other, ec)) return other;
    missing(dataset, path, "python3-sklearn",
            "whose CSV files scripts/setup.sh extracts into /usr/local/share/kiln/datasets/sklearn");
  }
  return path;
}

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

}  // namespace

std::string defaultFashionMnistDir() { return dataDir("fashion-mnist", "/usr/share/datasets/fashion-mnist"); }
std::string defaultSklearnDir() { return dataDir("sklearn", "/usr/local/share/kiln/datasets/sklearn"); }

ImageDataset loadFashionMnist(Split split, const std::string& dir, int64_t limit) {
  std::string prefix = split == Split::Train ? "train" : "t10k";
  std::string imagesPath = findFashionFile(dir, prefix + "-images-idx3-ubyte");
  std::string labelsPath = findFashionFile(dir, prefix + "-labels-idx1-ubyte");

  std::vector<std::byte> imageBytes = readMaybeGzipFile(imagesPath);
  std::vector<std::byte> labelBytes = readMaybeGzipFile(labelsPath);
  IdxView images = parseIdxHeader(imageBytes, "'" + imagesPath + "'");
  IdxView labels = parseIdxHeader(labelBytes, "'" + labelsPath + "'");
  KILN_CHECK(images.type == IdxType::u8 && images.dims.size() == 3,
             "'{}': expected unsigned byte images [N, rows, cols], found {} dimensions of type code 0x{:02x}",
             imagesPath, images.dims.size(), static_cast<int>(images.type));
  KILN_CHECK(labels.type == IdxType::u8 && labels.dims.size() == 1,
             "'{}': expected unsigned byte labels [N], found {} dimensions of type code 0x{:02x}", labelsPath,
             labels.dims.size(), static_cast<int>(labels.type));
  KILN_CHECK(images.dims[0] == labels.dims[0], "fashion-mnist: '{}' holds {} images but '{}' holds {} labels",
             imagesPath, images.dims[0], labelsPath, labels.dims[0]);

  int64_t n = limit < 0 ? images.dims[0] : std::min(limit, images.dims[0]);
  int64_t h = images.dims[1], w = images.dims[2];
  ImageDataset ds;
  ds.classNames = kFashionClasses;
  ds.images = HostTensor(DType::f32, {n, 1, h, w});
  ds.labels = HostTensor(DType::i64, {n});
  float* px = ds.images.as<float>();
  const auto* raw = reinterpret_cast<const uint8_t*>(images.payload.data());
  for (int64_t i = 0; i < n * h * w; ++i) px[i] = static_cast<float>(raw[i]) / 255.0f;
  int64_t* lab = ds.labels.as<int64_t>();
  const auto* rawLabels = reinterpret_cast<const uint8_t*>(labels.payload.data());
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(rawLabels[i] < kFashionClasses.size(), "'{}': label {} of example {} is not a class index (0..9)",
               labelsPath, static_cast<int>(rawLabels[i]), i);
    lab[i] = rawLabels[i];
  }
  return ds;
}

TabularDataset readSklearnCsv(const std::string& path, std::string_view name) {
  std::vector<std::byte> bytes = readMaybeGzipFile(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::string what = "'" + path + "'";
  size_t nl = text.find('\n');
  std::string_view first = text.substr(0, nl);
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  std::vector<std::string> fields;
  for (size_t pos = 0; pos <= first.size();) {
    size_t comma = std::min(first.find(',', pos), first.size());
    fields.emplace_back(first.substr(pos, comma - pos));
    pos = comma + 1;
  }
  auto count = [&](size_t i) -> int64_t {
    int64_t v = -1;
    if (i < fields.size()) std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), v);
    return v;
  };
  int64_t samples = count(0), features = count(1);
  KILN_CHECK(fields.size() >= 3 && samples >= 0 && features >= 1 && features < (int64_t{1} << 31),
             "{}:1: expected scikit-learn's first line 'samples,features,class names...', found '{}'", what,
             first.substr(0, 80));
  TabularDataset ds;
  ds.classNames.assign(fields.begin() + 2, fields.end());
  CsvTable table = parseCsv(nl == std::string_view::npos ? "" : text.substr(nl + 1), what, {}, 2);
  KILN_CHECK(table.rows == samples, "{}: the first line announces {} {} samples, the file has {}", what, samples, name,
             table.rows);
  KILN_CHECK(table.cols == features + 1, "{}: rows have {} fields, expected {} features and a label", what,
             table.cols, features);
  ds.features = table.columns(0, features, DType::f32);
  ds.labels = table.column(features, DType::i64);
  int64_t classes = static_cast<int64_t>(ds.classNames.size());
  for (int64_t i = 0; i < ds.labels.numel(); ++i) {
    int64_t label = ds.labels.as<int64_t>()[i];
    KILN_CHECK(label >= 0 && label < classes, "{}:{}: label {} is not one of the {} classes", what, i + 2, label,
               classes);
  }
  return ds;
}

TabularDataset loadDigits(const std::string& dir) {
  // digits.csv.gz has no first line: 64 pixel columns (0..16) and the digit.
  std::string path = findSklearnFile(dir, "digits.csv.gz", "digits");
  CsvTable table = readCsv(path);
  KILN_CHECK(table.cols == 65, "'{}': expected 64 pixel columns and a label, found {} columns", path, table.cols);
  TabularDataset ds;
  ds.features = table.columns(0, 64, DType::f32);
  ds.labels = table.column(64, DType::i64);
  for (int i = 0; i < 10; ++i) ds.classNames.push_back(std::to_string(i));
  for (int64_t i = 0; i < ds.labels.numel(); ++i) {
    int64_t label = ds.labels.as<int64_t>()[i];
    KILN_CHECK(label >= 0 && label < 10, "'{}':{}: label {} is not a digit", path, i + 1, label);
  }
  return ds;
}

TabularDataset loadIris(const std::string& dir) {
  return readSklearnCsv(findSklearnFile(dir, "iris.csv", "iris"), "iris");
}
TabularDataset loadBreastCancer(const std::string& dir) {
  return readSklearnCsv(findSklearnFile(dir, "breast_cancer.csv", "breast cancer"), "breast cancer");
}
TabularDataset loadWine(const std::string& dir) {
  return readSklearnCsv(findSklearnFile(dir, "wine_data.csv", "wine"), "wine");
}

}  // namespace kiln::rt
