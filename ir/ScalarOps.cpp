#include "ir/ScalarOps.h"

#include <cmath>
#include <limits>

namespace kiln::ir {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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

const ScalarUnary kUnaryRows[] = {
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

const ScalarBinary kBinaryRows[] = {
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

}  // namespace

const ScalarUnary* scalarUnary(OpKind op) {
  for (const ScalarUnary& r : kUnaryRows)
    if (r.op == op) return &r;
  return nullptr;
}

const ScalarBinary* scalarBinary(OpKind op) {
  for (const ScalarBinary& r : kBinaryRows)
    if (r.op == op) return &r;
  return nullptr;
}

std::span<const ScalarUnary> scalarUnaryOps() { return kUnaryRows; }
std::span<const ScalarBinary> scalarBinaryOps() { return kBinaryRows; }

}  // namespace kiln::ir
