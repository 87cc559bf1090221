// The GEMM form of a contraction kernel: every matmul, conv2d, conv2d_grad_input and
// conv2d_grad_weight is written as
//
//     result[b, m, n] = Σ_k A[b, m, k] · B[b, k, n]      (b < batch, m < M, n < N, k < K)
//
// where b, m, n and k are flattened multi-dimensional coordinates and the result is row-major
// over (batch coordinates, m coordinates, n coordinates) — a reshape of the node's result shape,
// so the result's flat index is (b·M + m)·N + n. Each operand element is reached through an index
// map over the operand's coordinate vector — A over (batch…, m…, k…), B over (batch…, k…, n…) —
// with bounds outside which the element reads 0 (convolution padding). Transposes, broadcast batch
// dimensions and convolution windows are all coefficients of these maps, so a backend computes
// every contraction with one GEMM whose packing routines evaluate the maps (implicit GEMM: the
// convolution's im2col matrix is never materialized).
//
//   op                  batch dims     m dims      n dims          k dims          A      B
//   matmul              result[:-2]    M           N               K               a      b
//   conv2d              N, G           O/G         OH, OW          C/G, KH, KW     w      x
//   conv2d_grad_weight  G              O/G         C/G, KH, KW     N, OH, OW       dy     x
//   conv2d_grad_input   N, G           C/G         H, W            O/G, KH, KW     w      dy
//
// G is the group count: a group's output channels only see its input channels, so the group is a
// batch coordinate and the channel dimension of the result splits into (group, channel in group).
// conv2d_grad_input with a stride > 1 reads dy at oh = (h + pad - kh·dil) / stride only where the
// division is exact; those forms carry quotient terms (GemmOperand::quotients) and are not affine.
#pragma once

#include "kernels/Kernel.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kiln::kernels {

/// One operand of a GEMM form: buffer `buffer` of the kernel read through `map`, an index map over
/// the operand's coordinate vector (see GemmForm); where a bound fails the element is 0.
struct GemmOperand {
  /// A non-affine term: q = value / divisor. The element exists only where `value` is a multiple
  /// of `divisor` and 0 <= q < limit (elsewhere it is 0); its flat index gains coeff · q.
  struct Quotient {
    Affine value;
    int64_t divisor = 1;
    int64_t limit = 0;
    int64_t coeff = 0;
  };
  int32_t buffer = -1;
  IndexMap map;
  std::vector<Quotient> quotients;  // empty in affine forms
};

struct GemmForm {
  /// Sizes of the coordinates, outermost first; batch, m, n and k are their products.
  std::vector<int64_t> batchDims, mDims, nDims, kDims;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  GemmOperand a;  // over (batch…, m…, k…)
  GemmOperand b;  // over (batch…, k…, n…)
  /// How the node's result dimensions split into the batch, M and N of a result-level view
  /// [batch / groups, groups · m, n] (the same elements in the same order): matmul
  /// (rank − 2, 1, 1), conv2d and conv2d_grad_input (1, 1, 2), conv2d_grad_weight (0, 1, 3).
  int resultBatchDims = 0, resultMDims = 1, resultNDims = 1;
  /// The group count G of a convolution, whose last batch coordinate is the group: form point
  /// (b, m, n) is result-level point (b / G, (b % G) · m-size + m, n). 1 for matmul.
  int64_t groups = 1;
  /// False when an operand has quotient terms (conv2d_grad_input with stride > 1).
  bool affine = true;
  /// The arithmetic of the kernel's fused epilogue, over every result element (Kernel::flops less
  /// the product's 2 · batch · m · n · k): a fused optimizer update weighs as much as the product
  /// when K is small.
  double epilogueFlops = 0;
};

/// 2 · batch · m · n · k: the arithmetic of the product itself.
double productFlops(const GemmForm& f);

/// The GEMM form of contraction kernel `k` (k.hasContraction). Bounds that hold everywhere in the
/// coordinate box are left out, so a plain matmul's maps have none.
GemmForm gemmForm(const Kernel& k);

/// The flat element index of `op` at coordinate vector `coords`, or nothing where the element is
/// padding (a bound or a quotient condition fails). The reference semantics of the maps.
std::optional<int64_t> gemmElementIndex(const GemmOperand& op, std::span<const int64_t> coords);

/// The element strides of an operand whose element (row, k) of batch b lies at
/// offset(b) + row · row + k · k in its buffer, with one of the two strides 1 (a matmul operand,
/// transposed or not, a 1×1 convolution without padding). The strides of a coordinate group of
/// size 1 are free; they are chosen so that the other is what counts.
struct Strides {
  int64_t row = 0, k = 0;
  bool rowsContiguous() const { return row == 1; }
};
std::optional<Strides> stridesOf(const GemmForm& f, bool a);

/// The stride s when affine functional `a` is s · flat over the coordinate group at `at` of sizes
/// `dims` (its coefficients are the group's row-major strides times s), else nothing.
std::optional<int64_t> groupStride(const Affine& a, size_t at, const std::vector<int64_t>& dims);

}  // namespace kiln::kernels
