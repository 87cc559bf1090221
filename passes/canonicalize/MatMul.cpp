// Transposes folded into matmul: linear's weight permute and the permutes of the backward pass
// become the matmul's transpose flags, so no transposed copy is ever materialized. The sums run
// over the same products in the same order, so the results are bit for bit the same.
#include "passes/canonicalize/Rewriter.h"

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

namespace {

Value* matmul(Rewriter& rw, Value* a, Value* b, bool transposeA, bool transposeB) {
  return rw.build(OpKind::MatMul, {a, b}, {{"transpose_a", transposeA}, {"transpose_b", transposeB}});
}

// The source of `v` when `v` swaps the last two dimensions of it with a permute.
Value* transposedSource(const Value* v) {
  const ir::Node* n = producerOf(v);
  return n != nullptr && n->op == OpKind::Permute && swapsLastTwo(n->attrInts("perm")) ? n->operands[0] : nullptr;
}

// The untransposed operand behind `v`: the source of a transpose, or for a cast of a transpose
// (mixed precision: amp's cast of a permuted weight) the same cast of its source, built here —
// a cast commutes with a permute element for element, and the cast of the stored layout is a
// plain, contiguous one instead of a transposing copy.
Value* untransposed(Rewriter& rw, const Value* v) {
  if (Value* source = transposedSource(v)) return source;
  const ir::Node* cast = producerOf(v);
  if (cast == nullptr || cast->op != OpKind::Cast) return nullptr;
  Value* source = transposedSource(cast->operands[0]);
  if (source == nullptr) return nullptr;
  return rw.build(OpKind::Cast, {source}, {{"dtype", cast->attrDType("dtype")}});
}

}  // namespace

// matmul(permute(a), b) = matmul(a, b, transpose_a flipped), and the same for b; also through a
// cast, matmul(cast(permute(a)), b) = matmul(cast(a), b, transpose_a flipped). A permute (or cast)
// with other users stays for them.
Value* foldTransposesIntoMatMul(Rewriter& rw, const Candidate& c) {
  Value *a = c.operands[0], *b = c.operands[1];
  bool ta = c.attrBool("transpose_a"), tb = c.attrBool("transpose_b");
  Value *sourceA = untransposed(rw, a), *sourceB = untransposed(rw, b);
  if (sourceA == nullptr && sourceB == nullptr) return nullptr;
  if (sourceA != nullptr) {
    a = sourceA;
    ta = !ta;
  }
  if (sourceB != nullptr) {
    b = sourceB;
    tb = !tb;
  }
  return matmul(rw, a, b, ta, tb);
}

// permute(matmul(a, b)) swapping the last two dimensions = matmul(b, a) with flipped flags, since
// (op(a)·op(b))ᵀ = op(b)ᵀ·op(a)ᵀ. Only when the permute is the matmul's one use: otherwise the
// matmul would be computed twice to save a permute.
Value* foldPermuteOfMatMul(Rewriter& rw, const Candidate& c) {
  if (!swapsLastTwo(c.attrInts("perm")) || !c.isSoleUse(0)) return nullptr;
  const ir::Node* mm = producerOf(c.operands[0]);
  if (mm == nullptr || mm->op != OpKind::MatMul) return nullptr;
  Value *a = mm->operands[0], *b = mm->operands[1];
  return matmul(rw, b, a, !mm->attrBool("transpose_b"), !mm->attrBool("transpose_a"));
}

}  // namespace kiln::passes::canon
