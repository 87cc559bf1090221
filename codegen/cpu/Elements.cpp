#include "codegen/cpu/Elements.h"

#include "ir/ScalarOps.h"
#include "support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>

namespace kiln::cpu {

llvm::Type* storageType(llvm::IRBuilderBase& b, DType t) {
  switch (t) {
    case DType::f32: return b.getFloatTy();
    case DType::f16:
    case DType::bf16: return b.getInt16Ty();
    case DType::f64: return b.getDoubleTy();
    case DType::i32: return b.getInt32Ty();
    case DType::i64: return b.getInt64Ty();
    case DType::boolean: return b.getInt8Ty();
  }
  KILN_ASSERT(false, "unknown dtype");
  return nullptr;
}

llvm::Type* computeType(llvm::IRBuilderBase& b, DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return b.getFloatTy();
    case DType::f64: return b.getDoubleTy();
    case DType::i32:
    case DType::i64: return b.getInt64Ty();
    case DType::boolean: return b.getInt1Ty();
  }
  KILN_ASSERT(false, "unknown dtype");
  return nullptr;
}

llvm::Type* withLanes(llvm::Type* scalar, int lanes) {
  return lanes > 1 ? llvm::FixedVectorType::get(scalar, static_cast<unsigned>(lanes)) : scalar;
}

int lanesOf(const llvm::Value* v) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) return static_cast<int>(vt->getNumElements());
  return 1;
}

llvm::Value* splat(llvm::IRBuilderBase& b, llvm::Value* v, int lanes) {
  if (lanes <= 1 || v->getType()->isVectorTy()) return v;
  return b.CreateVectorSplat(static_cast<unsigned>(lanes), v);
}

namespace {

/// An integer (or integer vector) of the same shape as `like` with element type `elem`.
llvm::Type* sameShape(llvm::Type* like, llvm::Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like)) return llvm::FixedVectorType::get(elem, vt->getNumElements());
  return elem;
}

llvm::Value* splatInt(llvm::IRBuilderBase& b, llvm::Type* type, uint64_t value) {
  return llvm::ConstantInt::get(type, value);  // splats for vector types
}

constexpr const char* kNativeBf16Flag = "kiln.bf16.vcvtneps2bf16";

/// Whether `v`, a vector, rounds to bf16 with vcvtneps2bf16 (setNativeBf16Rounding).
bool nativeBf16(llvm::IRBuilderBase& b, llvm::Value* v) {
  const llvm::BasicBlock* at = b.GetInsertBlock();
  return v->getType()->isVectorTy() && at && at->getModule() && at->getModule()->getModuleFlag(kNativeBf16Flag);
}

/// bf16 rounding of float bits: nearest even, overflow to inf, NaN kept quiet. Returns the float
/// bits with the low 16 cleared.
llvm::Value* bf16RoundBits(llvm::IRBuilderBase& b, llvm::Value* f) {
  llvm::Type* it = sameShape(f->getType(), b.getInt32Ty());
  llvm::Value* bits = b.CreateBitCast(f, it);
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(bits, splatInt(b, it, 16)), splatInt(b, it, 1));
  llvm::Value* rounded = b.CreateAdd(b.CreateAdd(bits, splatInt(b, it, 0x7FFF)), lsb);
  llvm::Value* quiet = b.CreateOr(bits, splatInt(b, it, 0x00400000));
  llvm::Value* isNan = b.CreateFCmpUNO(f, f);
  return b.CreateAnd(b.CreateSelect(isNan, quiet, rounded), splatInt(b, it, 0xFFFF0000u));
}

/// f64 → f32 rounded to odd (support/DType.h roundToOddF32): truncated toward zero, the last bit
/// set when inexact. Rounding the result to f16 or bf16 then equals rounding the f64 directly.
llvm::Value* roundToOdd(llvm::IRBuilderBase& b, llvm::Value* d) {
  llvm::Type* ft = sameShape(d->getType(), b.getFloatTy());
  llvm::Type* it = sameShape(d->getType(), b.getInt32Ty());
  llvm::Value* r = b.CreateFPTrunc(d, ft);
  llvm::Value* back = b.CreateFPExt(r, d->getType());
  llvm::Value* bits = b.CreateBitCast(r, it);
  // Nearest went away from zero: step one ulp back toward zero (the bit pattern's magnitude).
  llvm::Value* over = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                      b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  llvm::Value* truncated = b.CreateSelect(over, b.CreateSub(bits, splatInt(b, it, 1)), bits);
  llvm::Value* odd = b.CreateOr(truncated, splatInt(b, it, 1));
  llvm::Value* exact = b.CreateFCmpUEQ(back, d);  // NaN: unordered, kept as is
  return b.CreateBitCast(b.CreateSelect(exact, bits, odd), ft);
}

}  // namespace

void setNativeBf16Rounding(llvm::Module& m) { m.addModuleFlag(llvm::Module::Error, kNativeBf16Flag, 1); }

