// Transformer building blocks (GPT-style, pre-norm). Parameter names:
//   ln1.weight ln1.bias  attn.qkv.weight [3D, D] attn.qkv.bias  attn.proj.weight [D, D] attn.proj.bias
//   ln2.weight ln2.bias  mlp.fc1.weight [hidden, D] mlp.fc1.bias  mlp.fc2.weight [D, hidden] mlp.fc2.bias
#pragma once

#include "frontend/nn/Layers.h"

namespace kiln::nn {

/// Multi-head self-attention over x [B, T, D]: one fused qkv projection (q, k, v stacked along the
/// output features in that order), heads split by reshape/permute, scaled_dot_product_attention,
/// heads merged, output projection.
class MultiheadSelfAttention : public UnaryModule {
 public:
  MultiheadSelfAttention(int64_t dim, int64_t numHeads, bool causal = false, double dropout = 0.0);
  std::string typeName() const override { return "MultiheadSelfAttention"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  int64_t dim_, heads_;
  bool causal_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<Dropout> drop_;
};

/// fc1 → GELU → fc2.
class MLP : public UnaryModule {
 public:
  MLP(int64_t dim, int64_t hidden, double dropout = 0.0);
  std::string typeName() const override { return "MLP"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<Dropout> drop_;
};

/// x = x + attn(ln1(x)); x = x + mlp(ln2(x)).
class TransformerBlock : public UnaryModule {
 public:
  TransformerBlock(int64_t dim, int64_t numHeads, bool causal = true, int64_t mlpRatio = 4, double dropout = 0.0);
  std::string typeName() const override { return "TransformerBlock"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<MultiheadSelfAttention> attn_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace kiln::nn
