// canonicalize: simplifies a graph of primitives without changing any result the reference
// interpreter computes (bit for bit, NaN payloads aside), to a fixed point:
//   - constant folding: an elementwise, cast, reshape, broadcast, permute or slice node whose
//     operands are all constants becomes one constant (a splat stays a splat; other results up to
//     4096 elements), evaluated with the interpreter's rounding, wrapping and saturation;
//   - algebraic identities: x*1, 1*x, x/1, x-0, x+(-0.0), neg(neg x), a cast to the same type, a
//     cast chain whose first cast is exact (f32→f64→f32 is x; f32→bf16→f32 stays);
//   - movement: an identity reshape, broadcast, permute or whole-tensor slice disappears; reshape,
//     broadcast and permute chains become one op;
//   - transposes: a permute swapping the last two dimensions of a matmul operand becomes the
//     matmul's transpose flag, and such a permute of a matmul's only use swaps the operands;
//   - CSE (identical op, operands and attributes; constants by value) and DCE (nodes that reach no
//     output and no update).
// A value's user name (`logits`, `grad.fc1.weight`) moves to its replacement when that one is
// unnamed; replacement nodes carry the source location of the node they replace. Never x*0 → 0
// (NaN, inf) and never x+0.0 → x for floats (-0.0). docs/PASSES.md lists every rule.
#pragma once

#include "passes/Pass.h"

namespace kiln::passes {

/// Registered as "canonicalize". Leaves `g` untouched when nothing simplifies (fusion groups and
/// a memory plan then survive); otherwise rebuilds it without them. Composite ops are left as
/// they are (run decompose first to simplify inside them).
void canonicalize(ir::Graph& g, const PassContext& ctx = {});

}  // namespace kiln::passes
