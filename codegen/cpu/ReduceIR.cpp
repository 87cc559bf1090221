#include "codegen/cpu/ReduceIR.h"

#include "codegen/cpu/Elements.h"
#include "support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <limits>
#include <vector>

namespace kiln::cpu {

using ir::OpKind;

llvm::Value* reductionIdentity(llvm::IRBuilderBase& b, OpKind op, DType acc, int lanes) {
  const double inf = std::numeric_limits<double>::infinity();
  if (op == OpKind::ReduceSum) return constant(b, acc, 0, lanes);
  if (isFloat(acc)) return constant(b, acc, op == OpKind::ReduceMax ? -inf : inf, lanes);
  llvm::Type* it = withLanes(b.getInt64Ty(), lanes);
  return op == OpKind::ReduceMax ? llvm::ConstantInt::get(it, static_cast<uint64_t>(std::numeric_limits<int64_t>::min()))
                                 : llvm::ConstantInt::get(it, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

llvm::Value* reductionCombine(llvm::IRBuilderBase& b, OpKind op, DType acc, llvm::Value* a, llvm::Value* x) {
  const bool fl = isFloat(acc);
  switch (op) {
    case OpKind::ReduceSum: return fl ? b.CreateFAdd(a, x) : b.CreateAdd(a, x);
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: {
      const bool max = op == OpKind::ReduceMax;
      if (!fl) return b.CreateIntrinsic(max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, {a->getType()}, {a, x});
      llvm::Value* pick = max ? b.CreateFCmpOGT(x, a) : b.CreateFCmpOLT(x, a);
      llvm::Value* r = b.CreateSelect(pick, x, a);
      return b.CreateSelect(b.CreateFCmpUNO(x, a), llvm::ConstantFP::get(a->getType(), std::numeric_limits<double>::quiet_NaN()), r);
    }
    default: KILN_THROW("unknown reduction '{}'", ir::opName(op));
  }
}

llvm::Value* reductionHorizontal(llvm::IRBuilderBase& b, OpKind op, DType acc, llvm::Value* v) {
  if (!v->getType()->isVectorTy()) return v;
  const bool fl = isFloat(acc);
  if (op == OpKind::ReduceSum) {
    if (!fl) return b.CreateAddReduce(v);
    llvm::IRBuilderBase::FastMathFlagGuard guard(b);
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();
    b.setFastMathFlags(fmf);
    return b.CreateFAddReduce(llvm::ConstantFP::get(v->getType()->getScalarType(), -0.0), v);
  }
  const bool max = op == OpKind::ReduceMax;
  if (!fl) return max ? b.CreateIntMaxReduce(v, true) : b.CreateIntMinReduce(v, true);
  // Halves combined as the loop combines (NaN sticky, the lower half kept on ties): a tree of
  // shuffles and selects. llvm.vector.reduce.fmaximum orders -0 below +0 lane by lane through
  // scalar sign tests, a serial chain that made a softmax over rows of 32 latency-bound (49 → 35 µs
  // for the transformer's attention scores, [32,2,32,32], alone).
  auto* type = llvm::cast<llvm::FixedVectorType>(v->getType());
  if (!llvm::isPowerOf2_32(type->getNumElements())) return max ? b.CreateFPMaximumReduce(v) : b.CreateFPMinimumReduce(v);
  for (unsigned n = type->getNumElements(); n > 1; n /= 2) {
    std::vector<int> lo(n / 2), hi(n / 2);
    for (unsigned i = 0; i < n / 2; ++i) lo[i] = static_cast<int>(i), hi[i] = static_cast<int>(i + n / 2);
    v = reductionCombine(b, op, acc, b.CreateShuffleVector(v, lo), b.CreateShuffleVector(v, hi));
  }
  return b.CreateExtractElement(v, uint64_t{0});
}

}  // namespace kiln::cpu
