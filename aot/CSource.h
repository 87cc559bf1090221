// The two generated texts of an AOT library: NAME.h (the public C API) and NAME.c (the program's
// tables, the runtime of aot/runtime/, and the NAME_* functions). The CPU library's NAME.c is
// generateSource's; the CUDA library's is CudaSource.h's, built from the pieces declared below.
#pragma once

#include "codegen/cpu/Program.h"
#include "ir/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln::aot {

/// Everything the generators need to know about one compiled program.
struct ProgramDescription {
  std::string name;       // the C prefix
  std::string source;     // where it came from, for the header comment
  std::string target = "cpu";        // or "cuda"
  const ir::Graph* graph = nullptr;  // compiled (after the pipeline)
  int kernelCount = 0;
  const cpu::ProgramLayout* layout = nullptr;  // cpu
  std::string cudaCode;  // cuda: what the library holds, for the header ("cubins for sm_80, sm_90 and …")
  std::vector<std::string> cpuFeatures;
  std::vector<int64_t> constantOffsets;  // per owned buffer: offset in the constants blob, or -1
  bool hasConstants = false;
  bool embeddedWeights = false;
  int64_t weightsBytes = 0;  // of the embedded safetensors blob
  // Training steps: input and output indices; -1 for inference programs.
  int trainBatch = -1, trainLabels = -1, trainLr = -1, trainLoss = -1;
  bool training() const { return trainBatch >= 0; }
};

/// The symbols of the blobs the object holds.
std::string constantsSymbol(const std::string& name);
std::string weightsSymbol(const std::string& name);

std::string generateHeader(const ProgramDescription& p);
/// NAME.c of a CPU library.
std::string generateSource(const ProgramDescription& p);

// ---- pieces of NAME.c, shared by the targets ----

/// The signature and location tables of a program as C declarations: each member names its
/// array (or is "NULL").
struct TableParts {
  std::string decls, body;  // shape arrays, then the tables
  std::string inputs = "NULL", outputs = "NULL", params = "NULL", outputLocs = "NULL", updates = "NULL",
              owned = "NULL";
  size_t numInputs = 0, numOutputs = 0, numParams = 0, numUpdates = 0, numOwned = 0;
};
/// `outputLocs`: one kiln_aot_loc initializer per output (locText); `updates`: one kiln_aot_update
/// initializer each; `owned`: each owned buffer's type and its offset in the constants blob (-1).
TableParts commonTables(const ProgramDescription& p, const std::vector<std::string>& outputLocs,
                        const std::vector<std::string>& updates,
                        const std::vector<std::pair<ir::TensorType, int64_t>>& owned);
/// A kiln_aot_loc initializer; `kind` as KILN_AOT_INPUT … KILN_AOT_SCRATCH (0 … 4).
std::string locText(int kind, size_t index, int64_t offset);
/// The start of NAME.c: a comment (`what`, the compile command), the defines, NAME.h, kiln_aot.h.
std::string sourceHead(const ProgramDescription& p, const std::string& what, const std::string& compile);
/// The initializer of the kiln_aot_program.
std::string programInitializer(const ProgramDescription& p, const TableParts& t, const std::string& constants,
                               int64_t arenaBytes, size_t numKernels, const std::string& kernels,
                               const std::string& features);
/// The runtime's text for `target` ("cpu", "cuda"): kiln_aot_common.c, kiln_aot_safetensors.c and
/// the target's part.
std::string runtimeText(const std::string& target);
/// The NAME_* functions: `program` is the kiln_aot_program expression, `createCall` the start of
/// the call that creates a context (its arguments continue with weights_path, num_threads, ctx).
std::string apiFunctions(const ProgramDescription& p, const std::string& program, const std::string& createCall);

/// A C string literal for `s`.
std::string literal(const std::string& s);

/// `name` made into an upper-case C identifier fragment: "fc1.weight" → "FC1_WEIGHT".
std::string macroName(const std::string& name);

}  // namespace kiln::aot
