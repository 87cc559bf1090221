#include "codegen/cuda/Render.h"

#include "codegen/cuda/Prelude.h"
#include "codegen/cuda/RenderParts.h"
#include "support/Error.h"

namespace kiln::cuda {

RenderedKernel renderKernel(const kernels::Kernel& k, const RenderOptions& options) {
  if (k.op) return renderOpKernel(k, options);
  if (k.hasContraction) return renderContraction(k, options);
  return renderNestKernel(k, options);
}

std::string programSource(const std::vector<RenderedKernel>& kernels) {
  std::vector<size_t> all(kernels.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return programSource(kernels, all);
}

std::string programSource(const std::vector<RenderedKernel>& kernels, const std::vector<size_t>& which) {
  std::string source(preludeSource());
  for (size_t i : which) {
    source += "\n// ---- " + kernels.at(i).name + " ----\n";
    source += kernels.at(i).code;
  }
  return source;
}

const char* deviceType(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::f64: return "double";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::boolean: return "bool";
  }
  KILN_ASSERT(false, "unknown dtype");
  return "";
}

}  // namespace kiln::cuda
