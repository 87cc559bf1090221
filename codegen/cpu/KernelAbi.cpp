#include "codegen/cpu/KernelAbi.h"

#include "codegen/cpu/Jit.h"
#include "runtime/Devices.h"
#include "support/PeakLoops.h"

#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Module.h>

#include <string>

namespace kiln::cpu {

namespace {
/// Whether the LLVM CPU `name` has a 48 KiB L1 data cache of 12 ways (Intel's cores since Ice Lake
/// and Zen 5); the rest of the x86 CPUs LLVM names have 32 KiB of 8 ways.
bool hasTwelveWayL1(const std::string& name) {
  static const char* const kTwelveWays[] = {
      "icelake-client", "icelake-server", "tigerlake",      "rocketlake",    "alderlake",     "raptorlake",
      "meteorlake",     "arrowlake",      "arrowlake-s",    "lunarlake",     "pantherlake",   "sapphirerapids",
      "emeraldrapids",  "graniterapids",  "graniterapids-d", "diamondrapids", "znver5"};
  for (const char* n : kTwelveWays)
    if (name == n) return true;
  return false;
}
}  // namespace

VectorIsa isaOf(const Jit& jit) {
  VectorIsa isa;
  isa.avx512 = jit.hasFeature("avx512f");
  isa.f32Lanes = isa.avx512 ? 16 : jit.hasFeature("avx2") ? 8 : 4;
  isa.fma = jit.hasFeature("fma");
  isa.f16c = jit.hasFeature("f16c");
  isa.avx512bf16 = jit.hasFeature("avx512bf16");
  // The host's tiles need the kernel's permission (asked once per process); code compiled for
  // another CPU is never run here.
  isa.amx = jit.hasFeature("amx-tile") && jit.hasFeature("amx-bf16") && (!jit.targetsHost() || amxTileDataPermitted());
  // The k-pair path always pays on the tiles (tdpbf16ps, not vdpbf16ps, multiplies there); without
  // them only where vdpbf16ps outruns the FMAs (timed on the host, assumed for a named CPU).
  isa.bf16DotPays = !isa.avx512bf16 || !jit.targetsHost() || isa.amx || bf16DotOutrunsFma();
  isa.emulateBf16Dot = jit.emulatesBf16Dot();
  isa.emulateAmx = jit.emulatesAmx();
  if (const rt::CacheGeometry l1 = rt::hostL1Data(); jit.targetsHost() && l1.known())
    isa.l1Sets = l1.sets, isa.l1Ways = l1.ways, isa.l1Line = l1.lineBytes;
  else if (!jit.targetsHost() && hasTwelveWayL1(jit.cpu()))
    isa.l1Ways = 12;
  return isa;
}

llvm::FunctionType* kernelFunctionType(llvm::LLVMContext& ctx) {
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  return llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr}, false);
}

llvm::Function* declareParallelFor(llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64, i64, ptr, ptr}, false);
  auto* f = llvm::cast<llvm::Function>(m.getOrInsertFunction("kiln_parallel_for", type).getCallee());
  f->setDoesNotThrow();
  return f;
}

}  // namespace kiln::cpu
