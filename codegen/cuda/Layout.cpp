#include "codegen/cuda/Layout.h"

#include "codegen/cuda/Chain.h"
#include "kernels/Placement.h"
#include "support/Error.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

namespace kiln::cuda {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// Places every value of the program (kernels/Placement.h); constants keep their values, to be
/// uploaded once.
auto placerFor(const ir::Graph& graph, ProgramLayout& layout) {
  auto own = [&layout](const ir::Value* v, bool constant) {
    ProgramLayout::Owned o;
    o.type = v->type;
    o.constant = constant;
    if (constant) {
      o.value = rt::HostTensor(v->type.dtype, v->type.shape);
      for (int64_t i = 0; i < o.value.numel(); ++i) o.value.set(i, kernels::constantElement(*v, i));
    }
    layout.owned.push_back(std::move(o));
    return layout.owned.size() - 1;
  };
  kernels::ValuePlacer<Location, decltype(own)> placer(graph, own);
  layout.arenaBytes = placer.arenaBytes();
  return placer;
}

uint32_t dim(int64_t v, const char* what, const std::string& entry) {
  KILN_CHECK(v >= 1 && v <= INT32_MAX, "launch of '{}': {} dimension {} is out of range", entry, what, v);
  return static_cast<uint32_t>(v);
}

}  // namespace

ProgramLayout layoutProgram(const ir::Graph& graph, int sm, bool blasLt, int64_t blasMinMacs, bool chain) {
  ProgramLayout L;
  L.sm = sm;
  L.blasLt = blasLt;
  auto t0 = Clock::now();
  L.kernels = kernels::lowerGraph(graph);
  L.lowerMs = msSince(t0);
  t0 = Clock::now();
  RenderOptions ro;
  ro.sm = sm;
  ro.blasLt = blasLt;
  ro.blasMinMacs = blasMinMacs;
  for (const kernels::Kernel& k : L.kernels) L.rendered.push_back(renderKernel(k, ro));
  L.source = programSource(L.rendered);
  L.renderMs = msSince(t0);

  // Placement order: inputs, parameters, the kernels' buffers, outputs, update values.
  auto placer = placerFor(graph, L);
  for (const ir::Value* v : graph.inputs()) placer.place(v);
  for (const ir::Param& p : graph.params()) placer.place(p.value);
  for (const kernels::Kernel& k : L.kernels)
    for (const kernels::Buffer& b : k.buffers) placer.place(b.value);
  for (const ir::Output& o : graph.outputs()) L.outputs.push_back(placer.place(o.value));
  for (const ir::Update& u : graph.updates()) placer.place(u.value);

  for (size_t ki = 0; ki < L.kernels.size(); ++ki) {
    const kernels::Kernel& k = L.kernels[ki];
    const RenderedKernel& r = L.rendered[ki];
    // The kernel's scratch areas, one after another in the shared scratch buffer.
    std::vector<int64_t> areaOffsets;
    int64_t scratch = 0;
    for (int64_t bytes : r.scratchBytes) {
      areaOffsets.push_back(scratch);
      scratch += alignDevice(bytes);
    }
    L.scratchBytes = std::max(L.scratchBytes, scratch);
    auto ref = [&](BufferRef b) -> Location {
      const size_t nb = k.buffers.size();
      if (b >= 0 && static_cast<size_t>(b) < nb) return placer.place(k.buffers[static_cast<size_t>(b)].value);
      const size_t area = static_cast<size_t>(b) - nb;
      KILN_CHECK(b >= 0 && area < areaOffsets.size(), "kernel '{}': a step refers to buffer {} of {} (+{} scratch)",
                 k.name, b, nb, areaOffsets.size());
      return {Location::Kind::Scratch, 0, areaOffsets[area]};
    };
    for (const Step& s : r.steps) {
      StepLayout& out = L.steps.emplace_back();
      out.kind = s.kind;
      out.kernel = ki;
      if (s.kind == Step::Kind::Launch) {
        const Launch& l = s.launch;
        out.entry = l.entry;
        for (int i = 0; i < 3; ++i) {
          out.grid[static_cast<size_t>(i)] = dim(l.grid[static_cast<size_t>(i)], "grid", l.entry);
          out.block[static_cast<size_t>(i)] = dim(l.block[static_cast<size_t>(i)], "block", l.entry);
        }
        KILN_CHECK(l.sharedBytes >= 0, "launch of '{}': negative shared memory", l.entry);
        out.sharedBytes = static_cast<uint32_t>(l.sharedBytes);
        for (BufferRef a : l.args) out.args.push_back(ref(a));
        ++L.launches;
      } else {
        const BlasMatmul& m = s.blas;
        KILN_CHECK(m.typeA == m.typeB, "kernel '{}': cuBLASLt operands of two types ({} and {})", k.name,
                   dtypeName(m.typeA), dtypeName(m.typeB));
        out.blas = m;
        out.a = ref(m.a);
        out.b = ref(m.b);
        out.d = ref(m.d);
        if (m.bias >= 0) out.bias = ref(m.bias);
        ++L.blasCalls;
      }
    }
  }

  for (const ir::Update& u : graph.updates()) {
    if (u.value == u.param) continue;
    ProgramLayout::UpdateCopy c;
    c.param = placer.place(u.param).index;
    c.value = placer.place(u.value);
    c.staged = c.value.kind == Location::Kind::Param || c.value.kind == Location::Kind::Input;
    c.bytes = u.value->type.bytes();
    L.updates.push_back(c);
  }
  if (chain) {
    L.updatesFolded = foldUpdates(L);
    L.chains = chainLaunches(L);
  }
  return L;
}

}  // namespace kiln::cuda
