// `--dump DIR` and KILN_DUMP, shared by every command that compiles.
#include "tools/kiln/Commands.h"

#include "ir/Graph.h"
#include "passes/Pipeline.h"

#include <cstdio>
#include <cstdlib>

namespace kiln::cli {

void addDumpOption(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--dump", dir,
                  "write the IR after every pass of the compilation, the kernels and a summary into this directory "
                  "(default: $KILN_DUMP)");
}

std::string dumpDirectory(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("KILN_DUMP");
  return env ? env : "";
}

void dumpCompilation(const ir::Graph& g, const std::string& dir, const std::string& precision) {
  ir::Graph copy = g.clone();
  passes::PassContext ctx;
  ctx.dumpDir = dir;
  ctx.precision = passes::precisionFromName(precision);
  passes::compileGraph(copy, ctx);
  std::fprintf(stderr, "dumped the compilation of @%s to %s/\n", g.name().c_str(), dir.c_str());
}

}  // namespace kiln::cli
