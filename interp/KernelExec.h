// Executes a graph through its kernel descriptions (kernels::lowerGraph) with the interpreter's
// evaluators: each loop nest evaluates its expression DAG over the whole domain, op by op, exactly
// as the interpreter evaluates the nodes. It checks the descriptions themselves — the index maps,
// the reductions, the stores — so a fused graph that runs here like the unfused graph runs in the
// interpreter is a correct contract for the backends, which render the same descriptions.
#pragma once

#include "interp/Interpreter.h"

namespace kiln::interp {

/// Like runPrimitives, for a graph of primitives with or without fusion groups.
TensorMap runKernels(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params,
                     TensorMap* updatedParams = nullptr);

}  // namespace kiln::interp