llvm::Value* fromStorage(llvm::IRBuilderBase& b, DType t, llvm::Value* stored) {
  llvm::Type* st = stored->getType();
  switch (t) {
    case DType::f16: return b.CreateFPExt(b.CreateBitCast(stored, sameShape(st, b.getHalfTy())), sameShape(st, b.getFloatTy()));
    case DType::bf16: {
      llvm::Type* it = sameShape(st, b.getInt32Ty());
      return b.CreateBitCast(b.CreateShl(b.CreateZExt(stored, it), splatInt(b, it, 16)), sameShape(st, b.getFloatTy()));
    }
    case DType::i32: return b.CreateSExt(stored, sameShape(st, b.getInt64Ty()));
    case DType::boolean: return b.CreateICmpNE(stored, llvm::Constant::getNullValue(st));
    default: return stored;
  }
}

llvm::Value* toStorage(llvm::IRBuilderBase& b, DType t, llvm::Value* v) {
  llvm::Type* vt = v->getType();
  switch (t) {
    case DType::f16: return b.CreateBitCast(b.CreateFPTrunc(v, sameShape(vt, b.getHalfTy())), sameShape(vt, b.getInt16Ty()));
    case DType::bf16: {
      // Already representable: the conversion is exact (and folds into roundTo's before it).
      if (nativeBf16(b, v)) return b.CreateBitCast(b.CreateFPTrunc(v, sameShape(vt, b.getBFloatTy())), sameShape(vt, b.getInt16Ty()));
      llvm::Type* it = sameShape(vt, b.getInt32Ty());
      llvm::Value* bits = b.CreateBitCast(v, it);  // the high half is exact
      return b.CreateTrunc(b.CreateLShr(bits, splatInt(b, it, 16)), sameShape(vt, b.getInt16Ty()));
    }
    case DType::i32: return b.CreateTrunc(v, sameShape(vt, b.getInt32Ty()));
    case DType::boolean: return b.CreateZExt(v, sameShape(vt, b.getInt8Ty()));
    default: return v;
  }
}

llvm::Value* roundTo(llvm::IRBuilderBase& b, DType t, llvm::Value* v) {
  llvm::Type* vt = v->getType();
  switch (t) {
    case DType::f16: return b.CreateFPExt(b.CreateFPTrunc(v, sameShape(vt, b.getHalfTy())), vt);
    case DType::bf16:
      if (nativeBf16(b, v)) return b.CreateFPExt(b.CreateFPTrunc(v, sameShape(vt, b.getBFloatTy())), vt);
      return b.CreateBitCast(bf16RoundBits(b, v), vt);
    case DType::i32: return b.CreateSExt(b.CreateTrunc(v, sameShape(vt, b.getInt32Ty())), vt);
    default: return v;
  }
}

llvm::Value* convert(llvm::IRBuilderBase& b, DType from, DType to, llvm::Value* v) {
  llvm::Type* vt = v->getType();
  llvm::Type* target = sameShape(vt, computeType(b, to));
  if (from == to) return v;
  if (to == DType::boolean) {
    if (isFloat(from)) return b.CreateFCmpUNE(v, llvm::Constant::getNullValue(vt));
    return b.CreateICmpNE(v, llvm::Constant::getNullValue(vt));
  }
  if (from == DType::boolean) {
    if (isFloat(to)) return b.CreateUIToFP(v, target);
    return b.CreateZExt(v, target);
  }
  const bool narrow16 = to == DType::f16 || to == DType::bf16;
  if (isFloat(from) && isFloat(to)) {
    if (from == DType::f64 && narrow16) return roundTo(b, to, roundToOdd(b, v));
    llvm::Value* r = vt == target ? v : b.CreateFPCast(v, target);
    return roundTo(b, to, r);
  }
  if (isFloat(from)) {  // saturating truncation, NaN → 0, at the target's width
    llvm::Type* narrow = sameShape(vt, to == DType::i32 ? b.getInt32Ty() : b.getInt64Ty());
    llvm::Value* r = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {narrow, vt}, {v});
    return to == DType::i32 ? b.CreateSExt(r, target) : r;
  }
  if (isFloat(to) && narrow16)  // exact in f64 up to 2^53, then rounded once
    return roundTo(b, to, roundToOdd(b, b.CreateSIToFP(v, sameShape(vt, b.getDoubleTy()))));
  if (isFloat(to)) return roundTo(b, to, b.CreateSIToFP(v, target));
  if (to == DType::i32) {  // i64 → i32 saturates (docs/IR.md), unlike an op result, which wraps
    llvm::Value* lo = llvm::ConstantInt::get(vt, static_cast<uint64_t>(int64_t{std::numeric_limits<int32_t>::min()}));
    llvm::Value* hi = llvm::ConstantInt::get(vt, static_cast<uint64_t>(int64_t{std::numeric_limits<int32_t>::max()}));
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, lo), hi);
  }
  return v;
}

llvm::Value* constant(llvm::IRBuilderBase& b, DType t, double value, int lanes) {
  llvm::Type* ct = withLanes(computeType(b, t), lanes);
  switch (t) {
    case DType::boolean: return llvm::ConstantInt::get(ct, value != 0 ? 1 : 0);
    case DType::i32:
    case DType::i64: return llvm::ConstantInt::get(ct, static_cast<uint64_t>(static_cast<int64_t>(kiln::roundTo(t, value))));
    default: return llvm::ConstantFP::get(ct, kiln::roundTo(t, value));
  }
}

}  // namespace kiln::cpu
