// Rules for layers: linear, embedding, layer_norm, dropout, attention.
#include "passes/decompose/Builder.h"

#include <cmath>
#include <limits>

namespace kiln::passes::decomp {

using ir::OpKind;
using ir::Value;

Value* decomposeLinear(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value *x = xs[0], *w = xs[1];
  const ir::Shape& xShape = x->type.shape;
  int64_t in = xShape.back(), out = w->type.shape[0];
  // Rows of any rank flatten into one [rows, in] x [in, out] product: a single GEMM for backends,
  // with the bias add right behind it where fusion looks for an epilogue.
  Value* rows = x;
  if (x->type.rank() != 2) rows = b.reshape(x, {ir::numElements(ir::Shape(xShape.begin(), xShape.end() - 1)), in});
  Value* y = b.op(OpKind::MatMul, {rows, b.permute(w, {1, 0})});
  if (xs.size() == 3) y = b.add(y, xs[2]);
  if (x->type.rank() != 2) {
    ir::Shape outShape = xShape;
    outShape.back() = out;
    y = b.reshape(y, outShape);
  }
  return y;
}

Value* decomposeEmbedding(Builder& b, const ir::Node&, std::span<Value* const> xs) {
  return b.op(OpKind::Gather, {xs[1], xs[0]}, {{"axis", int64_t{0}}});
}

Value* decomposeLayerNorm(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value* x = xs[0];
  int64_t rank = x->type.rank(), k = node.attrInt("normalized_ndim");
  ir::Ints axes;
  for (int64_t a = rank - k; a < rank; ++a) axes.push_back(a);
  Value* centered = b.sub(x, b.mean(x, axes, true));
  Value* variance = b.mean(b.mul(centered, centered), axes, true);  // biased, as PyTorch
  Value* inv = b.unary(OpKind::Rsqrt, b.add(variance, b.constant(node.attrFloat("eps"), x->type.dtype)));
  Value* y = b.mul(centered, inv);
  if (xs.size() >= 2) y = b.mul(y, xs[1]);
  if (xs.size() >= 3) y = b.add(y, xs[2]);
  return y;
}

Value* decomposeDropout(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value* x = xs[0];
  double p = node.attrFloat("p");
  // The mask is drawn in f32 whatever x's type, so the same seed drops the same elements in an
  // f16 and an f32 model. The step counter, when there is one, goes to the random op.
  std::vector<Value*> step(xs.begin() + 1, xs.end());
  Value* u = b.op(OpKind::Random, std::move(step),
                  {{"shape", x->type.shape},
                   {"dtype", DType::f32},
                   {"dist", std::string("uniform")},
                   {"seed", node.attrInt("seed")},
                   {"offset", node.attrInt("offset")}});
  Value* keep = b.op(OpKind::Ge, {u, b.constant(p, DType::f32)});
  Value* kept = b.scale(x, 1.0 / (1.0 - p));
  return b.op(OpKind::Select, {keep, kept, b.constant(0.0, x->type.dtype)});
}

Value* decomposeAttention(Builder& b, const ir::Node& node, std::span<Value* const> xs) {
  Value *q = xs[0], *k = xs[1], *v = xs[2];
  int64_t rank = q->type.rank();
  ir::Ints perm = allAxes(rank);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Value* scores = b.op(OpKind::MatMul, {q, b.permute(k, perm)});  // [..., L, S]
  double scale = node.attrFloat("scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(q->type.shape[rank - 1]));
  scores = b.scale(scores, scale);
  if (node.attrBool("causal")) {
    // Query i sees keys j <= i: a [L, S] mask broadcast over the batch dimensions.
    ir::Shape ls = {q->type.shape[rank - 2], k->type.shape[rank - 2]};
    Value* row = b.op(OpKind::Iota, {}, {{"shape", ls}, {"axis", int64_t{0}}, {"dtype", DType::i64}});
    Value* col = b.op(OpKind::Iota, {}, {{"shape", ls}, {"axis", int64_t{1}}, {"dtype", DType::i64}});
    Value* hidden = b.op(OpKind::Gt, {col, row});
    Value* minusInf = b.constant(-std::numeric_limits<double>::infinity(), scores->type.dtype);
    scores = b.op(OpKind::Select, {hidden, minusInf, scores});
  }
  return b.op(OpKind::MatMul, {b.softmax(scores, rank - 1), v});
}

}  // namespace kiln::passes::decomp
