// Elementwise ops: the scalar function of each unary and binary op is one row of a small table
// (a float form computed in double, and an integer form computed in int64 where the op accepts
// integers or bools); one loop per arity applies a row with broadcasting. cast and select copy or
// convert elements and have their own evaluators.
#include "interp/Eval.h"

#include <cmath>
#include <limits>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct UnaryRow {
  OpKind op;
  double (*onFloat)(double);
  int64_t (*onInt)(int64_t);  // nullptr: float operands only
};

struct BinaryRow {
  OpKind op;
  double (*onFloat)(double, double);
  int64_t (*onInt)(int64_t, int64_t);  // nullptr: float operands only
};

double sigmoid(double x) {
  // Only ever exponentiate a non-positive number, so neither branch overflows.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

int64_t intDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrapSub(0, a);  // INT64_MIN / -1 overflows in C++; it wraps here
  return a / b;                       // C++ truncates toward zero
}

const UnaryRow kUnaryRows[] = {
    {OpKind::Neg, [](double x) { return -x; }, [](int64_t x) { return wrapSub(0, x); }},
    {OpKind::Abs, [](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? wrapSub(0, x) : x; }},
    {OpKind::Exp, [](double x) { return std::exp(x); }, nullptr},
    {OpKind::Log, [](double x) { return std::log(x); }, nullptr},
    {OpKind::Sqrt, [](double x) { return std::sqrt(x); }, nullptr},
    {OpKind::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, nullptr},
    {OpKind::Reciprocal, [](double x) { return 1.0 / x; }, nullptr},
    {OpKind::Tanh, [](double x) { return std::tanh(x); }, nullptr},
    {OpKind::Sigmoid, sigmoid, nullptr},
    {OpKind::Sin, [](double x) { return std::sin(x); }, nullptr},
    {OpKind::Cos, [](double x) { return std::cos(x); }, nullptr},
    {OpKind::Erf, [](double x) { return std::erf(x); }, nullptr},
    // x > 0 is false for NaN and -0.0: NaN passes through, -0.0 becomes +0.0.
    {OpKind::Relu, [](double x) { return x > 0 || std::isnan(x) ? x : 0.0; },
     [](int64_t x) { return x > 0 ? x : int64_t{0}; }},
    {OpKind::Floor, [](double x) { return std::floor(x); }, nullptr},
    {OpKind::Not, nullptr, [](int64_t x) { return int64_t{x == 0}; }},
};

const BinaryRow kBinaryRows[] = {
    {OpKind::Add, [](double a, double b) { return a + b; }, wrapAdd},
    {OpKind::Sub, [](double a, double b) { return a - b; }, wrapSub},
    {OpKind::Mul, [](double a, double b) { return a * b; }, wrapMul},
    {OpKind::Div, [](double a, double b) { return a / b; }, intDiv},
    {OpKind::Pow, [](double a, double b) { return std::pow(a, b); }, nullptr},
    {OpKind::Max, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : (a > b ? a : b); },
     [](int64_t a, int64_t b) { return a > b ? a : b; }},
    {OpKind::Min, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? a : b); },
     [](int64_t a, int64_t b) { return a < b ? a : b; }},
    {OpKind::And, nullptr, [](int64_t a, int64_t b) { return int64_t{a != 0 && b != 0}; }},
    {OpKind::Or, nullptr, [](int64_t a, int64_t b) { return int64_t{a != 0 || b != 0}; }},
    // IEEE comparisons already give the documented NaN results (only != is true with a NaN).
    {OpKind::Eq, [](double a, double b) { return a == b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a == b}; }},
    {OpKind::Ne, [](double a, double b) { return a != b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a != b}; }},
    {OpKind::Lt, [](double a, double b) { return a < b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a < b}; }},
    {OpKind::Le, [](double a, double b) { return a <= b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a <= b}; }},
    {OpKind::Gt, [](double a, double b) { return a > b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a > b}; }},
    {OpKind::Ge, [](double a, double b) { return a >= b ? 1.0 : 0.0; },
     [](int64_t a, int64_t b) { return int64_t{a >= b}; }},
};

template <typename Row, size_t N>
const Row& rowFor(const Row (&rows)[N], OpKind op) {
  for (const Row& r : rows)
    if (r.op == op) return r;
  KILN_ASSERT(false, "no scalar function for op '{}'", ir::opName(op));
  return rows[0];
}

HostTensor evalUnary(const ir::Node& node, Operands ops) {
  const UnaryRow& row = rowFor(kUnaryRows, node.op);
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
  const BinaryRow& row = rowFor(kBinaryRows, node.op);
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
  for (const UnaryRow& r : kUnaryRows) t.add(r.op, evalUnary);
  for (const BinaryRow& r : kBinaryRows) t.add(r.op, evalBinary);
  t.add(OpKind::Select, evalSelect);
  t.add(OpKind::Cast, evalCast);
}

}  // namespace kiln::interp::detail
