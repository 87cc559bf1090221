#include "codegen/cpu/HostTarget.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>

namespace kiln::cpu {

bool HostTarget::has(const std::string& feature) const {
  return std::binary_search(features.begin(), features.end(), feature);
}

int HostTarget::f32Lanes() const {
  if (has("avx512f")) return 16;
  if (has("avx2")) return 8;
  return 4;
}

HostTarget detectHostTarget() {
  HostTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.getValue()) t.features.push_back(f.getKey().str());
  std::sort(t.features.begin(), t.features.end());
  t.llvmVersion = LLVM_VERSION_STRING;
  return t;
}

}  // namespace kiln::cpu
