// NAME.c of a CUDA library (ExportSupport.h generateCudaSource).
#include "aot/ExportSupport.h"

#include "support/Error.h"

#include <fmt/format.h>

namespace kiln::aot::detail {

namespace {

static_assert(static_cast<int>(cuda::Location::Kind::Input) == 0 && static_cast<int>(cuda::Location::Kind::Param) == 1 &&
                  static_cast<int>(cuda::Location::Kind::Arena) == 2 && static_cast<int>(cuda::Location::Kind::Own) == 3 &&
                  static_cast<int>(cuda::Location::Kind::Scratch) == 4,
              "cuda::Location::Kind numbers as KILN_AOT_INPUT … KILN_AOT_SCRATCH (aot/runtime/kiln_aot.h)");

std::string loc(const cuda::Location& at) { return locText(static_cast<int>(at.kind), at.index, at.offset); }

/// A blob: `symbol` (hidden, 64-byte aligned, in .rodata) holding the bytes of `file` and, with
/// `nul`, a terminating zero byte.
std::string incbin(const std::string& symbol, const std::string& file, bool nul) {
  std::string asmText = fmt::format(
      ".pushsection .rodata\\n.balign 64\\n.globl {0}\\n.hidden {0}\\n.type {0}, @object\\n{0}:\\n.incbin \\\"{1}\\\"\\n{2}"
      ".size {0}, .-{0}\\n.popsection\\n",
      symbol, file, nul ? ".byte 0\\n" : "");
  return fmt::format("KILN_AOT_HIDDEN extern const unsigned char {}[];\n__asm__(\"{}\");\n", symbol, asmText);
}

}  // namespace

std::string generateCudaSource(const ProgramDescription& d, const cuda::ProgramLayout& L, const CudaBlobs& blobs) {
  const std::string& n = d.name;
  for (const auto& c : blobs.cubins) KILN_CHECK(c.file.find('"') == std::string::npos, "blob file name '{}'", c.file);
  std::string c = sourceHead(
      d, "the tables of CUDA program " + n + ", its kernels (cubins and PTX, pulled in with .incbin), then kiln's AOT runtime, then the functions of " + n + ".h",
      "cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden -Wa,-I. " + n + ".c -ldl -lm -lpthread (in the directory of the blobs)");
  c += "\n/* The kernels, the constants and the embedded weights as read-only data. */\n";
  std::vector<std::string> cubins;
  for (const auto& cb : blobs.cubins) {
    const std::string symbol = fmt::format("{}_kiln_cubin_sm{}", n, cb.sm);
    c += incbin(symbol, cb.file, false);
    cubins.push_back(fmt::format("{{{}, {}, {}}}", cb.sm, symbol, cb.bytes));
  }
  const std::string ptxSymbol = n + "_kiln_ptx";
  if (!blobs.ptxFile.empty()) c += incbin(ptxSymbol, blobs.ptxFile, true);
  if (!blobs.constantsFile.empty()) c += incbin(constantsSymbol(n), blobs.constantsFile, false);
  if (!blobs.weightsFile.empty()) c += incbin(weightsSymbol(n), blobs.weightsFile, false);
  c += "\n";

  std::vector<std::string> outLocs, updates, staged;
  for (const cuda::Location& at : L.outputs) outLocs.push_back(loc(at));
  for (const auto& u : L.updates) {
    updates.push_back(fmt::format("{{{}, {}}}", u.param, loc(u.value)));
    staged.push_back(u.staged ? "1" : "0");
  }
  std::vector<std::pair<ir::TensorType, int64_t>> owned;
  for (size_t i = 0; i < L.owned.size(); ++i) owned.emplace_back(L.owned[i].type, blobs.constantOffsets.at(i));
  TableParts t = commonTables(d, outLocs, updates, owned);

  std::vector<std::string> launches;
  for (const cuda::StepLayout& s : L.steps) {
    KILN_CHECK(s.kind == cuda::Step::Kind::Launch, "kernel '{}': a cuBLASLt step in a CUDA library (lay it out with blasLt off)",
               L.kernels.at(s.kernel).name);
    std::string args = "NULL";
    if (!s.args.empty()) {
      std::vector<std::string> as;
      for (const cuda::Location& at : s.args) as.push_back(loc(at));
      args = fmt::format("kiln_aot_launch_args{}", launches.size());
      t.body += fmt::format("static const kiln_aot_loc {}[] = {{{}}};\n", args, fmt::join(as, ", "));
    }
    launches.push_back(fmt::format("{{{}, {{{}}}, {{{}}}, {}, {}, {}}}", literal(s.entry), fmt::join(s.grid, ", "),
                                   fmt::join(s.block, ", "), s.sharedBytes, s.args.size(), args));
  }
  std::string launchArray = "NULL", stagedArray = "NULL", cubinArray = "NULL";
  if (!launches.empty()) {
    t.body += fmt::format("static const kiln_aot_launch kiln_aot_launches[] = {{\n  {}\n}};\n", fmt::join(launches, ",\n  "));
    launchArray = "kiln_aot_launches";
  }
  if (!staged.empty()) {
    t.body += fmt::format("static const unsigned char kiln_aot_update_staged[] = {{{}}};\n", fmt::join(staged, ", "));
    stagedArray = "kiln_aot_update_staged";
  }
  if (!cubins.empty()) {
    t.body += fmt::format("static const kiln_aot_cubin kiln_aot_cubins[] = {{\n  {}\n}};\n", fmt::join(cubins, ",\n  "));
    cubinArray = "kiln_aot_cubins";
  }
  c += t.decls + t.body;
  c += fmt::format(
      "\nstatic const kiln_aot_cuda_program kiln_aot_the_cuda = {{\n  {base},\n  {staged}, {ncubins}, {cubins}, {ptx}, "
      "{ptxSm}, {version}, {scratch}, {nlaunches}, {launches}\n}};\n\n",
      fmt::arg("base", programInitializer(d, t, blobs.constantsFile.empty() ? "NULL" : constantsSymbol(n), L.arenaBytes,
                                          0, "NULL", "NULL")),
      fmt::arg("staged", stagedArray), fmt::arg("ncubins", cubins.size()), fmt::arg("cubins", cubinArray),
      fmt::arg("ptx", blobs.ptxFile.empty() ? "NULL" : "(const char*)" + ptxSymbol), fmt::arg("ptxSm", blobs.ptxSm),
      fmt::arg("version", blobs.cudaVersion), fmt::arg("scratch", L.scratchBytes), fmt::arg("nlaunches", launches.size()),
      fmt::arg("launches", launchArray));
  c += "/* ---- the runtime (aot/runtime/kiln_aot_common.c, kiln_aot_safetensors.c, kiln_aot_cuda.c) ---- */\n\n";
  c += runtimeText("cuda");
  c += apiFunctions(d, "kiln_aot_the_cuda.base", "kiln_aot_cuda_create(&kiln_aot_the_cuda");
  return c;
}

}  // namespace kiln::aot::detail
