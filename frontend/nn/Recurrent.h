// Recurrent layers. The graph is static, so a recurrence is unrolled over the (static) sequence
// length at trace time: one set of gate ops per step.
#pragma once

#include "frontend/nn/Module.h"

namespace kiln::nn {

struct LSTMOutput {
  Tensor output;  // [B, T, H] (batch_first) — h_t for every step
  Tensor h;       // [B, H] last hidden state
  Tensor c;       // [B, H] last cell state
};

/// Single-layer LSTM, batch_first, as torch.nn.LSTM(input, hidden, batch_first=True):
/// weight_ih_l0 [4H, in], weight_hh_l0 [4H, H], bias_ih_l0 [4H], bias_hh_l0 [4H], gate order
/// i, f, g, o; every parameter ~ U(±1/sqrt(H)).
///   i = σ(W_ii x + b_ii + W_hi h + b_hi)   f = σ(…)   g = tanh(…)   o = σ(…)
///   c' = f ⊙ c + i ⊙ g                      h' = o ⊙ tanh(c')
class LSTM : public Module {
 public:
  LSTM(int64_t inputSize, int64_t hiddenSize);
  std::string typeName() const override { return "LSTM"; }

  /// x [B, T, in]; h0/c0 [B, H] default to zeros.
  LSTMOutput forward(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {}, SrcLoc loc = SrcLoc::current());
  LSTMOutput operator()(const Tensor& x, SrcLoc loc = SrcLoc::current()) { return forward(x, {}, {}, loc); }
  int64_t hiddenSize() const { return hidden_; }

 private:
  int64_t input_, hidden_;
};

}  // namespace kiln::nn
