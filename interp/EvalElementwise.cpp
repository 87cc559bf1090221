// Elementwise ops: the scalar function of each unary and binary op is one row of ir/ScalarOps.h
// (a float form computed in double, and an integer form computed in int64 where the op accepts
// integers or bools); one loop per arity applies a row with broadcasting. cast and select copy or
// convert elements and have their own evaluators.
#include "interp/Eval.h"
#include "ir/ScalarOps.h"

#include <cmath>
#include <limits>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

template <typename Row>
const Row& rowFor(const Row* row, OpKind op) {
  KILN_ASSERT(row != nullptr, "no scalar function for op '{}'", ir::opName(op));
  return *row;
}

HostTensor evalUnary(const ir::Node& node, Operands ops) {
  const ir::ScalarUnary& row = rowFor(ir::scalarUnary(node.op), node.op);
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  if (isFloat(x.dtype())) {
    KILN_ASSERT(row.onFloat, "op '{}' given a float operand", ir::opName(node.op));
    for (int64_t i = 0; i < out.numel(); ++i) out.set(i, row.onFloat(x.at(i)));
  } else {
    KILN_ASSERT(row.onInt, "op '{}' given a {} operand", ir::opName(node.op), dtypeName(x.dtype()));
    for (int64_t i = 0; i < out.numel(); ++i) storeInt(out, i, row.onInt(loadInt(x, i)));
  }
  return out;
}

// The operand type picks the arithmetic; the result may differ in type (comparisons give bool).
HostTensor evalBinary(const ir::Node& node, Operands ops) {
  const ir::ScalarBinary& row = rowFor(ir::scalarBinary(node.op), node.op);
  const HostTensor &a = *ops[0], &b = *ops[1];
  HostTensor out = makeResult(node);
  std::vector<int64_t> ia = broadcastIndices(a.shape(), out.shape());
  std::vector<int64_t> ib = broadcastIndices(b.shape(), out.shape());
  bool floatArith = isFloat(a.dtype());
  KILN_ASSERT(floatArith ? row.onFloat != nullptr : row.onInt != nullptr, "op '{}' given {} operands",
              ir::opName(node.op), dtypeName(a.dtype()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (floatArith) {
      double r = row.onFloat(a.at(ia[i]), b.at(ib[i]));
      if (isFloat(out.dtype())) out.set(i, r);
      else storeInt(out, i, r != 0);
    } else {
      storeInt(out, i, row.onInt(loadInt(a, ia[i]), loadInt(b, ib[i])));
    }
  }
  return out;
}

HostTensor evalSelect(const ir::Node& node, Operands ops) {
  const HostTensor &cond = *ops[0], &a = *ops[1], &b = *ops[2];
  HostTensor out = makeResult(node);
  std::vector<int64_t> ic = broadcastIndices(cond.shape(), out.shape());
  std::vector<int64_t> ia = broadcastIndices(a.shape(), out.shape());
  std::vector<int64_t> ib = broadcastIndices(b.shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (loadInt(cond, ic[i]) != 0) copyElement(a, ia[i], out, i);
    else copyElement(b, ib[i], out, i);
  }
  return out;
}

// Integer sources convert from the exact int64 value, so i64 beyond 2^53 rounds once: directly to
// f64 or f32, and to f16/bf16 through a round-to-odd f32 that the store then rounds exactly.
double intToFloat(int64_t v, DType to) {
  if (to == DType::f64) return static_cast<double>(v);
  if (to == DType::f32) return static_cast<double>(static_cast<float>(v));
  return static_cast<double>(roundToOddF32(v));
}

// Integer → integer narrowing saturates like float → integer (storeFromDouble's rule).
int64_t narrowInt(int64_t v, DType to) {
  if (to != DType::i32) return v;
  if (v > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
  if (v < std::numeric_limits<int32_t>::min()) return std::numeric_limits<int32_t>::min();
  return v;
}

HostTensor evalCast(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  DType from = x.dtype(), to = out.dtype();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (isFloat(from)) {
      out.set(i, x.at(i));  // storeFromDouble: rounding, saturation, NaN → 0, x != 0 for bool
    } else if (isFloat(to)) {
      out.set(i, intToFloat(loadInt(x, i), to));
    } else {
      storeInt(out, i, narrowInt(loadInt(x, i), to));
    }
  }
  return out;
}

}  // namespace

void addElementwiseEvaluators(EvalTable& t) {
  for (const ir::ScalarUnary& r : ir::scalarUnaryOps()) t.add(r.op, evalUnary);
  for (const ir::ScalarBinary& r : ir::scalarBinaryOps()) t.add(r.op, evalBinary);
  t.add(OpKind::Select, evalSelect);
  t.add(OpKind::Cast, evalCast);
}

}  // namespace kiln::interp::detail
