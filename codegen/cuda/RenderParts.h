// The parts of the CUDA renderer (Render.h), one per kind of kernel description; renderKernel
// dispatches to them. Internal to codegen/cuda.
#pragma once

#include "codegen/cuda/Render.h"

#include <cctype>
#include <cstdint>
#include <string>

namespace kiln::cuda {

/// A kernel name as a C identifier (entry points are named after their kernel).
inline std::string identifier(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "k_" + s;
  return s;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Loop, reduction and multi kernels (RenderNest.cpp).
RenderedKernel renderNestKernel(const kernels::Kernel& k, const RenderOptions& options);

/// Kernels of kind op: pooling and its gradients, gather, scatter_add, one_hot, concat,
/// argmax/argmin, slice_grad, random with a step counter (RenderOps.cpp).
RenderedKernel renderOpKernel(const kernels::Kernel& k, const RenderOptions& options);

/// Contraction kernels: matmul, conv2d and both conv gradients with their epilogue nest — a
/// cuBLASLt step (matmul forms, when options.blasLt) or the generated GEMM with the epilogue fused
/// (RenderGemm.cpp).
RenderedKernel renderContraction(const kernels::Kernel& k, const RenderOptions& options);

}  // namespace kiln::cuda
