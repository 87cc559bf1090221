// The renderer of the CUDA backend: turns one backend-neutral kernel description (kernels/Kernel.h)
// into CUDA C++ device code plus the steps that run it — launches of its entry points and, for
// matmul-form contractions, cuBLASLt products. A program's source is the prelude (the device
// functions of every elementwise primitive, Prelude.h) followed by every kernel's code, compiled
// once by NVRTC (Nvrtc.h).
//
// Semantics are the interpreter's (ir/ScalarOps.h, docs/IR.md), as in the CPU backend: f16 and
// bf16 values are computed in f32 and rounded to their type after every op, integers in wrapping
// i64 (i32 re-wrapped after every op), integer division by zero is 0, max/min propagate NaN,
// float→integer casts truncate and saturate with NaN → 0.
//
// Calling convention of every entry point: `extern "C" __global__ void ENTRY(T0* b0, T1* b1, …)`,
// one typed pointer per element of Launch::args in order (the element type of that buffer:
// float, double, __half, __nv_bfloat16, int, long long, bool), nothing else: shapes are constants
// in the code.
#pragma once

#include "kernels/Kernel.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

struct RenderOptions {
  /// The SM architecture the code is for (80: Ampere, 90: Hopper); tensor-core paths depend on it.
  int sm = 90;
  /// Matmul-form contractions run through cuBLASLt (a Blas step plus, unless cuBLASLt's own
  /// epilogue covers it, an epilogue launch); false: the generated GEMM with the fused epilogue.
  bool blasLt = true;
  /// With blasLt, products of fewer multiply-adds (batch·m·n·k) than this still take the generated
  /// GEMM: one launch with the epilogue fused beats a cuBLASLt call (and its epilogue launch)
  /// on small products (docs/PERFORMANCE.md, "small products on the GPU").
  int64_t blasMinMacs = kBlasMinMacs;
  static constexpr int64_t kBlasMinMacs = int64_t{1} << 22;
};

/// A buffer a step reads or writes: index i < kernel.buffers.size() is that buffer of the kernel
/// description; kernel.buffers.size() + j is scratch area j of the rendered kernel.
using BufferRef = int32_t;

/// One launch of an entry point of the kernel's code.
struct Launch {
  std::string entry;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int32_t, 3> block{1, 1, 1};
  int32_t sharedBytes = 0;     // dynamic shared memory
  std::vector<BufferRef> args;  // one pointer parameter each, in order
};

/// A cuBLASLt product in kiln's row-major terms: D[b] = epilogue(A[b]·B[b]) for b < batch, where
/// A[b] is m×k (stored k×m when transA), B[b] is k×n (stored n×k when transB), D[b] is m×n, each
/// batch `stride*` elements apart (0: broadcast).
struct BlasMatmul {
  enum class Epilogue : uint8_t { None, Relu, Gelu, Bias, BiasRelu, BiasGelu };
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transA = false, transB = false;
  int64_t strideA = 0, strideB = 0, strideD = 0;
  DType typeA = DType::f32, typeB = DType::f32, typeD = DType::f32;
  BufferRef a = -1, b = -1, d = -1;
  Epilogue epilogue = Epilogue::None;
  BufferRef bias = -1;  // Bias*: a vector of n elements of typeD, added along each row
};

struct Step {
  enum class Kind : uint8_t { Launch, Blas };
  Kind kind = Kind::Launch;
  cuda::Launch launch;  // Kind::Launch
  BlasMatmul blas;      // Kind::Blas
};

struct RenderedKernel {
  std::string name;                   // the description's name ("k3_matmul_add_relu")
  std::string code;                   // its entry points (no prelude), every entry prefixed by `name`
  std::vector<Step> steps;            // run in order on one stream
  std::vector<int64_t> scratchBytes;  // the scratch areas the steps use (BufferRef past the buffers)
  /// The generated GEMM's steps along K per block (its latency chain; 0 without a generated GEMM).
  int64_t gemmKSteps = 0;
};

/// Renders `k`. Throws kiln::Error naming the kernel and the construct it cannot render.
RenderedKernel renderKernel(const kernels::Kernel& k, const RenderOptions& options = {});

/// The CUDA C++ translation unit of a program: the prelude, then each kernel's code.
std::string programSource(const std::vector<RenderedKernel>& kernels);
/// The same for the kernels `which` (indices into `kernels`, in that order) alone.
std::string programSource(const std::vector<RenderedKernel>& kernels, const std::vector<size_t>& which);

/// The C++ type name of an element of `t` in device code ("float", "__half", "long long", …).
const char* deviceType(DType t);

}  // namespace kiln::cuda
