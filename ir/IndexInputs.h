// Graph inputs read as indices (gather's and scatter_add's), with the range they must lie in.
//
// The interpreter checks every index as it runs; compiled kernels do not (an index out of range
// reads or adds nothing there). Indices computed inside a graph are in range by construction
// (iota, argmax); those that come from outside — token ids, scatter rows — are checked at the
// boundary instead: by the executors before each run (engine/Executor.cpp) and by AOT libraries'
// run and train_step (aot/runtime), with the interpreter's message.
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ir {

struct IndexInput {
  const Value* input = nullptr;  // the graph input (read directly or through reshapes)
  std::string op;                // "gather (%e)": the op and its result, for messages
  std::string loc;               // "file:line:col: " or ""
  int64_t bound = 0;             // every index must lie in [0, bound)
  int64_t axis = 0;
};

/// Every gather and scatter_add of `g` whose indices are a graph input.
std::vector<IndexInput> indexInputs(const Graph& g);

}  // namespace kiln::ir
