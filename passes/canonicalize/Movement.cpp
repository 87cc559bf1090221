// Movement identities and chains: a reshape, broadcast, permute or slice that leaves its operand as
// it is disappears, and two reshapes, two broadcasts or two permutes in a row become one. The
// inner op stays when it has other users, so a chain never duplicates work.
#include "passes/canonicalize/Rewriter.h"

#include <algorithm>

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

bool isIdentityPerm(const ir::Ints& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool swapsLastTwo(const ir::Ints& perm) {
  size_t r = perm.size();
  if (r < 2 || perm[r - 2] != static_cast<int64_t>(r - 1) || perm[r - 1] != static_cast<int64_t>(r - 2)) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

namespace {

// The operand of `v`'s producer when that producer is `op`.
Value* innerOf(const Value* v, OpKind op) {
  const ir::Node* n = producerOf(v);
  return n != nullptr && n->op == op ? n->operands[0] : nullptr;
}

}  // namespace

Value* simplifyReshape(Rewriter& rw, const Candidate& c) {
  Value* x = c.operands[0];
  if (x->type.shape == c.type.shape) return x;
  // Both keep the row-major order of the elements, so only the last shape matters.
  if (Value* source = innerOf(x, OpKind::Reshape))
    return rw.build(OpKind::Reshape, {source}, {{"shape", c.type.shape}});
  return nullptr;
}

Value* simplifyBroadcast(Rewriter& rw, const Candidate& c) {
  Value* x = c.operands[0];
  if (x->type.shape == c.type.shape) return x;
  // A dimension of the source that survives into the middle shape unchanged or as a repeated 1
  // aligns with the same dimension of the final shape, so the source broadcasts there directly.
  if (Value* source = innerOf(x, OpKind::Broadcast))
    return rw.build(OpKind::Broadcast, {source}, {{"shape", c.type.shape}});
  return nullptr;
}

Value* simplifyPermute(Rewriter& rw, const Candidate& c) {
  Value* x = c.operands[0];
  const ir::Ints& perm = c.attrInts("perm");
  if (isIdentityPerm(perm)) return x;
  const ir::Node* inner = producerOf(x);
  if (inner == nullptr || inner->op != OpKind::Permute) return nullptr;
  // Output dimension i is the middle's dimension perm[i], which is the source's inner[perm[i]].
  const ir::Ints& first = inner->attrInts("perm");
  ir::Ints composed;
  for (int64_t p : perm) composed.push_back(first[static_cast<size_t>(p)]);
  return rw.build(OpKind::Permute, {inner->operands[0]}, {{"perm", composed}});
}

Value* simplifySlice(Rewriter&, const Candidate& c) {
  Value* x = c.operands[0];
  const ir::Ints& starts = c.attrInts("starts");
  // Starting at 0 with every dimension's full extent, the steps can only be 1 (or step over a
  // dimension of size 1): the slice copies everything.
  bool fromZero = std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; });
  return fromZero && x->type.shape == c.type.shape ? x : nullptr;
}

Value* sliceGradAsPad(Rewriter& rw, const Candidate& c) {
  // A unit-step slice's gradient puts dy at its place in zeros: a pad with 0 (+0.0, as
  // slice_grad's fill), which kernels read as a view instead of running a kernel of its own — the
  // gradients of attention's q, k and v, sliced out of one projection, add up in one loop.
  const ir::Ints &starts = c.attrInts("starts"), &steps = c.attrInts("steps");
  if (!std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; })) return nullptr;
  Value* dy = c.operands[0];
  ir::Ints low(starts.begin(), starts.end()), high;
  for (size_t d = 0; d < starts.size(); ++d) high.push_back(c.type.shape[d] - starts[d] - dy->type.shape[d]);
  return rw.build(OpKind::Pad, {dy}, {{"low", low}, {"high", high}, {"value", 0.0}});
}

}  // namespace kiln::passes::canon
