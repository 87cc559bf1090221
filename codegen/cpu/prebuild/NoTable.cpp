// The table of kiln_gemm_prebuild itself, which makes the real one: no prebuilt routines.
#include "codegen/cpu/PrebuiltGemm.h"

namespace kiln::cpu {

std::span<const PrebuiltGemm> prebuiltGemmTable() { return {}; }

}  // namespace kiln::cpu
