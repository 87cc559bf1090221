// Thin matmuls as sums of outer products (passes/ThinMatMul.h), expanded with the decompose
// pass's builder and node expansion.
#include "passes/ThinMatMul.h"

#include "passes/decompose/Builder.h"

namespace kiln::passes {

using ir::Ints;
using ir::OpKind;
using ir::Value;

namespace {

constexpr int64_t kMaxDepth = 2;  // K up to which a product is a sum of outer products

bool isThin(const ir::Node& n) {
  if (n.op != OpKind::MatMul) return false;
  const Value *a = n.operands[0], *b = n.operands[1];
  const DType t = n.result->type.dtype;
  if (a->type.rank() != 2 || b->type.rank() != 2 || (t != DType::f32 && t != DType::f64)) return false;
  const int64_t k = a->type.shape[n.attrBool("transpose_a") ? 0 : 1];
  return k >= 1 && k <= kMaxDepth;
}

/// Σ_k op(A)[:, k] ⊗ op(B)[k, :] in f64, rounded to the result type.
Value* outerProducts(decomp::Builder& b, const ir::Node& n, std::span<Value* const> xs) {
  Value *a = xs[0], *bm = xs[1];
  const bool ta = n.attrBool("transpose_a"), tb = n.attrBool("transpose_b");
  const int64_t m = n.result->type.shape[0], cols = n.result->type.shape[1];
  const int64_t depth = a->type.shape[ta ? 0 : 1];
  auto slice = [&](Value* v, Ints starts, Ints ends) {
    return b.op(OpKind::Slice, {v}, {{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"steps", Ints{1, 1}}});
  };
  auto cast = [&](Value* v, DType to) { return v->type.dtype == to ? v : b.op(OpKind::Cast, {v}, {{"dtype", to}}); };
  // Broadcast before the widening, so that each cast runs at the points of the product reading it
  // and joins its kernel (a cast of the [M, 1] column would be a kernel of its own).
  auto widened = [&](Value* v) { return cast(b.op(OpKind::Broadcast, {v}, {{"shape", Ints{m, cols}}}), DType::f64); };
  // The sum starts at +0, as the interpreter's does: a product of -0 alone gives +0.
  Value* sum = b.constant(0.0, DType::f64);
  for (int64_t k = 0; k < depth; ++k) {
    // Column k of op(A) as [M, 1]; row k of op(B) as [1, N]. A row of a transposed A (or a column
    // of a transposed B) is reshaped, which keeps its elements' order.
    Value* colA = ta ? b.reshape(slice(a, {k, 0}, {k + 1, m}), {m, 1}) : slice(a, {0, k}, {m, k + 1});
    Value* rowB = tb ? b.reshape(slice(bm, {0, k}, {cols, k + 1}), {1, cols}) : slice(bm, {k, 0}, {k + 1, cols});
    sum = b.add(sum, b.mul(widened(colA), widened(rowB)));
  }
  return cast(sum, n.result->type.dtype);
}

}  // namespace

int expandThinMatMuls(ir::Graph& g) { return decomp::expandNodes(g, isThin, outerProducts); }

}  // namespace kiln::passes
