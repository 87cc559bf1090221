#include "codegen/cpu/VecMath.h"

#include "support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <initializer_list>
#include <limits>

namespace kiln::cpu {
namespace {

// Polynomial coefficients, highest degree first, fitted by scripts/fit_vecmath.py and rounded to
// f32. The comment on each says what it approximates and where.

// (e^r − 1 − r) / r² on r ∈ [−ln2/2, ln2/2].
constexpr std::initializer_list<double> kExpPoly = {
    1.9890980911441147e-4, 1.3933641603216529e-3, 8.33331048488617e-3,
    4.166646674275398e-2,  1.666666716337204e-1,  0.5};
// (log(1+m) − m + m²/2) / m³ on m ∈ [√½ − 1, √2 − 1].
constexpr std::initializer_list<double> kLogPoly = {
    6.971611827611923e-2, -1.1479733884334564e-1, 1.1685419827699661e-1,
    -1.2425687164068222e-1, 1.4249058067798615e-1, -1.666780263185501e-1,
    2.0000715553760529e-1, -2.499999701976776e-1, 3.333333134651184e-1};
// (tanh(x) − x) / x³ as a polynomial in z = x² on |x| < 0.625.
constexpr std::initializer_list<double> kTanhPoly = {
    2.292744815349579e-3,  -8.343945257365704e-3, 2.176891826093197e-2,
    -5.3959257900714874e-2, 1.3333304226398468e-1, -3.333333432674408e-1};
// (erf(x)/x − 2/√π) / x² as a polynomial in z = x² on |x| < 1; 2/√π itself is split in two f32s.
constexpr std::initializer_list<double> kErfSmallPoly = {
    8.3797553088516e-5,   -8.161986479535699e-4, 5.2045788615942e-3,
    -2.6861699298024178e-2, 1.128375381231308e-1, -3.7612637877464294e-1};
constexpr double kTwoOverSqrtPiHi = 1.128379225730896;
constexpr double kTwoOverSqrtPiLo = -5.8635382771399236e-8;
// e^(x²)·erfc(x) as a polynomial in x − 2 on x ∈ [1, 4], fitted with the weight e^(−x²) so that
// the error of erf = 1 − e^(−x²)·poly is smallest in absolute terms.
constexpr std::initializer_list<double> kErfcxPoly = {
    1.0278949775965884e-4, -2.0915850473102182e-4, 5.060503026470542e-4,
    -1.8478597048670053e-3, 5.4787565022706985e-3, -1.5445041470229626e-2,
    4.180046543478966e-2,  -1.0679782181978226e-1, 2.553956210613251e-1};

constexpr double kLog2e = 1.4426950408889634;
// ln 2 split so that n·kLn2Hi is exact for the |n| ≤ 150 that f32 exponents need.
constexpr double kLn2Hi = 0.693359375;
constexpr double kLn2Lo = -2.12194440e-4;
// Adding 1.5·2^23 to |v| < 2^22 rounds v to an integer held in the low mantissa bits.
constexpr double kRoundMagic = 12582912.0;

/// Builds lane-wise IR on values of one type (float or <N x float>).
class Emitter {
 public:
  Emitter(llvm::IRBuilderBase& b, llvm::Type* type)
      : b_(b), f_(type), i_(type->getWithNewType(b.getInt32Ty())) {}

  llvm::Value* c(double v) const { return llvm::ConstantFP::get(f_, v); }
  llvm::Value* ci(int v) const { return llvm::ConstantInt::get(i_, v, /*IsSigned=*/true); }
  llvm::Value* add(llvm::Value* x, llvm::Value* y) { return b_.CreateFAdd(x, y); }
  llvm::Value* sub(llvm::Value* x, llvm::Value* y) { return b_.CreateFSub(x, y); }
  llvm::Value* mul(llvm::Value* x, llvm::Value* y) { return b_.CreateFMul(x, y); }
  llvm::Value* div(llvm::Value* x, llvm::Value* y) { return b_.CreateFDiv(x, y); }
  /// x·y + z, fused where the target has FMA.
  llvm::Value* fma(llvm::Value* x, llvm::Value* y, llvm::Value* z) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {f_}, {x, y, z});
  }
  llvm::Value* abs(llvm::Value* x) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  llvm::Value* select(llvm::Value* cond, llvm::Value* x, llvm::Value* y) {
    return b_.CreateSelect(cond, x, y);
  }
  llvm::Value* lt(llvm::Value* x, double v) { return b_.CreateFCmpOLT(x, c(v)); }
  llvm::Value* gt(llvm::Value* x, double v) { return b_.CreateFCmpOGT(x, c(v)); }
  llvm::Value* bits(llvm::Value* x) { return b_.CreateBitCast(x, i_); }
  llvm::Value* fromBits(llvm::Value* x) { return b_.CreateBitCast(x, f_); }
  /// The sign of `sign` on the non-negative `magnitude`.
  llvm::Value* withSignOf(llvm::Value* magnitude, llvm::Value* sign) {
    llvm::Value* s = b_.CreateAnd(bits(sign), ci(std::numeric_limits<int>::min()));
    return fromBits(b_.CreateOr(bits(magnitude), s));
  }
  /// Horner's scheme, coefficients highest degree first.
  llvm::Value* poly(llvm::Value* x, std::initializer_list<double> coeffs) {
    llvm::Value* acc = c(*coeffs.begin());
    for (auto it = coeffs.begin() + 1; it != coeffs.end(); ++it) acc = fma(acc, x, c(*it));
    return acc;
  }

