// The reference interpreter: evaluates any graph with plain loops, written for obviousness rather
// than speed. It is the oracle every backend is tested against.
//
// Composite ops are first rewritten into primitives by the decompose pass (so the decompositions
// are themselves checked against hand-computed values); every primitive is evaluated in double
// precision and each result is rounded to its op's element type (f16/bf16 round to nearest even),
// matching the documented semantics in ir/Ops.def.
#pragma once

#include "ir/Graph.h"
#include "runtime/HostTensor.h"

#include <map>
#include <string>

namespace kiln::interp {

using TensorMap = std::map<std::string, rt::HostTensor>;

/// Evaluates `graph`. `inputs` maps every graph input's name to a tensor of exactly its type;
/// `params` maps parameter names to tensors — a parameter missing from it is materialized from its
/// initializer. Returns every graph output by name. Errors (a missing input, a wrong dtype or
/// shape, an out-of-range gather index) throw kiln::Error naming the value and the op.
/// When `updatedParams` is given, each parameter the graph updates (ir::Update: a training step)
/// gets its new value there, by name; `params` itself is never modified.
TensorMap run(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params = {},
              TensorMap* updatedParams = nullptr);

/// Evaluates a graph that holds primitives only (no decomposition). Used by run().
TensorMap runPrimitives(const ir::Graph& graph, const TensorMap& inputs, const TensorMap& params,
                        TensorMap* updatedParams = nullptr);

/// The first value of a parameter, drawn from its initializer (support/Philox.h; element i uses
/// counter i under the initializer's seed), identical on every backend.
rt::HostTensor initialize(const ir::Param& param);

/// Initial values of all parameters, by name.
TensorMap initializeParams(const ir::Graph& graph);

/// Inputs to try or time a model with (benchmarks, `kiln bench`): floats uniform in [-1, 1),
/// integers valid class indices of the graph's `logits` output (two classes without one), the
/// learning rate `lr` 1e-3; input i draws from Philox under seed + i.
TensorMap sampleInputs(const ir::Graph& graph, uint64_t seed = 1);

/// Whether runPrimitives can evaluate `op` (true for every primitive; false for composites).
bool hasEvaluator(ir::OpKind op);

}  // namespace kiln::interp
