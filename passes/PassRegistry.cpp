// The pass registry: one table naming every pass (no static-initializer registration, which
// static linking silently drops), and the pipeline driver that verifies and dumps after each pass.
#include "passes/Amp.h"
#include "passes/Autodiff.h"
#include "passes/Canonicalize.h"
#include "passes/Decompose.h"
#include "passes/Fuse.h"
#include "passes/Pipeline.h"
#include "passes/Pass.h"
#include "passes/Plan.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "support/File.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln::passes {

Precision precisionFromName(std::string_view name) {
  if (name == "f32") return Precision::F32;
  if (name == "bf16") return Precision::BF16;
  if (name == "f16") return Precision::F16;
  KILN_THROW("unknown precision '{}'; expected f32, bf16 or f16", name);
}

std::string_view precisionName(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::BF16: return "bf16";
    case Precision::F16: return "f16";
  }
  return "?";
}

void PassContext::warning(const std::string& message) const {
  if (warn)
    warn(message);
  else
    std::fprintf(stderr, "warning: %s\n", message.c_str());
}

const std::vector<Pass>& registeredPasses() {
  static const std::vector<Pass> passes = {
      {"verify", "checks that the graph is well formed (types, operands, names)",
       [](ir::Graph& g, const PassContext&) { ir::verifyOrThrow(g); }},
      {"decompose", "rewrites composite ops (linear, softmax, losses, norms, attention, ...) into primitives",
       [](ir::Graph& g, const PassContext&) { decompose(g); }},
      {"autodiff", "decomposes, then appends the gradient of output 'loss' w.r.t. every float parameter as outputs "
                   "'grad.<param>'",
       [](ir::Graph& g, const PassContext& ctx) { autodiff(g, ctx); }},
      {"fuse", "partitions the graph into kernels: contractions with epilogues, elementwise loops, reductions with "
               "prologue and epilogue, one multi-tensor optimizer update (f32 matmuls of depth <= 2 become loops)",
       [](ir::Graph& g, const PassContext& ctx) { fuse(g, ctx); }},
      {"canonicalize", "constant folding, algebraic identities, movement chains, transposes into matmul flags, CSE "
                       "and DCE, to a fixed point (docs/PASSES.md)",
       [](ir::Graph& g, const PassContext& ctx) { canonicalize(g, ctx); }},
      {"amp", "mixed precision (--precision bf16|f16): f32 contractions take low-precision operands, results are cast "
              "back to f32",
       [](ir::Graph& g, const PassContext& ctx) { amp(g, ctx); }},
      {"plan", "memory plan: buffer liveness over kernel steps, offsets in one arena, in-place reuse (passes/Plan.h)",
       [](ir::Graph& g, const PassContext& ctx) { plan(g, ctx); }},
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

// The kernels and the figures of the graph the pipeline produced. A graph that still holds
// composite ops has no kernels yet, so it gets no kernel listing.
void dumpSummary(const ir::Graph& g, const std::string& dir) {
  namespace fs = std::filesystem;
  bool primitive = std::none_of(g.nodes().begin(), g.nodes().end(),
                                [](const auto& n) { return n->info().has(ir::kComposite); });
  std::string summary = primitive ? summaryText(g, summarize(g))
                                  : fmt::format("graph @{}: {} nodes, composite ops left (no kernels before "
                                                "decompose)\n", g.name(), g.nodes().size());
  writeFileAtomically((fs::path(dir) / "summary.txt").string(), summary);
  if (primitive) writeFileAtomically((fs::path(dir) / "kernels.txt").string(), kernelListing(g));
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
  if (!ctx.dumpDir.empty()) dumpSummary(g, ctx.dumpDir);
}

}  // namespace kiln::passes
