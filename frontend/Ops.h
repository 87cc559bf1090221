// Tensor operations of the DSL: one free function (or operator) per op of ir/Ops.def, plus the
// usual conveniences built from them (transpose, flatten, squeeze, narrow, …). Names and argument
// orders follow PyTorch where PyTorch has the op.
//
// Conventions:
//  - Binary ops take `Operand`s: a Tensor or a scalar (a scalar becomes a rank-0 constant of the
//    tensor's element type). Operands broadcast NumPy-style. When two tensors' element types
//    differ they are promoted (bool < i32 < i64 < f16/bf16 < f32 < f64; f16 with bf16 → f32)
//    by inserting casts, as PyTorch does.
//  - Axes may be negative (counted from the end); they are normalized before the node is built.
//  - The trailing `loc` parameter is filled by the compiler with the caller's location; never
//    pass it by hand unless forwarding your own caller's location.
#pragma once

#include "frontend/Tensor.h"

#include <string_view>

namespace kiln {

using ir::Ints;

/// A list of axes: `1`, `{0, 2}` or nothing (= all axes for reductions).
struct Axes {
  Ints v;
  Axes() = default;
  Axes(int64_t a) : v{a} {}                           // NOLINT: implicit by design
  Axes(int a) : v{a} {}                               // NOLINT
  Axes(std::initializer_list<int64_t> l) : v(l) {}    // NOLINT
  Axes(Ints l) : v(std::move(l)) {}                   // NOLINT
};

// ---- elementwise unary -------------------------------------------------------------------------
Tensor neg(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor abs(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor exp(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor log(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor sqrt(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor rsqrt(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor reciprocal(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor tanh(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor sigmoid(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor sin(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor cos(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor erf(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor relu(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor floor(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor logical_not(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none", SrcLoc loc = SrcLoc::current());
Tensor silu(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// Converts the element type (a no-op, returning `x`, when it already is `dtype`).
Tensor cast(const Tensor& x, DType dtype, SrcLoc loc = SrcLoc::current());

// ---- elementwise binary / ternary --------------------------------------------------------------
Tensor add(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor sub(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor mul(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor div(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
/// Float types only (an integer tensor is an error).
Tensor pow(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor maximum(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor minimum(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor logical_and(const Tensor& a, const Tensor& b, SrcLoc loc = SrcLoc::current());
Tensor logical_or(const Tensor& a, const Tensor& b, SrcLoc loc = SrcLoc::current());
/// Comparisons produce bool tensors.
Tensor eq(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor ne(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor lt(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor le(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor gt(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor ge(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
/// `a` where `cond` (bool) is true, else `b` (the IR's `select`); all three broadcast.
Tensor where(const Tensor& cond, const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());

Tensor operator+(LocatedOperand a, const Operand& b);
Tensor operator-(LocatedOperand a, const Operand& b);
Tensor operator*(LocatedOperand a, const Operand& b);
Tensor operator/(LocatedOperand a, const Operand& b);
Tensor operator-(LocatedOperand x);
Tensor operator==(LocatedOperand a, const Operand& b);
Tensor operator!=(LocatedOperand a, const Operand& b);
Tensor operator<(LocatedOperand a, const Operand& b);
Tensor operator<=(LocatedOperand a, const Operand& b);
Tensor operator>(LocatedOperand a, const Operand& b);
Tensor operator>=(LocatedOperand a, const Operand& b);

// ---- reductions --------------------------------------------------------------------------------
/// Over `axes` (none = all). mean is for float types.
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdim = false, SrcLoc loc = SrcLoc::current());
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdim = false, SrcLoc loc = SrcLoc::current());
Tensor max(const Tensor& x, Axes axes = {}, bool keepdim = false, SrcLoc loc = SrcLoc::current());
Tensor min(const Tensor& x, Axes axes = {}, bool keepdim = false, SrcLoc loc = SrcLoc::current());
/// i64 index of the first maximum (minimum) along `axis`.
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false, SrcLoc loc = SrcLoc::current());
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim = false, SrcLoc loc = SrcLoc::current());

// ---- movement ----------------------------------------------------------------------------------
/// One dimension may be -1 (inferred from the element count).
Tensor reshape(const Tensor& x, Shape shape, SrcLoc loc = SrcLoc::current());
Tensor permute(const Tensor& x, Ints perm, SrcLoc loc = SrcLoc::current());
/// Swaps two dimensions (a permute).
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, SrcLoc loc = SrcLoc::current());
/// Merges dimensions start_dim..end_dim into one (torch.flatten).
Tensor flatten(const Tensor& x, int64_t startDim = 0, int64_t endDim = -1, SrcLoc loc = SrcLoc::current());
/// Removes dimension `dim`, which must have size 1.
Tensor squeeze(const Tensor& x, int64_t dim, SrcLoc loc = SrcLoc::current());
/// Inserts a size-1 dimension at `dim` (in [-rank-1, rank]).
Tensor unsqueeze(const Tensor& x, int64_t dim, SrcLoc loc = SrcLoc::current());
Tensor broadcast_to(const Tensor& x, Shape shape, SrcLoc loc = SrcLoc::current());
/// Python-style x[..., start:end:step, ...] along `dim`: negative start/end count from the end and
/// both are clamped to the dimension, as Python does.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1,
             SrcLoc loc = SrcLoc::current());
/// Every dimension at once (the IR's `slice`); empty `steps` means all 1.
Tensor slice(const Tensor& x, Ints starts, Ints ends, Ints steps = {}, SrcLoc loc = SrcLoc::current());
/// `length` elements of `dim` from `start` (torch.narrow).
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, SrcLoc loc = SrcLoc::current());
Tensor concat(const std::vector<Tensor>& xs, int64_t axis, SrcLoc loc = SrcLoc::current());
/// low[i]/high[i] elements of `value` before/after dimension i.
Tensor pad(const Tensor& x, Ints low, Ints high, double value = 0, SrcLoc loc = SrcLoc::current());
/// Output shape data[:axis] + indices.shape + data[axis+1:].
Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis, SrcLoc loc = SrcLoc::current());
/// torch.index_select(x, dim, index) with a rank-1 index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, SrcLoc loc = SrcLoc::current());
Tensor one_hot(const Tensor& indices, int64_t numClasses, DType dtype = DType::f32,
               SrcLoc loc = SrcLoc::current());

// ---- contractions and windows ------------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b, SrcLoc loc = SrcLoc::current());
/// x w^T + b with w[out, in] (PyTorch layout); `bias` may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, SrcLoc loc = SrcLoc::current());
struct Conv2dOptions {
  Ints stride{1, 1};
  Ints padding{0, 0};
  Ints dilation{1, 1};
  int64_t groups = 1;
};
/// x[N,C,H,W] ⋆ w[O,C/groups,KH,KW] (+ bias[O]).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Conv2dOptions& opts = {},
              SrcLoc loc = SrcLoc::current());
/// Empty `stride` means stride = kernel (as PyTorch).
Tensor max_pool2d(const Tensor& x, Ints kernel, Ints stride = {}, Ints padding = {0, 0},
                  SrcLoc loc = SrcLoc::current());
Tensor avg_pool2d(const Tensor& x, Ints kernel, Ints stride = {}, Ints padding = {0, 0},
                  bool countIncludePad = true, SrcLoc loc = SrcLoc::current());

// ---- sources -----------------------------------------------------------------------------------
/// `values` holds one element (splat) or numel(shape) elements in row-major order.
Tensor constant(Tracer& t, Shape shape, std::vector<double> values, DType dtype = DType::f32,
                SrcLoc loc = SrcLoc::current());
Tensor full(Tracer& t, Shape shape, double value, DType dtype = DType::f32, SrcLoc loc = SrcLoc::current());
Tensor zeros(Tracer& t, Shape shape, DType dtype = DType::f32, SrcLoc loc = SrcLoc::current());
Tensor ones(Tracer& t, Shape shape, DType dtype = DType::f32, SrcLoc loc = SrcLoc::current());
/// Each element is its index along `axis`.
Tensor iota(Tracer& t, Shape shape, int64_t axis = 0, DType dtype = DType::i64, SrcLoc loc = SrcLoc::current());
/// 0, 1, …, n-1 as i64 (torch.arange(n)).
Tensor arange(Tracer& t, int64_t n, SrcLoc loc = SrcLoc::current());
/// Philox draws (support/Philox.h): uniform in [0, 1) / standard normal.
Tensor random_uniform(Tracer& t, Shape shape, uint64_t seed, uint64_t offset = 0, DType dtype = DType::f32,
                      SrcLoc loc = SrcLoc::current());
Tensor random_normal(Tracer& t, Shape shape, uint64_t seed, uint64_t offset = 0, DType dtype = DType::f32,
                     SrcLoc loc = SrcLoc::current());

// ---- neural-network composites -----------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t axis = -1, SrcLoc loc = SrcLoc::current());
Tensor log_softmax(const Tensor& x, int64_t axis = -1, SrcLoc loc = SrcLoc::current());
/// reduction: "mean", "sum" or "none". logits[N, C], labels[N] (i32/i64).
/// PyTorch's F.cross_entropy for class indices, with its reduction and label smoothing.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, std::string_view reduction = "mean",
                     double label_smoothing = 0, SrcLoc loc = SrcLoc::current());
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean",
                SrcLoc loc = SrcLoc::current());
Tensor bce_with_logits(const Tensor& logits, const Tensor& target, std::string_view reduction = "mean",
                       SrcLoc loc = SrcLoc::current());
/// Normalizes over the last `normalizedNdim` dimensions; weight/bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, int64_t normalizedNdim = 1,
                  double eps = 1e-5, SrcLoc loc = SrcLoc::current());
/// Training-mode dropout with an explicit Philox stream.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset = 0, SrcLoc loc = SrcLoc::current());
/// Same, with a fresh seed from the tracer (Tracer::nextRandomSeed).
Tensor dropout(const Tensor& x, double p, SrcLoc loc = SrcLoc::current());
/// weight[V, D] rows picked by integer `indices` → indices.shape + [D].
Tensor embedding(const Tensor& indices, const Tensor& weight, SrcLoc loc = SrcLoc::current());
/// softmax(q kᵀ · scale [+ causal mask]) v; scale 0 means 1/sqrt(head dim).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    double scale = 0, SrcLoc loc = SrcLoc::current());

}  // namespace kiln
