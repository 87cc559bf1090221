#include "codegen/cpu/ElementwiseIR.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/VecMath.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <limits>

namespace kiln::cpu {
namespace {

using ir::OpKind;

struct Emitter {
  llvm::IRBuilderBase& b;
  llvm::Module& m;

  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) { return b.CreateIntrinsic(id, {x->getType()}, {x}); }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y) {
    return b.CreateIntrinsic(id, {x->getType()}, {x, y});
  }

  /// f64 functions without an LLVM intrinsic: the libm function, lane by lane.
  llvm::Value* libm(const char* name, llvm::Value* x) {
    llvm::FunctionCallee f = m.getOrInsertFunction(name, b.getDoubleTy(), b.getDoubleTy());
    if (!x->getType()->isVectorTy()) return b.CreateCall(f, {x});
    llvm::Value* r = llvm::PoisonValue::get(x->getType());
    for (int l = 0; l < lanesOf(x); ++l)
      r = b.CreateInsertElement(r, b.CreateCall(f, {b.CreateExtractElement(x, static_cast<uint64_t>(l))}),
                                 static_cast<uint64_t>(l));
    return r;
  }

  llvm::Value* fconst(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }

  llvm::Value* transcendental(MathFn fn, llvm::Value* x) {
    if (x->getType()->getScalarType()->isFloatTy()) return emitMath(b, fn, x);
    switch (fn) {  // f64: libm through intrinsics where LLVM has them
      case MathFn::Exp: return intrinsic(llvm::Intrinsic::exp, x);
      case MathFn::Log: return intrinsic(llvm::Intrinsic::log, x);
      case MathFn::Tanh: return libm("tanh", x);
      case MathFn::Erf: return libm("erf", x);
      case MathFn::Sigmoid: {  // as ir/ScalarOps.cpp: only ever exponentiate -|x|
        llvm::Value* e = intrinsic(llvm::Intrinsic::exp, b.CreateFNeg(intrinsic(llvm::Intrinsic::fabs, x)));
        llvm::Value* one = fconst(x, 1.0);
        llvm::Value* denom = b.CreateFAdd(one, e);
        return b.CreateSelect(b.CreateFCmpOGE(x, fconst(x, 0.0)), b.CreateFDiv(one, denom), b.CreateFDiv(e, denom));
      }
    }
    return nullptr;
  }