  llvm::Value* exp(llvm::Value* x);
  llvm::Value* log(llvm::Value* x);
  llvm::Value* tanh(llvm::Value* x);
  llvm::Value* sigmoid(llvm::Value* x);
  llvm::Value* erf(llvm::Value* x);

 private:
  llvm::IRBuilderBase& b_;
  llvm::Type* f_;  // float or <N x float>
  llvm::Type* i_;  // i32 of the same shape
};

/// e^x = 2^n · e^r with n = round(x·log2 e), r = x − n·ln 2 (Cody–Waite, two steps). 2^n is built
/// in the exponent bits as 2^⌊n/2⌋ · 2^(n−⌊n/2⌋), so both overflow (n = 128) and subnormal results
/// (n down to −150) use normal scale factors and the result is rounded once.
llvm::Value* Emitter::exp(llvm::Value* x) {
  constexpr double kOverflow = 88.72283172607421875;  // largest f32 below ln(FLT_MAX)
  constexpr double kUnderflow = -103.97208404541015625;  // ln(2^−150): rounds to 0 below
  llvm::Value* xc = select(gt(x, 88.8), c(88.8), x);
  xc = select(lt(xc, -104.0), c(-104.0), xc);
  llvm::Value* t = fma(xc, c(kLog2e), c(kRoundMagic));
  llvm::Value* n = sub(t, c(kRoundMagic));
  llvm::Value* ni = b_.CreateSub(bits(t), bits(c(kRoundMagic)));
  llvm::Value* r = fma(n, c(-kLn2Hi), xc);
  r = fma(n, c(-kLn2Lo), r);
  llvm::Value* p = add(fma(mul(r, r), poly(r, kExpPoly), r), c(1.0));
  llvm::Value* half = b_.CreateAShr(ni, ci(1));
  llvm::Value* s1 = fromBits(b_.CreateShl(b_.CreateAdd(half, ci(127)), ci(23)));
  llvm::Value* s2 = fromBits(b_.CreateShl(b_.CreateAdd(b_.CreateSub(ni, half), ci(127)), ci(23)));
  llvm::Value* y = mul(mul(p, s1), s2);
  y = select(gt(x, kOverflow), c(std::numeric_limits<double>::infinity()), y);
  return select(lt(x, kUnderflow), c(0.0), y);
}

/// log x = e·ln 2 + log(1 + m) with x = 2^e·(1 + m), m ∈ [√½ − 1, √2 − 1]; subnormal x are scaled
/// by 2^23 first. ln 2 is split as in exp so that e·ln 2 adds no rounding error.
llvm::Value* Emitter::log(llvm::Value* x) {
  constexpr double kMinNormal = 1.1754943508222875e-38;  // 2^−126
  llvm::Value* subnormal = lt(x, kMinNormal);
  llvm::Value* xs = select(subnormal, mul(x, c(8388608.0)), x);
  llvm::Value* xb = bits(xs);
  // The mantissa with the exponent of ½: f ∈ [½, 1), x = 2^(e+1)·f.
  llvm::Value* f = fromBits(b_.CreateOr(b_.CreateAnd(xb, ci(0x007fffff)), ci(0x3f000000)));
  llvm::Value* e = b_.CreateSub(b_.CreateLShr(xb, ci(23)), ci(126));
  e = b_.CreateSub(e, b_.CreateSelect(subnormal, ci(23), ci(0)));
  llvm::Value* small = lt(f, 0.70710678118654752);
  llvm::Value* ef = sub(b_.CreateSIToFP(e, f_), select(small, c(1.0), c(0.0)));
  llvm::Value* m = sub(select(small, add(f, f), f), c(1.0));  // exact
  llvm::Value* z = mul(m, m);
  llvm::Value* y = mul(mul(z, m), poly(m, kLogPoly));
  y = fma(ef, c(kLn2Lo), y);
  y = fma(z, c(-0.5), y);
  llvm::Value* result = fma(ef, c(kLn2Hi), add(m, y));
  const double inf = std::numeric_limits<double>::infinity();
  result = select(b_.CreateFCmpOEQ(x, c(inf)), c(inf), result);
  result = select(b_.CreateFCmpOEQ(x, c(0.0)), c(-inf), result);
  // Negative and NaN inputs (unordered or less than zero) give NaN.
  return select(b_.CreateFCmpULT(x, c(0.0)), c(std::numeric_limits<double>::quiet_NaN()), result);
}

