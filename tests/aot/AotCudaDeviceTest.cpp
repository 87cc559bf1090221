// CUDA libraries on a GPU (label gpu; every test skips without a device): for every zoo model, the
// library's inference outputs and three training steps (outputs and parameters) against the CPU
// JIT, within the tolerances of the CUDA backend's model tests (tests/codegen/CudaModelTest.cpp),
// and against the CUDA JIT with the generated GEMM (cuda::Program, blasLt off) — the same layout
// and kernels, bit for bit where the library loads a cubin of the device's very architecture; and
// mnist_mlp in bf16. The libraries are exported here, on the GPU machine (NVRTC and a C compiler).
#include "AotCudaSupport.h"

#include "codegen/cpu/Program.h"
#include "codegen/cuda/Program.h"
#include "runtime/Devices.h"
#include "tests/codegen/CudaTestSupport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

namespace kiln::aottest {
namespace {

using kiln::testing::CudaBackendTest;
using kiln::testing::expectClose;
using kiln::testing::expectIdentical;
using passes::Precision;

/// Whether the library runs the cubin NVRTC made for this device's very architecture (as the CUDA
/// JIT does): then the two agree bit for bit.
bool sameCode() {
  const rt::CudaStatus status = rt::cudaStatus();
  if (status.devices.empty()) return false;
  const int sm = status.devices[0].ccMajor * 10 + status.devices[0].ccMinor;
  return sm == 80 || sm == 90;
}

std::unique_ptr<cuda::Program> cudaJit(const ir::Graph& g, Precision p) {
  cuda::ProgramOptions o;
  o.blasLt = false;
  o.graphs = false;
  return cuda::Program::compile(passes::compiledCopy(g, p, ""), o);
}

class AotCudaDevice : public CudaBackendTest, public ::testing::WithParamInterface<std::string> {};
class AotCudaGpu : public CudaBackendTest {};

TEST_P(AotCudaDevice, InferenceMatchesTheJits) {
  Scratch s;
  ir::Graph g = zooInference(GetParam(), 3);
  aot::ExportResult r = exportCuda(g, "m", s.dir);
  aot::Library lib(r.library, "m");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), 0) << lib.errorMessage();
  std::unique_ptr<cpu::Program> cpu = cpu::Program::compile(passes::compiledCopy(g, Precision::F32, ""));
  std::unique_ptr<cuda::Program> gpu = cudaJit(g, Precision::F32);
  for (uint64_t seed : {1, 2}) {
    const std::string what = fmt::format("{} inference seed {}", GetParam(), seed);
    interp::TensorMap in = modelInputs(g, seed);
    interp::TensorMap got = runLibrary(lib, ctx, g, in);
    expectClose(cpu->run(in), got, what + " (cpu jit)", 0.1);
    interp::TensorMap jit = gpu->run(in);
    if (sameCode()) expectIdentical(jit, got, what + " (cuda jit)");
    else expectClose(jit, got, what + " (cuda jit)", 0.1);
  }
  lib.destroy(ctx);
}

TEST_P(AotCudaDevice, ThreeTrainingStepsMatchTheJits) {
  Scratch s;
  ir::Graph g = zooTrainStep(GetParam(), 3);
  aot::ExportResult r = exportCuda(g, "t", s.dir);
  aot::Library lib(r.library, "t");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), 0) << lib.errorMessage();
  std::unique_ptr<cpu::Program> cpu = cpu::Program::compile(passes::compiledCopy(g, Precision::F32, ""));
  std::unique_ptr<cuda::Program> gpu = cudaJit(g, Precision::F32);
  for (int step = 0; step < 3; ++step) {
    const std::string what = fmt::format("{} step {}", GetParam(), step);
    interp::TensorMap in = modelInputs(g, 7);
    interp::TensorMap got = runLibrary(lib, ctx, g, in);
    interp::TensorMap params = libraryParams(lib, ctx, g);
    expectClose(cpu->run(in), got, what + " (cpu jit)", 1.0, 1.0);
    expectClose(cpu->params(), params, what + " parameters (cpu jit)", 1.0);
    interp::TensorMap jit = gpu->run(in);
    if (sameCode()) {
      expectIdentical(jit, got, what + " (cuda jit)");
      expectIdentical(gpu->params(), params, what + " parameters (cuda jit)");
    }
  }
  // train_step and save: the weights file holds what get_param reads.
  interp::TensorMap in = modelInputs(g, 8);
  float loss = -1;
  ASSERT_EQ(lib.trainStep(ctx, in.at(g.inputs()[0]->name).data(), in.at(g.inputs()[1]->name).data(), 0.01f, &loss), 0)
      << lib.errorMessage();
  EXPECT_TRUE(std::isfinite(loss));
  const std::string saved = (s.dir / "after.safetensors").string();
  ASSERT_EQ(lib.saveWeights(ctx, saved.c_str()), 0) << lib.errorMessage();
  void* again = nullptr;
  ASSERT_EQ(lib.create(&again, saved.c_str(), 0), 0) << lib.errorMessage();
  expectIdentical(libraryParams(lib, ctx, g), libraryParams(lib, again, g), "reloaded");
  lib.destroy(again);
  lib.destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(Models, AotCudaDevice, ::testing::ValuesIn(zooModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_F(AotCudaGpu, Bf16LibraryMatchesTheJits) {
  Scratch s;
  ir::Graph g = zooInference("mnist_mlp", 3);
  aot::ExportResult r = exportCuda(g, "bf", s.dir, Precision::BF16);
  aot::Library lib(r.library, "bf");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), 0) << lib.errorMessage();
  interp::TensorMap in = modelInputs(g, 5);
  interp::TensorMap got = runLibrary(lib, ctx, g, in);
  interp::TensorMap want = cpu::Program::compile(passes::compiledCopy(g, Precision::BF16, ""))->run(in);
  for (const auto& [name, t] : want) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      diff += std::pow(got.at(name).at(i) - t.at(i), 2);
      norm += std::pow(t.at(i), 2);
    }
    EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-30)), 1e-2) << name;  // CudaModelTest's bf16 tolerance
  }
  if (sameCode()) expectIdentical(cudaJit(g, Precision::BF16)->run(in), got, "bf16 (cuda jit)");
  lib.destroy(ctx);
}

}  // namespace
}  // namespace kiln::aottest
