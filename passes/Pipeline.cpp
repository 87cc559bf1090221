#include "passes/Pipeline.h"

#include "kernels/Kernel.h"
#include "passes/Plan.h"

#include <fmt/format.h>

namespace kiln::passes {

std::vector<std::string> defaultPipeline() { return {"decompose", "canonicalize", "amp", "fuse", "plan"}; }

void compileGraph(ir::Graph& g, const PassContext& ctx) { runPipeline(g, defaultPipeline(), ctx); }

ir::Graph compiledCopy(const ir::Graph& g, Precision precision, const std::string& dumpDir) {
  ir::Graph compiled = g.clone();
  PassContext ctx;
  ctx.precision = precision;
  ctx.dumpDir = dumpDir;
  compileGraph(compiled, ctx);
  return compiled;
}

GraphSummary summarize(const ir::Graph& g) {
  GraphSummary s;
  s.nodes = static_cast<int64_t>(g.nodes().size());
  for (const kernels::Kernel& k : kernels::lowerGraph(g)) {
    ++s.kernels;
    ++s.kernelsByKind[static_cast<int>(k.kind)];
    s.flops += k.flops;
    s.bytesMoved += k.bytesRead + k.bytesWritten;
  }
  for (const ir::Param& p : g.params()) s.paramBytes += p.value->type.bytes();
  for (const ir::Value* v : g.inputs()) s.inputBytes += v->type.bytes();
  for (const ir::Output& o : g.outputs())
    if (o.value->kind == ir::ValueKind::Result) s.outputBytes += o.value->type.bytes();
  if (g.plan()) {
    PlanStats p = planStats(g);
    s.arenaBytes = p.arenaBytes;
    s.sumOfBuffers = p.sumOfBuffers;
  }
  return s;
}

std::string summaryText(const ir::Graph& g, const GraphSummary& s) {
  std::string kinds;
  for (int k = 0; k < 5; ++k)
    if (s.kernelsByKind[k])
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", s.kernelsByKind[k],
                           ir::kernelKindName(static_cast<ir::KernelKind>(k)));
  std::string out = fmt::format("graph @{}: {} nodes{}\n", g.name(), s.nodes, g.groups().empty() ? " (not fused)" : "");
  out += fmt::format("kernels:     {} ({})\n", s.kernels, kinds.empty() ? "none" : kinds);
  out += fmt::format("flops:       {:.4g}\n", s.flops);
  out += fmt::format("bytes moved: {} ({:.3g} flops/byte)\n", s.bytesMoved,
                     s.bytesMoved ? s.flops / static_cast<double>(s.bytesMoved) : 0.0);
  out += fmt::format("memory:      {} bytes = parameters {} + inputs {} + outputs {} + arena {}\n", s.peakBytes(),
                     s.paramBytes, s.inputBytes, s.outputBytes, s.arenaBytes);
  if (g.plan())
    out += fmt::format("arena:       {} bytes for {} bytes of intermediate buffers ({:.1f}% saved)\n", s.arenaBytes,
                       s.sumOfBuffers,
                       s.sumOfBuffers ? 100.0 * (1.0 - static_cast<double>(s.arenaBytes) / s.sumOfBuffers) : 0.0);
  else
    out += "arena:       no memory plan (run the plan pass)\n";
  return out;
}

std::string kernelListing(const ir::Graph& g) {
  std::string out;
  for (const kernels::Kernel& k : kernels::lowerGraph(g)) out += kernels::printKernel(k) + "\n";
  return out;
}

}  // namespace kiln::passes
