// kiln aot --target cuda without a GPU: every zoo model's inference graph and training step (f32,
// and bf16 for one model) is exported (NVRTC for sm_80 and sm_90 plus PTX), the library links,
// needs only libc, libm, libpthread, libdl and the loader, exports the NAME_* functions only, and
// NAME_create fails with NAME_E_CUDA and a message where there is no CUDA driver. (Running the
// library: AotCudaEmulatedTest.cpp without a GPU, AotCudaDeviceTest.cpp on one.)
#include "aot/Export.h"
#include "aot/Library.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "passes/TrainingStep.h"
#include "support/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr int kCuda = 7;  // NAME_E_CUDA

struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "kiln-aot-cuda-test-XXXXXX").string();
    dir = ::mkdtemp(pattern.data());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

aot::ExportResult exportCuda(const ir::Graph& g, const std::string& name, const fs::path& dir,
                             aot::ExportOptions o = {}) {
  o.name = name;
  o.outDir = dir.string();
  o.compiler = KILN_TEST_CC;
  o.target = "cuda";
  return aot::exportLibrary(g, o);
}

/// The output of `cmd` ("" when it cannot run).
std::string output(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) text += buf;
  ::pclose(p);
  return text;
}

std::string macroUpper(const std::string& s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// Whether this process can load a CUDA driver at all.
bool driverPresent() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) ::dlclose(h);
  return h != nullptr;
}

/// The checks every exported CUDA library passes without a GPU.
void checkLibrary(const aot::ExportResult& r, const std::string& name, const ir::Graph& g) {
  ASSERT_TRUE(fs::exists(r.library));
  EXPECT_EQ(r.architectures, (std::vector<std::string>{"sm_80", "sm_90", "compute_80"}));
  EXPECT_GT(r.cubinBytes, 0);
  EXPECT_GT(r.ptxBytes, 0);
  // readelf -d: the libraries it needs.
  const std::string dynamic = output("readelf -d '" + r.library + "' 2>/dev/null");
  if (dynamic.empty()) {
    ADD_FAILURE() << "readelf -d gave nothing for " << r.library;
  } else {
    std::vector<std::string> needed;
    for (size_t at = dynamic.find("(NEEDED)"); at != std::string::npos; at = dynamic.find("(NEEDED)", at + 1)) {
      size_t open = dynamic.find('[', at), close = dynamic.find(']', open);
      needed.push_back(dynamic.substr(open + 1, close - open - 1));
    }
    EXPECT_FALSE(needed.empty());
    for (const std::string& n : needed)
      EXPECT_TRUE(n == "libc.so.6" || n == "libm.so.6" || n == "libpthread.so.0" || n == "libdl.so.2" ||
                  n.rfind("ld-linux", 0) == 0)
          << "needs " << n;
  }
  // The dynamic symbols it defines: the API only.
  std::istringstream symbols(output("nm -D --defined-only '" + r.library + "' 2>/dev/null"));
  int api = 0;
  for (std::string line; std::getline(symbols, line);) {
    const std::string symbol = line.substr(line.find_last_of(' ') + 1);
    EXPECT_EQ(symbol.rfind(name + "_", 0), 0u) << "exports " << symbol;
    ++api;
  }
  EXPECT_GE(api, 13);
  // The header: the same API as a CPU library's, plus the CUDA status code.
  std::ifstream header(r.header);
  std::stringstream text;
  text << header.rdbuf();
  EXPECT_NE(text.str().find(macroUpper(name) + "_E_CUDA = 7"), std::string::npos);
  EXPECT_NE(text.str().find("libcuda.so.1"), std::string::npos);

  aot::Library lib(r.library, name);
  EXPECT_EQ(lib.symbol("kiln_aot_cuda_create"), nullptr);
  EXPECT_EQ(lib.symbol(name + "_kiln_cubin_sm80"), nullptr);
  aot::TensorInfo info{};
  ASSERT_EQ(lib.inputInfo(0, &info), 0) << lib.errorMessage();
  EXPECT_EQ(info.name, g.inputs()[0]->name);
  if (driverPresent()) return;  // the no-device path needs a machine without a driver
  void* ctx = reinterpret_cast<void*>(1);
  EXPECT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kCuda);
  EXPECT_EQ(ctx, nullptr);
  const std::string message = lib.errorMessage();
  EXPECT_NE(message.find("no CUDA device"), std::string::npos) << message;
  EXPECT_NE(message.find("libcuda.so.1"), std::string::npos) << message;
  EXPECT_NE(message.find(name), std::string::npos) << message;
  lib.destroy(nullptr);
}

class AotCudaZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(AotCudaZoo, InferenceLibrary) {
  Scratch s;
  ir::Graph g = buildInference(zooModel(GetParam(), {.batch = 3}), 3);
  aot::ExportResult r = exportCuda(g, "m", s.dir);
  EXPECT_FALSE(r.training);
  EXPECT_GT(r.kernels, 0);
  checkLibrary(r, "m", g);
  aot::Library lib(r.library, "m");
  EXPECT_EQ(lib.trainStep, nullptr);
}

TEST_P(AotCudaZoo, TrainingStepLibrary) {
  Scratch s;
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::optimizerKindFromName("adam");
  ir::Graph g = buildTrainStep(zooModel(GetParam(), {.batch = 3}), to, 3);
  aot::ExportResult r = exportCuda(g, "t", s.dir);
  EXPECT_TRUE(r.training);
  checkLibrary(r, "t", g);
  aot::Library lib(r.library, "t");
  EXPECT_NE(lib.trainStep, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Models, AotCudaZoo, ::testing::ValuesIn(zooModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(AotCuda, Bf16InferenceAndTraining) {
  Scratch s;
  aot::ExportOptions o;
  o.precision = passes::Precision::BF16;
  ir::Graph g = buildInference(zooModel("mnist_mlp", {.batch = 4}), 4);
  checkLibrary(exportCuda(g, "bf", s.dir / "infer", o), "bf", g);
  passes::TrainingStepOptions to;
  to.precision = passes::Precision::BF16;
  ir::Graph step = buildTrainStep(zooModel("mnist_mlp", {.batch = 4}), to, 4);
  checkLibrary(exportCuda(step, "bft", s.dir / "train"), "bft", step);
}

TEST(AotCuda, EmbeddedWeightsAndDump) {
  Scratch s;
  ir::Graph g = buildInference(zooModel("tiny_mlp", {.batch = 2}), 2);
  aot::ExportOptions o;
  o.embedWeights = true;
  o.dumpDir = (s.dir / "dump").string();
  aot::ExportResult r = exportCuda(g, "emb", s.dir / "lib", o);
  checkLibrary(r, "emb", g);
  // The weights are in the library: it is larger than their file.
  EXPECT_GT(r.libraryBytes, static_cast<int64_t>(fs::file_size(r.weights)));
  for (const char* f : {"emb.c", "emb.cu", "emb.compute_80.ptx", "emb.sm_80.cubin", "emb.sm_90.cubin"})
    EXPECT_TRUE(fs::exists(s.dir / "dump" / f)) << f;
}

TEST(AotCuda, ErrorsNameTheProblem) {
  Scratch s;
  ir::Graph g = buildInference(zooModel("tiny_mlp", {.batch = 2}), 2);
  aot::ExportOptions o;
  o.cudaArchitectures = {75};
  try {
    exportCuda(g, "old", s.dir, o);
    ADD_FAILURE() << "no error for sm_75";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_80 or newer"), std::string::npos) << e.what();
  }
  o.cudaArchitectures = {};
  EXPECT_THROW(exportCuda(g, "none", s.dir, o), Error);
  aot::ExportOptions other;
  other.target = "tpu";
  other.name = "x";
  other.outDir = s.dir.string();
  try {
    aot::exportLibrary(g, other);
    ADD_FAILURE() << "no error for target tpu";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu and cuda"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(s.dir / "libold.so"));
}

}  // namespace
}  // namespace kiln