/// On a = |x|: a < 0.625: a + a³·P(a²); otherwise 1 − 2/(e^(2a) + 1) (exp overflows to +inf for
/// large a, which gives exactly 1); then the sign of x, so that tanh(−0) = −0.
llvm::Value* Emitter::tanh(llvm::Value* x) {
  llvm::Value* a = abs(x);
  llvm::Value* z = mul(a, a);
  llvm::Value* small = fma(mul(a, z), poly(z, kTanhPoly), a);
  llvm::Value* e = exp(add(a, a));
  llvm::Value* large = sub(c(1.0), div(c(2.0), add(e, c(1.0))));
  return withSignOf(select(lt(a, 0.625), small, large), x);
}

/// With e = e^(−|x|) ≤ 1: 1/(1 + e) for x ≥ 0 and e/(1 + e) for x < 0, so neither side overflows
/// and tiny results keep exp's accuracy down into the subnormals.
llvm::Value* Emitter::sigmoid(llvm::Value* x) {
  llvm::Value* e = exp(b_.CreateFNeg(abs(x)));
  llvm::Value* numerator = select(b_.CreateFCmpOGE(x, c(0.0)), c(1.0), e);
  return div(numerator, add(c(1.0), e));
}

/// |x| < 1: x·(2/√π) + x·(x²·P(x²)), with 2/√π as hi + lo so that small x round correctly;
/// 1 ≤ |x| ≤ 4: 1 − e^(−x²)·Q(|x| − 2) with the sign of x; beyond 4 the result rounds to ±1
/// (|x| is clamped to 4).
llvm::Value* Emitter::erf(llvm::Value* x) {
  llvm::Value* z = mul(x, x);
  llvm::Value* tail = mul(x, fma(z, poly(z, kErfSmallPoly), c(kTwoOverSqrtPiLo)));
  llvm::Value* small = fma(x, c(kTwoOverSqrtPiHi), tail);
  llvm::Value* ax = abs(x);
  ax = select(gt(ax, 4.0), c(4.0), ax);
  llvm::Value* q = poly(sub(ax, c(2.0)), kErfcxPoly);
  llvm::Value* large = sub(c(1.0), mul(exp(b_.CreateFNeg(mul(ax, ax))), q));
  return select(lt(ax, 1.0), small, withSignOf(large, x));
}

}  // namespace

llvm::Value* emitMath(llvm::IRBuilderBase& b, MathFn fn, llvm::Value* x) {
  KILN_ASSERT(x->getType()->getScalarType()->isFloatTy(), "emitMath({}) wants f32 values",
              mathFnName(fn));
  llvm::IRBuilderBase::FastMathFlagGuard keepFlags(b);
  b.clearFastMathFlags();
  Emitter e(b, x->getType());
  switch (fn) {
    case MathFn::Exp: return e.exp(x);
    case MathFn::Log: return e.log(x);
    case MathFn::Tanh: return e.tanh(x);
    case MathFn::Sigmoid: return e.sigmoid(x);
    case MathFn::Erf: return e.erf(x);
  }
  KILN_ASSERT(false, "unknown MathFn {}", static_cast<int>(fn));
  return nullptr;
}

double maxUlpError(MathFn fn) {
  // Measured over all 2^32 f32 inputs (docs/ARCHITECTURE.md, "CPU JIT"), rounded up.
  switch (fn) {
    case MathFn::Exp: return 1.0;
    case MathFn::Log: return 1.0;
    case MathFn::Tanh: return 1.5;
    case MathFn::Sigmoid: return 2.5;
    case MathFn::Erf: return 2.5;
  }
  return 0;
}

const char* mathFnName(MathFn fn) {
  switch (fn) {
    case MathFn::Exp: return "exp";
    case MathFn::Log: return "log";
    case MathFn::Tanh: return "tanh";
    case MathFn::Sigmoid: return "sigmoid";
    case MathFn::Erf: return "erf";
  }
  return "?";
}

}  // namespace kiln::cpu
