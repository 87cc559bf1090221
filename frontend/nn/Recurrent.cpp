#include "frontend/nn/Recurrent.h"

#include "frontend/OpHelpers.h"

#include <cmath>

namespace kiln::nn {

LSTM::LSTM(int64_t inputSize, int64_t hiddenSize) : input_(inputSize), hidden_(hiddenSize) {
  KILN_CHECK(inputSize > 0 && hiddenSize > 0, "LSTM({}, {}): sizes must be positive", inputSize, hiddenSize);
  double k = 1.0 / std::sqrt(static_cast<double>(hiddenSize));
  registerParameter("weight_ih_l0", {4 * hiddenSize, inputSize}, init::uniform(-k, k));
  registerParameter("weight_hh_l0", {4 * hiddenSize, hiddenSize}, init::uniform(-k, k));
  registerParameter("bias_ih_l0", {4 * hiddenSize}, init::uniform(-k, k));
  registerParameter("bias_hh_l0", {4 * hiddenSize}, init::uniform(-k, k));
}

LSTMOutput LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0, SrcLoc loc) {
  if (!x.defined() || x.rank() != 3 || x.shape()[2] != input_)
    detail::opError("lstm", x, loc,
                    fmt::format("{} expects input [batch, time, {}] (batch_first)", label(), input_));
  Tracer& t = x.tracer();
  const int64_t B = x.shape()[0], T = x.shape()[1], H = hidden_;
  if (T == 0) detail::opError("lstm", x, loc, fmt::format("{} needs at least one time step", label()));
  Tensor wih = param(t, "weight_ih_l0"), whh = param(t, "weight_hh_l0");
  Tensor bih = param(t, "bias_ih_l0"), bhh = param(t, "bias_hh_l0");

  // The input projection of every step is one contraction: [B, T, in] → [B, T, 4H].
  Tensor xProj = linear(x, wih, bih, loc);
  Tensor h = h0.defined() ? h0 : zeros(t, {B, H}, x.dtype(), loc);
  Tensor c = c0.defined() ? c0 : zeros(t, {B, H}, x.dtype(), loc);
  std::vector<Tensor> steps;
  for (int64_t s = 0; s < T; ++s) {
    Tensor xs = reshape(slice(xProj, 1, s, s + 1, 1, loc), {B, 4 * H}, loc);
    Tensor gates = add(xs, linear(h, whh, bhh, loc), loc);
    Tensor i = sigmoid(slice(gates, 1, 0, H, 1, loc), loc);
    Tensor f = sigmoid(slice(gates, 1, H, 2 * H, 1, loc), loc);
    Tensor g = tanh(slice(gates, 1, 2 * H, 3 * H, 1, loc), loc);
    Tensor o = sigmoid(slice(gates, 1, 3 * H, 4 * H, 1, loc), loc);
    Tensor keep = mul(f, c, loc);  // separate statements: argument order is unspecified in C++
    c = add(keep, mul(i, g, loc), loc);
    h = mul(o, tanh(c, loc), loc);
    steps.push_back(reshape(h, {B, 1, H}, loc));
  }
  Tensor out = T == 1 ? steps[0] : concat(steps, 1, loc);
  return {out, h, c};
}

}  // namespace kiln::nn
