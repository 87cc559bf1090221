#include "frontend/nn/Transformer.h"

#include "frontend/OpHelpers.h"

namespace kiln::nn {

MultiheadSelfAttention::MultiheadSelfAttention(int64_t dim, int64_t numHeads, bool causal, double dropout)
    : dim_(dim), heads_(numHeads), causal_(causal) {
  KILN_CHECK(dim > 0 && numHeads > 0 && dim % numHeads == 0,
             "MultiheadSelfAttention: dim {} must be a positive multiple of the head count {}", dim, numHeads);
  qkv_ = registerModule("qkv", std::make_shared<Linear>(dim, 3 * dim));
  proj_ = registerModule("proj", std::make_shared<Linear>(dim, dim));
  drop_ = registerModule("drop", std::make_shared<Dropout>(dropout));
}

Tensor MultiheadSelfAttention::forward(const Tensor& x, SrcLoc loc) {
  if (!x.defined() || x.rank() != 3 || x.shape()[2] != dim_)
    detail::opError("attention", x, loc,
                    fmt::format("{} expects [batch, time, {}]", label(), dim_));
  const int64_t B = x.shape()[0], T = x.shape()[1], hd = dim_ / heads_;
  // [B, T, 3D] → [B, T, 3, heads, hd] → [3, B, heads, T, hd]
  Tensor qkv = permute(reshape(qkv_->forward(x, loc), {B, T, 3, heads_, hd}, loc), {2, 0, 3, 1, 4}, loc);
  auto part = [&](int64_t i) { return reshape(slice(qkv, 0, i, i + 1, 1, loc), {B, heads_, T, hd}, loc); };
  // One statement each: C++ leaves argument evaluation order unspecified, and the node order
  // (hence the printed graph) must not depend on the compiler.
  Tensor q = part(0);
  Tensor k = part(1);
  Tensor v = part(2);
  Tensor y = scaled_dot_product_attention(q, k, v, causal_, 0.0, loc);
  // [B, heads, T, hd] → [B, T, heads, hd] → [B, T, D]
  y = reshape(permute(y, {0, 2, 1, 3}, loc), {B, T, dim_}, loc);
  return drop_->forward(proj_->forward(y, loc), loc);
}

MLP::MLP(int64_t dim, int64_t hidden, double dropout) {
  fc1_ = registerModule("fc1", std::make_shared<Linear>(dim, hidden));
  fc2_ = registerModule("fc2", std::make_shared<Linear>(hidden, dim));
  drop_ = registerModule("drop", std::make_shared<Dropout>(dropout));
}

Tensor MLP::forward(const Tensor& x, SrcLoc loc) {
  return drop_->forward(fc2_->forward(gelu(fc1_->forward(x, loc), "none", loc), loc), loc);
}

TransformerBlock::TransformerBlock(int64_t dim, int64_t numHeads, bool causal, int64_t mlpRatio, double dropout) {
  ln1_ = registerModule("ln1", std::make_shared<LayerNorm>(dim));
  attn_ = registerModule("attn", std::make_shared<MultiheadSelfAttention>(dim, numHeads, causal, dropout));
  ln2_ = registerModule("ln2", std::make_shared<LayerNorm>(dim));
  mlp_ = registerModule("mlp", std::make_shared<MLP>(dim, mlpRatio * dim, dropout));
}

Tensor TransformerBlock::forward(const Tensor& x, SrcLoc loc) {
  Tensor h = add(x, attn_->forward(ln1_->forward(x, loc), loc), loc);
  return add(h, mlp_->forward(ln2_->forward(h, loc), loc), loc);
}

}  // namespace kiln::nn
