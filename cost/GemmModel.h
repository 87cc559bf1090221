// kiln's packed CPU GEMM priced from the machine profile's probes: the cost model's part that
// fits a formula to them (GemmModel.cpp's comment; docs/COST.md, "packed GEMM").
#pragma once

#include "cost/MachineProfile.h"
#include "ir/OpInfo.h"
#include "kernels/Gemm.h"
#include "support/DType.h"

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::cost {

/// GemmEmitter.h's kParallelFlops, mirrored: a product of fewer flops runs on one thread.
inline constexpr double kGemmParallelFlops = 2.0 * (1 << 20);

/// Which operands of a product are transposed: A stored [k, m] (its rows contiguous: a weight
/// gradient's layer input), B stored [n, k] (its k contiguous: a layer's PyTorch-layout weight).
struct GemmLayout {
  bool a = false, b = false;
};
GemmLayout layoutOf(const kernels::GemmForm& f);

/// The model fitted to `cpu`'s f32 matmul probes, with its bf16 and convolution factors.
class GemmModel {
 public:
  explicit GemmModel(const CpuProfile& cpu);
  /// Microseconds of a contraction `op` in GEMM form batch × m×n×k with operands of `dtype`.
  double micros(ir::OpKind op, DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, GemmLayout layout) const;
  /// The fitted coefficients, the convolution factors and each probe against the fit.
  std::string text() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln::cost
