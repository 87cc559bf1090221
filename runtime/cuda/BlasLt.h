// Matrix products through cuBLASLt, opened with dlopen (libcublasLt.so.<major of the toolkit's
// headers>), with its fused epilogues: bias, ReLU, GELU, and the bias gradient.
//
// Everything here is row-major, as kiln tensors are: D[m×n] = alpha·op(A)·op(B) + beta·C, where
// op(A) is m×k — A stored [m×k], or [k×m] when transA — and op(B) is k×n — B stored [k×n], or
// [n×k] when transB — all packed (leading dimension = row length).
//
// cuBLASLt is column-major. A row-major r×c matrix is, byte for byte, the column-major c×r matrix
// of its transpose; so the row-major D = op(A)·op(B) is computed as the column-major
// Dᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's "A" is kiln's B (with kiln's transB), its "B" is kiln's A (with
// transA), and its problem is M = n, N = m, K = k. Under this swap:
//   - cuBLASLt's bias (one value per row of its D) is one value per COLUMN of kiln's D: bias[j] is
//     added to D[i][j] for every row i — a linear layer's bias over output features;
//   - CUBLASLT_EPILOGUE_BGRADA (reduce its A over K) sums kiln's op(B) over k: biasGradB;
//     CUBLASLT_EPILOGUE_BGRADB (reduce its B over K) sums kiln's op(A) over k: biasGradA.
#pragma once

#include "support/DType.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::gpu {

class Context;
class Stream;

/// What cuBLASLt applies to alpha·op(A)·op(B) + beta·C before storing D.
enum class Epilogue : uint8_t {
  none,
  relu,      // max(x, 0)
  gelu,      // cuBLASLt's GELU: the tanh approximation, 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
  bias,      // x + bias[j]                      (bias: n values of the output type)
  biasRelu,  // relu(x + bias[j])
  biasGelu,  // gelu(x + bias[j])
  // Bias gradients, written to `bias` (of the output type) beside D = op(A)·op(B), which is
  // computed as usual. They need the summed operand laid out with k as its row index:
  biasGradA,  // bias[i] = Σ_p op(A)[i][p], m values; needs transA (A stored [k×m]) — CUBLASLT_EPILOGUE_BGRADB
  biasGradB,  // bias[j] = Σ_p op(B)[p][j], n values; needs !transB (B stored [k×n]) — CUBLASLT_EPILOGUE_BGRADA
};

/// "none", "relu", "gelu", "bias", "bias_relu", "bias_gelu", "bias_grad_a", "bias_grad_b".
std::string_view epilogueName(Epilogue e);

/// One (strided-batched) matrix product; see the file comment for the row-major convention.
struct MatmulDesc {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  /// Strided batch: matrix b of A starts at A + b·strideA elements (likewise B, and C and D, which
  /// share strideD). A stride of 0 reuses one matrix for every batch (A or B only).
  int32_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideD = 0;
  /// Elements between the bias vectors of consecutive batches (0: one bias for all; a bias
  /// gradient of a batch > 1 needs one vector per batch).
  int64_t biasBatchStride = 0;
  /// A and B: f32, bf16 or f16. C and D (and the bias): f32, or the input type for bf16/f16.
  DType inputType = DType::f32;
  DType outputType = DType::f32;
  /// Accumulation is f32. With f32 inputs, this lets cuBLASLt round them to TF32 on tensor cores
  /// (CUBLAS_COMPUTE_32F_FAST_TF32); off, the product is computed in full f32.
  bool allowTf32 = false;
  float alpha = 1.0f, beta = 0.0f;
  Epilogue epilogue = Epilogue::none;

  /// "37x19x23 (transA) batch 3, bf16 -> f32, bias_relu" for messages.
  std::string str() const;
};

/// Device pointers of one matmul. `c` may be null: C is then D (beta accumulates into D).
struct MatmulOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  void* bias = nullptr;  // the bias (read) or the bias gradient (written), for those epilogues
};

/// A cuBLASLt handle for one Context, with its workspace and a plan cache: each distinct
/// MatmulDesc (with the alignments of its pointers) gets its descriptors built and its algorithm
/// chosen (cublasLtMatmulAlgoGetHeuristic, best first) once. Not thread-safe; run the first matmul
/// of each shape before capturing a graph (the plan is built on the host then).
class BlasLt {
 public:
  /// Loads cuBLASLt (once per process), creates a handle and allocates the workspace from the
  /// context's allocator. 32 MiB is what NVIDIA recommends for Hopper.
  explicit BlasLt(Context& context, size_t workspaceBytes = size_t(32) << 20);
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;
  ~BlasLt();

  /// Enqueues D = epilogue(alpha·op(A)·op(B) + beta·C) on `stream`. A bad description or a product
  /// cuBLASLt has no algorithm for is a kiln::Error naming the product.
  void matmul(const MatmulDesc& desc, const MatmulOperands& operands, Stream& stream);

  /// Plans built so far.
  size_t cachedPlans() const;
  /// cuBLASLt's version, e.g. 130100.
  size_t version() const;

  /// True when libcublasLt loads; otherwise false with the reason in `*why`. Never throws.
  static bool available(std::string* why = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::gpu
