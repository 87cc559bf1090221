// What the CUDA backend tests (cuda_backend_tests, label gpu) share: the fixture that skips without
// a device, programs compiled through the default pipeline, and comparisons with a tolerance per
// dtype (TensorClose.h).
#pragma once

#include "codegen/cuda/Program.h"
#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "passes/Pass.h"
#include "tests/codegen/TensorClose.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::testing {

/// Base of every CUDA backend test: skips, with the driver's reason, where there is no CUDA device.
class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

using test::expectClose;  // TensorClose.h
using test::tolerance;
/// The same bytes in every tensor of `want` and `got` (NaN payloads and -0.0 included).
void expectIdentical(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what);

/// A copy of `g` after the default pipeline, with the amp policy `precision`.
ir::Graph compiledGraph(const ir::Graph& g, passes::Precision precision = passes::Precision::F32);

/// compiledGraph(g, precision) compiled by the CUDA backend.
std::unique_ptr<cuda::Program> compileCuda(const ir::Graph& g, const cuda::ProgramOptions& options = {},
                                           passes::Precision precision = passes::Precision::F32);

/// How checkAgainstInterpreter compares.
struct CheckOptions {
  double scaleFactor = 1e-2;  // see expectClose
  bool exact = false;         // bit for bit (expectIdentical)
  cuda::ProgramOptions program;
};

/// Options that compare bit for bit.
inline CheckOptions exactly() {
  CheckOptions o;
  o.exact = true;
  return o;
}

/// Runs `g` on the reference interpreter and on the CUDA backend with `inputs` and compares every
/// output. A kiln::Error from compiling or running is a failure naming `what`; the test goes on.
void checkAgainstInterpreter(const ir::Graph& g, const interp::TensorMap& inputs, const std::string& what,
                             const CheckOptions& options = {});

/// Appends a node of the op named `op` (ir/Ops.def) to `g`; its result type is inferred.
ir::Value* node(ir::Graph& g, std::string_view op, std::vector<ir::Value*> operands,
                const std::vector<ir::NamedAttr>& attrs = {});

/// "33x7x5" ("scalar" for rank 0): shapes inside value and output names.
std::string shapeTag(const ir::Shape& shape);

}  // namespace kiln::testing
