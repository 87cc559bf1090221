#include "codegen/cpu/PhiloxIR.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/VecMath.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>


namespace kiln::cpu {

llvm::Value* emitPhiloxDraw(llvm::IRBuilderBase& b, uint64_t seed, llvm::Value* counter, llvm::Value* step,
                            bool normal) {
  // Each 32-bit word lives in the low half of a 64-bit lane, so a round's 32×32→64 multiplies are
  // plain 64-bit multiplies of zero-extended values (vpmuludq) and no lane is repacked.
  int lanes = lanesOf(counter);
  llvm::Type* i64 = withLanes(b.getInt64Ty(), lanes);
  llvm::Type* f32 = withLanes(b.getFloatTy(), lanes);
  auto c = [&](uint64_t v) { return llvm::ConstantInt::get(i64, v); };
  auto lo = [&](llvm::Value* v) { return b.CreateAnd(v, c(0xFFFFFFFFu)); };
  auto hi = [&](llvm::Value* v) { return b.CreateLShr(v, c(32)); };
  step = splat(b, step, lanes);
  llvm::Value* c0 = lo(counter);
  llvm::Value* c1 = hi(counter);
  llvm::Value* c2 = lo(step);
  llvm::Value* c3 = hi(step);
  auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    llvm::Value* p0 = b.CreateMul(c0, c(0xD2511F53u), "", /*HasNUW=*/true);
    llvm::Value* p1 = b.CreateMul(c2, c(0xCD9E8D57u), "", /*HasNUW=*/true);
    llvm::Value* n0 = b.CreateXor(b.CreateXor(hi(p1), c1), c(k0));
    llvm::Value* n2 = b.CreateXor(b.CreateXor(hi(p0), c3), c(k1));
    c1 = lo(p1);
    c3 = lo(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // The top 24 bits (plus `bias`) scaled by 2^-24: exact in f32 (and below 2^31, so a signed
  // conversion is the unsigned one).
  auto unit = [&](llvm::Value* bits, uint64_t bias) {
    llvm::Value* top = b.CreateTrunc(b.CreateLShr(bits, c(8)), withLanes(b.getInt32Ty(), lanes));
    if (bias) top = b.CreateAdd(top, llvm::ConstantInt::get(top->getType(), bias));
    return b.CreateFMul(b.CreateSIToFP(top, f32), llvm::ConstantFP::get(f32, 1.0 / 16777216.0));
  };
  if (!normal) return unit(c0, 0);
  // Box-Muller in f32 with the interpreter's operation order: sqrt(-2·log u1)·cos(2π·u2).
  llvm::Value* u1 = unit(c0, 1);
  llvm::Value* u2 = unit(c1, 0);
  llvm::Value* radius = b.CreateUnaryIntrinsic(
      llvm::Intrinsic::sqrt, b.CreateFMul(llvm::ConstantFP::get(f32, -2.0), emitMath(b, MathFn::Log, u1)));
  llvm::Value* angle = b.CreateFMul(llvm::ConstantFP::get(f32, static_cast<double>(6.283185307179586f)), u2);
  return b.CreateFMul(radius, b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, angle));
}

}  // namespace kiln::cpu
