// decompose: rewrites every composite op (OpFlag kComposite: linear, softmax, cross_entropy,
// layer_norm, attention, …) into primitives, so backends implement primitives only. One rule per
// composite op; the new nodes keep the composite's source location. Outputs and values used by
// later nodes are remapped; the result verifies.
#pragma once

#include "passes/Pass.h"

namespace kiln::passes {

/// Registered as "decompose".
void decompose(ir::Graph& g);

/// Whether the decompose pass has a rule for `op` (every op flagged kComposite must).
bool hasDecomposition(ir::OpKind op);

}  // namespace kiln::passes
