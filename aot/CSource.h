// The two generated texts of an AOT library: NAME.h (the public C API) and NAME.c (the program's
// tables, the runtime of aot/runtime/, and the NAME_* functions).
#pragma once

#include "codegen/cpu/Program.h"
#include "ir/Graph.h"

#include <string>
#include <vector>

namespace kiln::aot {

/// Everything the generators need to know about one compiled program.
struct ProgramDescription {
  std::string name;       // the C prefix
  std::string source;     // where it came from, for the header comment
  const ir::Graph* graph = nullptr;  // compiled (after the pipeline)
  const cpu::ProgramLayout* layout = nullptr;
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
std::string generateSource(const ProgramDescription& p);

/// `name` made into an upper-case C identifier fragment: "fc1.weight" → "FC1_WEIGHT".
std::string macroName(const std::string& name);

}  // namespace kiln::aot
