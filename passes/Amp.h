// amp: automatic mixed precision by policy (PassContext::precision), in the spirit of PyTorch's
// autocast, written into the IR as explicit casts so the policy is visible in every dump.
//
//   f32        the graph is left alone.
//   bf16, f16  every contraction (matmul, conv2d, conv2d_grad_input, conv2d_grad_weight) whose
//              operands and result are f32 runs on low-precision operands: each f32 operand is
//              cast to the low type, the contraction produces the low type (accumulating in f32,
//              as the ops define), and its result is cast back to f32 under the original name.
//              Everything else — elementwise ops, reductions, softmax, norms, losses, optimizer
//              math — keeps computing in f32, and parameters stay f32 master copies whose cast is
//              one node per step.
//
// A value is cast to a given low type once, and its cast is shared by every contraction that
// reads it (a cast already in the graph counts). An operand that is itself the f32 widening of a
// low-precision value uses that value directly: the round trip low → f32 → low is exact, so
// chained contractions skip a pair of casts. Contractions in f64, f16, bf16 or integers are not
// touched, graph inputs, parameters and outputs keep their names and types, and a second run
// changes nothing (the pass is idempotent).
#pragma once

#include "passes/Pass.h"

namespace kiln::passes {

/// Registered as "amp". Applies ctx.precision as described above; the new nodes carry the source
/// location of the contraction they serve.
void amp(ir::Graph& g, const PassContext& ctx);

/// The element type contractions run in under `p`: bf16, f16, or f32 for Precision::F32.
DType lowPrecisionType(Precision p);

}  // namespace kiln::passes
