// The pass registry: one table naming every pass (no static-initializer registration, which
// static linking silently drops), and the pipeline driver that verifies and dumps after each pass.
#include "passes/Autodiff.h"
#include "passes/Decompose.h"
#include "passes/Pass.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <filesystem>
#include <fstream>

namespace kiln::passes {

const std::vector<Pass>& registeredPasses() {
  static const std::vector<Pass> passes = {
      {"verify", "checks that the graph is well formed (types, operands, names)",
       [](ir::Graph& g, const PassContext&) { ir::verifyOrThrow(g); }},
      {"decompose", "rewrites composite ops (linear, softmax, losses, norms, attention, ...) into primitives",
       [](ir::Graph& g, const PassContext&) { decompose(g); }},
      {"autodiff", "decomposes, then appends the gradient of output 'loss' w.r.t. every float parameter as outputs "
                   "'grad.<param>'",
       [](ir::Graph& g, const PassContext&) { autodiff(g); }},
  };
  return passes;
}

const Pass* findPass(std::string_view name) {
  for (const Pass& p : registeredPasses())
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

std::string knownPassNames() {
  std::string names;
  for (const Pass& p : registeredPasses()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

void dumpGraph(const ir::Graph& g, const std::string& dir, size_t index, const std::string& passName) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_CHECK(!ec, "cannot create dump directory '{}': {}", dir, ec.message());
  fs::path path = fs::path(dir) / fmt::format("{:02}-{}.kir", index, passName);
  std::ofstream f(path, std::ios::binary);
  f << ir::printGraph(g);
  f.close();
  KILN_CHECK(f.good(), "cannot write dump file '{}'", path.string());
}

}  // namespace

void runPipeline(ir::Graph& g, const std::vector<std::string>& names, const PassContext& ctx) {
  // Resolve every name first so a typo fails before any work is done.
  std::vector<const Pass*> pipeline;
  for (const std::string& name : names) {
    const Pass* p = findPass(name);
    KILN_CHECK(p != nullptr, "unknown pass '{}'; known passes: {}", name, knownPassNames());
    pipeline.push_back(p);
  }
  for (size_t i = 0; i < pipeline.size(); ++i) {
    const Pass& p = *pipeline[i];
    p.run(g, ctx);
    // Dump before verifying: the IR of a pass that broke the graph is what one needs to see.
    if (!ctx.dumpDir.empty()) dumpGraph(g, ctx.dumpDir, i + 1, p.name);
    try {
      ir::verifyOrThrow(g);
    } catch (const Error& e) {
      KILN_THROW("the graph does not verify after pass '{}':\n{}", p.name, e.what());
    }
  }
}

}  // namespace kiln::passes
