#include "tools/kiln/Profile.h"

#include "kernels/Kernel.h"
#include "passes/Pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace kiln::cli {

engine::ExecutorOptions executorOptions(engine::Target target, const std::string& dumpDir, bool profile) {
  engine::ExecutorOptions eo;
  eo.target = target;
  eo.dumpDir = dumpDir;
  eo.profile = profile;
  eo.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return eo;
}

std::string profileTable(const ir::Graph& graph, passes::Precision precision,
                         const std::vector<engine::KernelTime>& times) {
  if (times.empty()) return "profile: no per-kernel times (the cpu and cuda targets profile; interp does not)\n";
  const ir::Graph compiled = passes::compiledCopy(graph, precision);
  std::map<std::string, const kernels::Kernel*> byName;
  const std::vector<kernels::Kernel> ks = kernels::lowerGraph(compiled);
  for (const kernels::Kernel& k : ks) byName[k.name] = &k;

  double total = 0;
  for (const engine::KernelTime& t : times) total += t.micros;
  std::vector<engine::KernelTime> sorted = times;
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.micros > b.micros; });
  std::string out = fmt::format("{:<40} {:>10} {:>7} {:>9} {:>8}  {}\n", "kernel", "µs/run", "share", "GFLOP/s",
                                "GB/s", "source");
  for (const engine::KernelTime& t : sorted) {
    double flops = 0, bytes = 0;
    std::string where;
    if (auto it = byName.find(t.name); it != byName.end()) {
      flops = it->second->flops;
      bytes = static_cast<double>(it->second->bytesRead + it->second->bytesWritten);
      std::set<std::string> lines;
      for (const ir::Node* n : it->second->nodes)
        if (n->loc.known()) lines.insert(fmt::format("{}:{}", n->loc.file, n->loc.line));
      for (const std::string& l : lines) where += (where.empty() ? "" : ", ") + l;
      if (lines.size() > 3) where = fmt::format("{} (+{} more)", *lines.begin(), lines.size() - 1);
    }
    const double s = t.micros / 1e6;
    out += fmt::format("{:<40} {:>10.2f} {:>6.1f}% {:>9.2f} {:>8.2f}  {}\n", t.name.substr(0, 40), t.micros,
                       total > 0 ? 100 * t.micros / total : 0, s > 0 ? flops / s / 1e9 : 0, s > 0 ? bytes / s / 1e9 : 0,
                       where);
  }
  out += fmt::format("{:<40} {:>10.2f}   (sum of {} kernels per run)\n", "total", total, times.size());
  return out;
}

}  // namespace kiln::cli