  llvm::Value* apply(OpKind op, DType argType, DType result, const std::vector<llvm::Value*>& a) {
    bool fl = isFloat(argType);
    llvm::Value* r = nullptr;
    switch (op) {
      case OpKind::Neg: r = fl ? b.CreateFNeg(a[0]) : b.CreateNeg(a[0]); break;
      case OpKind::Abs: r = fl ? intrinsic(llvm::Intrinsic::fabs, a[0]) : b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a[0], b.getFalse()); break;
      case OpKind::Exp: r = transcendental(MathFn::Exp, a[0]); break;
      case OpKind::Log: r = transcendental(MathFn::Log, a[0]); break;
      case OpKind::Tanh: r = transcendental(MathFn::Tanh, a[0]); break;
      case OpKind::Sigmoid: r = transcendental(MathFn::Sigmoid, a[0]); break;
      case OpKind::Erf: r = transcendental(MathFn::Erf, a[0]); break;
      case OpKind::Sqrt: r = intrinsic(llvm::Intrinsic::sqrt, a[0]); break;
      case OpKind::Rsqrt: r = b.CreateFDiv(fconst(a[0], 1.0), intrinsic(llvm::Intrinsic::sqrt, a[0])); break;
      case OpKind::Reciprocal: r = b.CreateFDiv(fconst(a[0], 1.0), a[0]); break;
      case OpKind::Sin: r = intrinsic(llvm::Intrinsic::sin, a[0]); break;
      case OpKind::Cos: r = intrinsic(llvm::Intrinsic::cos, a[0]); break;
      case OpKind::Floor: r = intrinsic(llvm::Intrinsic::floor, a[0]); break;
      case OpKind::Relu:
        // x > 0 or NaN keeps x; -0.0 becomes +0.0.
        r = fl ? b.CreateSelect(b.CreateFCmpUGT(a[0], fconst(a[0], 0.0)), a[0], fconst(a[0], 0.0))
               : intrinsic(llvm::Intrinsic::smax, a[0], llvm::Constant::getNullValue(a[0]->getType()));
        break;
      case OpKind::Not: r = b.CreateNot(a[0]); break;
      case OpKind::Cast: return convert(b, argType, result, a[0]);
      case OpKind::Add: r = fl ? b.CreateFAdd(a[0], a[1]) : b.CreateAdd(a[0], a[1]); break;
      case OpKind::Sub: r = fl ? b.CreateFSub(a[0], a[1]) : b.CreateSub(a[0], a[1]); break;
      case OpKind::Mul: r = fl ? b.CreateFMul(a[0], a[1]) : b.CreateMul(a[0], a[1]); break;
      case OpKind::Div:
        if (fl) {
          r = b.CreateFDiv(a[0], a[1]);
        } else {  // x / 0 = 0; x / -1 wraps; the divisor fed to sdiv is never 0 or -1
          llvm::Type* t = a[1]->getType();
          llvm::Value* zero = b.CreateICmpEQ(a[1], llvm::ConstantInt::get(t, 0));
          llvm::Value* minusOne = b.CreateICmpEQ(a[1], llvm::ConstantInt::getSigned(t, -1));
          llvm::Value* safe = b.CreateSelect(b.CreateOr(zero, minusOne), llvm::ConstantInt::get(t, 1), a[1]);
          r = b.CreateSelect(zero, llvm::ConstantInt::get(t, 0),
                              b.CreateSelect(minusOne, b.CreateNeg(a[0]), b.CreateSDiv(a[0], safe)));
        }
        break;
      case OpKind::Pow: r = intrinsic(llvm::Intrinsic::pow, a[0], a[1]); break;
      case OpKind::Max:
      case OpKind::Min: {
        bool max = op == OpKind::Max;
        if (!fl) {
          r = intrinsic(max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, a[0], a[1]);
          break;
        }
        llvm::Value* pick = max ? b.CreateFCmpOGT(a[0], a[1]) : b.CreateFCmpOLT(a[0], a[1]);
        r = b.CreateSelect(pick, a[0], a[1]);
        r = b.CreateSelect(b.CreateFCmpUNO(a[0], a[1]), fconst(a[0], std::numeric_limits<double>::quiet_NaN()), r);
        break;
      }
      case OpKind::And: r = b.CreateAnd(a[0], a[1]); break;
      case OpKind::Or: r = b.CreateOr(a[0], a[1]); break;
      case OpKind::Eq: r = fl ? b.CreateFCmpOEQ(a[0], a[1]) : b.CreateICmpEQ(a[0], a[1]); break;
      case OpKind::Ne: r = fl ? b.CreateFCmpUNE(a[0], a[1]) : b.CreateICmpNE(a[0], a[1]); break;
      case OpKind::Lt:
        r = fl ? b.CreateFCmpOLT(a[0], a[1]) : argType == DType::boolean ? b.CreateICmpULT(a[0], a[1]) : b.CreateICmpSLT(a[0], a[1]);
        break;
      case OpKind::Le:
        r = fl ? b.CreateFCmpOLE(a[0], a[1]) : argType == DType::boolean ? b.CreateICmpULE(a[0], a[1]) : b.CreateICmpSLE(a[0], a[1]);
        break;
      case OpKind::Gt:
        r = fl ? b.CreateFCmpOGT(a[0], a[1]) : argType == DType::boolean ? b.CreateICmpUGT(a[0], a[1]) : b.CreateICmpSGT(a[0], a[1]);
        break;
      case OpKind::Ge:
        r = fl ? b.CreateFCmpOGE(a[0], a[1]) : argType == DType::boolean ? b.CreateICmpUGE(a[0], a[1]) : b.CreateICmpSGE(a[0], a[1]);
        break;
      case OpKind::Select: r = b.CreateSelect(a[0], a[1], a[2]); break;
      default:
        return nullptr;
    }
    return roundTo(b, result, r);
  }
};

}  // namespace

llvm::Value* emitElementwise(llvm::IRBuilderBase& b, llvm::Module& m, ir::OpKind op, DType argType, DType result,
                             const std::vector<llvm::Value*>& args) {
  return Emitter{b, m}.apply(op, argType, result, args);
}

}  // namespace kiln::cpu
