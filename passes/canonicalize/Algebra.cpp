// Algebraic identities that hold bit for bit in the interpreter's arithmetic: x*1, 1*x, x/1,
// x-0, x+(-0.0), neg(neg x), casts to the same type and cast chains whose first cast is exact.
//
// x+0.0 is deliberately not simplified for floats: it turns -0.0 into +0.0, which a later
// reciprocal or division can tell apart (integers have no -0, so x+0 goes there). x*0 is never
// simplified: NaN*0 and inf*0 are NaN.
#include "passes/canonicalize/Rewriter.h"

#include <cmath>

namespace kiln::passes::canon {

using ir::OpKind;
using ir::Value;

namespace {

// `x` standing for the whole result: the same value, or its broadcast when the other operand
// made the result bigger.
Value* asResult(Rewriter& rw, Value* x, const Candidate& c) {
  if (x->type == c.type) return x;
  return rw.build(OpKind::Broadcast, {x}, {{"shape", c.type.shape}});
}

// Whether adding constant `v` leaves every x unchanged: -0.0 for floats (-0.0 + -0.0 = -0.0 and
// +0.0 + -0.0 = +0.0), 0 for integers.
bool isAdditiveIdentity(const Value* v) {
  return isFloat(v->type.dtype) ? isConstantEqualTo(v, -0.0) : isConstantEqualTo(v, 0.0);
}

// Whether the values of `from` all convert to `to` exactly, so that a cast to `to` followed by a
// cast to anything equals the direct cast (every cast is a function of the value alone).
bool isExactCast(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  switch (from) {
    case DType::f16:
    case DType::bf16: return to == DType::f32 || to == DType::f64;
    case DType::f32: return to == DType::f64;
    case DType::i32: return to == DType::i64 || to == DType::f64;
    default: return false;
  }
}

}  // namespace

Value* simplifyArithmetic(Rewriter& rw, const Candidate& c) {
  if (c.op == OpKind::Neg) {
    const ir::Node* inner = producerOf(c.operands[0]);
    return inner != nullptr && inner->op == OpKind::Neg ? inner->operands[0] : nullptr;  // -(-x) = x, wrapping too
  }
  Value *a = c.operands[0], *b = c.operands[1];
  switch (c.op) {
    case OpKind::Mul:
      if (isConstantEqualTo(b, 1.0)) return asResult(rw, a, c);
      if (isConstantEqualTo(a, 1.0)) return asResult(rw, b, c);
      return nullptr;
    case OpKind::Div: return isConstantEqualTo(b, 1.0) ? asResult(rw, a, c) : nullptr;
    case OpKind::Sub: return isConstantEqualTo(b, 0.0) ? asResult(rw, a, c) : nullptr;  // x - (+0.0) = x
    case OpKind::Add:
      if (isAdditiveIdentity(b)) return asResult(rw, a, c);
      if (isAdditiveIdentity(a)) return asResult(rw, b, c);
      return nullptr;
    default: return nullptr;
  }
}

Value* simplifyCast(Rewriter& rw, const Candidate& c) {
  Value* x = c.operands[0];
  DType to = c.attrDType("dtype");
  if (x->type.dtype == to) return x;
  const ir::Node* inner = producerOf(x);
  if (inner == nullptr || inner->op != OpKind::Cast) return nullptr;
  Value* source = inner->operands[0];
  if (!isExactCast(source->type.dtype, x->type.dtype)) return nullptr;
  return rw.build(OpKind::Cast, {source}, {{"dtype", to}});
}

}  // namespace kiln::passes::canon
