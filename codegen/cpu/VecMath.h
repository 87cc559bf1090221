// Vectorized f32 math for generated kernels: exp, log, tanh, sigmoid and erf as inline LLVM IR on
// float or <N x float> values. Each is a range reduction plus a polynomial (coefficients fitted
// for f32, see scripts/fit_vecmath.py), built from arithmetic, compares, selects, integer bit
// operations and the llvm.fmuladd / llvm.fabs intrinsics — never a libm call, so the loop
// vectorizer and the explicit-vector renderer keep whole vectors in registers on every x86 level
// (SSE2 needs no rounding instruction: rounding uses the 1.5·2^23 trick).
//
// Special values follow IEEE/libm: NaN in, NaN out; exp(-inf) = 0, exp(+inf) = +inf, log(0) = -inf,
// log(x < 0) = NaN, tanh/erf(±inf) = ±1, sigmoid(-inf) = 0; subnormal inputs and results are
// handled (exp and sigmoid produce them, log accepts them). The emitted code ignores the
// builder's fast-math flags: the range reductions depend on exact rounding.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::cpu {

enum class MathFn { Exp, Log, Tanh, Sigmoid, Erf };

/// Emits `fn(x)` lane-wise at the builder's insertion point; `x` is float or a vector of float.
llvm::Value* emitMath(llvm::IRBuilderBase& b, MathFn fn, llvm::Value* x);

/// The documented bound on the emitted approximation's error, in units in the last place of the
/// f32 result (ulp(v) = 2^(exponent(v) − 23), 2^−149 for subnormals), against the exact value.
/// It holds with and without FMA; tests/codegen/VecMathTest.cpp checks it on ~10^6 points.
double maxUlpError(MathFn fn);

/// "exp", "log", "tanh", "sigmoid", "erf".
const char* mathFnName(MathFn fn);

}  // namespace kiln::cpu
