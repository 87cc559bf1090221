#include "CudaTestSupport.h"

#include "ir/OpInfo.h"
#include "passes/Pipeline.h"
#include "runtime/Devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace kiln::testing {

void CudaBackendTest::SetUp() {
  // cuInit once per process: every test asks.
  static const rt::CudaStatus status = rt::cudaStatus();
  if (status.devices.empty()) GTEST_SKIP() << "skipped, no CUDA device: " << status.problem;
}

void expectIdentical(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what) {
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": no output '" << name << "'";
      continue;
    }
    const rt::HostTensor& g = it->second;
    if (t.typeStr() != g.typeStr()) {
      ADD_FAILURE() << what << " " << name << ": " << g.typeStr() << ", expected " << t.typeStr();
      continue;
    }
    const size_t size = static_cast<size_t>(dtypeSize(t.dtype()));
    const auto* a = static_cast<const char*>(t.data());
    const auto* b = static_cast<const char*>(g.data());
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::memcmp(a + i * size, b + i * size, size) != 0) {
        ADD_FAILURE() << what << " " << name << "[" << i << "] of " << t.typeStr() << ": want " << t.at(i) << ", got "
                      << g.at(i) << " (bit for bit)";
        break;
      }
  }
  EXPECT_EQ(want.size(), got.size()) << what;
}

ir::Graph compiledGraph(const ir::Graph& g, passes::Precision precision) {
  ir::Graph compiled = g.clone();
  passes::PassContext ctx;
  ctx.precision = precision;
  passes::compileGraph(compiled, ctx);
  return compiled;
}

std::unique_ptr<cuda::Program> compileCuda(const ir::Graph& g, const cuda::ProgramOptions& options,
                                           passes::Precision precision) {
  return cuda::Program::compile(compiledGraph(g, precision), options);
}

void checkAgainstInterpreter(const ir::Graph& g, const interp::TensorMap& inputs, const std::string& what,
                             const CheckOptions& options) {
  SCOPED_TRACE(what);
  interp::TensorMap want = interp::run(g, inputs);
  interp::TensorMap got;
  try {
    got = compileCuda(g, options.program)->run(inputs);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " (blasLt " << options.program.blasLt << "): " << e.what();
    return;
  }
  if (options.exact)
    expectIdentical(want, got, what);
  else
    expectClose(want, got, what, options.scaleFactor);
}

ir::Value* node(ir::Graph& g, std::string_view op, std::vector<ir::Value*> operands,
                const std::vector<ir::NamedAttr>& attrs) {
  std::optional<ir::OpKind> kind = ir::opFromName(op);
  if (!kind) throw std::invalid_argument(fmt::format("no op '{}'", op));
  return g.addNode(*kind, std::move(operands), attrs);
}

std::string shapeTag(const ir::Shape& shape) {
  return shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x"));
}

}  // namespace kiln::testing
