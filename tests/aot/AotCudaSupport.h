// What the tests that run CUDA libraries share (AotCudaEmulatedTest.cpp on the host emulator,
// AotCudaDeviceTest.cpp on a GPU): exporting, running a library on a TensorMap, reading its
// parameters, and the programs they compare with.
#pragma once

#include "aot/Export.h"
#include "aot/Library.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "tests/passes/RandomGraphs.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::aottest {

namespace fs = std::filesystem;

/// A fresh directory, removed afterwards.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "kiln-aot-cuda-XXXXXX").string();
    dir = ::mkdtemp(pattern.data());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

/// The C compiler of the build (KILN_TEST_CC), else `cc` (the GPU machine runs binaries built elsewhere).
inline std::string testCompiler() {
#ifdef KILN_TEST_CC
  if (::access(KILN_TEST_CC, X_OK) == 0) return KILN_TEST_CC;
#endif
  return "cc";
}

inline aot::ExportResult exportCuda(const ir::Graph& g, const std::string& name, const fs::path& dir,
                                    passes::Precision precision = passes::Precision::F32, bool embedWeights = false) {
  aot::ExportOptions o;
  o.embedWeights = embedWeights;
  o.name = name;
  o.outDir = dir.string();
  o.compiler = testCompiler();
  o.target = "cuda";
  o.precision = precision;
  return aot::exportLibrary(g, o);
}

inline ir::Graph zooInference(const std::string& name, int64_t batch) {
  return buildInference(zooModel(name, {.batch = batch}), batch);
}

/// The Adam step of `name` (eps 1e-3 as in tests/codegen/CudaModelTest.cpp: with 1e-8 the first
/// steps are sign(g)·lr wherever |g| is tiny, so rounding noise in a zero gradient flips updates).
inline ir::Graph zooTrainStep(const std::string& name, int64_t batch,
                              passes::Precision precision = passes::Precision::F32) {
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::OptimizerConfig::Kind::Adam;
  to.optimizer.eps = 1e-3;
  to.precision = precision;
  return buildTrainStep(zooModel(name, {.batch = batch}), to, batch);
}

/// Random inputs: floats in [-2, 2], integer inputs below the number of classes of the first
/// output's last dimension, lr = 0.01.
inline interp::TensorMap modelInputs(const ir::Graph& g, uint64_t seed) {
  interp::TensorMap in = kiln::testing::randomInputs(g, seed);
  const int64_t classes = g.outputs().empty() || g.outputs()[0].value->type.shape.empty()
                              ? 2
                              : g.outputs()[0].value->type.shape.back();
  for (auto& [name, t] : in) {
    if (name == "lr")
      t.set(0, 0.01);
    else if (!isFloat(t.dtype()))
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::fmod(std::abs(t.at(i)), static_cast<double>(classes)));
  }
  return in;
}

/// One run of the library; its outputs by name. A failed run is a test failure (outputs empty).
inline interp::TensorMap runLibrary(const aot::Library& lib, void* ctx, const ir::Graph& g,
                                    const interp::TensorMap& in, int* status = nullptr) {
  std::vector<const void*> inputs;
  for (const ir::Value* v : g.inputs()) inputs.push_back(in.at(v->name).data());
  interp::TensorMap out;
  std::vector<void*> outputs;
  for (const ir::Output& o : g.outputs()) {
    auto [it, _] = out.insert_or_assign(o.name, rt::HostTensor(o.value->type.dtype, o.value->type.shape));
    outputs.push_back(it->second.data());
  }
  const int rc = lib.run(ctx, inputs.data(), outputs.data());
  if (status) *status = rc;
  else EXPECT_EQ(rc, 0) << lib.errorMessage();
  return rc == 0 ? out : interp::TensorMap{};
}

inline interp::TensorMap libraryParams(const aot::Library& lib, void* ctx, const ir::Graph& g) {
  interp::TensorMap out;
  for (const ir::Param& p : g.params()) {
    rt::HostTensor t(p.value->type.dtype, p.value->type.shape);
    EXPECT_EQ(lib.getParam(ctx, p.value->name.c_str(), t.data(), t.bytes()), 0) << lib.errorMessage();
    out.insert_or_assign(p.value->name, std::move(t));
  }
  return out;
}

}  // namespace kiln::aottest
