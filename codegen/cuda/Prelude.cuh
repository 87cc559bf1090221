// The kiln CUDA prelude: one device function per elementwise primitive of ir/Ops.def, named
// kiln_<op name> and overloaded on the compute types (float for f32/f16/bf16, double for f64,
// long long for i32/i64, bool), plus the conversions between dtypes, loads and stores of every
// storage type, and the Philox generator of support/Philox.h. Generated kernels (ExprEmitter.h)
// call these by name, so no renderer holds a per-op switch.
//
// Semantics are the interpreter's (ir/ScalarOps.cpp, interp/EvalElementwise.cpp):
//   - f16/bf16 values are computed in f32 and rounded to their type after every op (the caller
//     wraps an op in kiln_round_f16 / kiln_round_bf16); computing in f32 and rounding once gives
//     the correctly rounded f16/bf16 result of +, -, *, / and sqrt (f32 has more than twice their
//     precision plus two bits, so the double rounding is innocuous).
//   - +, -, *, / and sqrt are the IEEE round-to-nearest operations, written with the __f*_rn /
//     __d*_rn intrinsics so no -fmad contraction can fuse a multiply into an add (the interpreter
//     rounds every product). Denormals are kept: never compile with -ftz=true or
//     --use_fast_math.
//   - Transcendentals are CUDA's full-precision library functions. Maximum errors from the CUDA
//     C++ Programming Guide (Mathematical Functions appendix; measured bounds, "extensive but not
//     exhaustive tests"), relative to the correctly rounded result that the interpreter's f64
//     evaluation rounds to: f32 expf 2 ulp, logf 1, sinf/cosf 2, tanhf 2, erff 2, powf 4;
//     f64 exp 1, log 1, sin/cos 2, tanh 1, erf 2, pow 2; sqrt, division, floor exact. rsqrt and
//     reciprocal are 1/sqrt(x) and 1/x with two (one) correctly rounded operations, never rsqrtf.
//     sigmoid is 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) otherwise, so nothing overflows.
//   - Integers compute in wrapping 64-bit arithmetic; kiln_round_i32 re-wraps i32 results;
//     integer x/0 = 0 and INT_MIN/-1 wraps.
//   - max/min return NaN when either operand is NaN, else `a > b ? a : b` (so max(-0, +0) = +0 and
//     max(+0, -0) = -0, as the interpreter); relu(NaN) = NaN, relu(-0) = +0.
//   - Casts (kiln_cast_<to>) follow the `cast` op: float→float rounds to nearest even, f64 and i64
//     reach f16/bf16 through a round-to-odd f32 (one rounding, as support/DType.h); float→int
//     truncates and saturates, NaN → 0; i64→i32 saturates; →bool is x != 0; bool→x is 0/1.
//   - NaN results of max/min are the canonical quiet NaN; f16/bf16 NaNs stored by the hardware
//     conversions are canonical NaNs too (the interpreter keeps a NaN's sign and payload). Only the
//     bits of a NaN differ; it is a NaN either way.
//
// This file also compiles as host C++ (without CUDA headers): every CUDA-only intrinsic has a host
// fallback with the same result, so tests/codegen/CudaRenderTest.cpp checks every function here
// against the interpreter's scalar semantics on the host, in every CI run.
#ifndef KILN_CUDA_PRELUDE_CUH
#define KILN_CUDA_PRELUDE_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_DEVICE_CODE 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define KILN_FN __device__ __forceinline__
#else
#include <math.h>
#include <string.h>
#define KILN_FN inline
// Host stand-ins for the CUDA storage types of f16 and bf16: their bits.
struct __half {
  unsigned short x;
};
struct __nv_bfloat16 {
  unsigned short x;
};
#endif

// ---- bits -------------------------------------------------------------------------------------

KILN_FN float kiln_f32_bits(unsigned int u) {
#ifdef KILN_DEVICE_CODE
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
KILN_FN unsigned int kiln_bits_f32(float f) {
#ifdef KILN_DEVICE_CODE
  return __float_as_uint(f);
#else
  unsigned int u;
  memcpy(&u, &f, 4);
  return u;
#endif
}
KILN_FN double kiln_f64_bits(unsigned long long u) {
#ifdef KILN_DEVICE_CODE
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  memcpy(&d, &u, 8);
  return d;
#endif
}

KILN_FN float kiln_nanf() { return kiln_f32_bits(0x7fc00000u); }
KILN_FN double kiln_nan() { return kiln_f64_bits(0x7ff8000000000000ull); }

// ---- IEEE arithmetic, never contracted into fma -----------------------------------------------

#ifdef KILN_DEVICE_CODE
#define KILN_FADD(a, b) __fadd_rn(a, b)
#define KILN_FSUB(a, b) __fsub_rn(a, b)
#define KILN_FMUL(a, b) __fmul_rn(a, b)
#define KILN_FDIV(a, b) __fdiv_rn(a, b)
#define KILN_FSQRT(a) __fsqrt_rn(a)
#define KILN_DADD(a, b) __dadd_rn(a, b)
#define KILN_DSUB(a, b) __dsub_rn(a, b)
#define KILN_DMUL(a, b) __dmul_rn(a, b)
#define KILN_DDIV(a, b) __ddiv_rn(a, b)
#define KILN_DSQRT(a) __dsqrt_rn(a)
#else
#define KILN_FADD(a, b) ((a) + (b))
#define KILN_FSUB(a, b) ((a) - (b))
#define KILN_FMUL(a, b) ((a) * (b))
#define KILN_FDIV(a, b) ((a) / (b))
#define KILN_FSQRT(a) sqrtf(a)
#define KILN_DADD(a, b) ((a) + (b))
#define KILN_DSUB(a, b) ((a) - (b))
#define KILN_DMUL(a, b) ((a) * (b))
#define KILN_DDIV(a, b) ((a) / (b))
#define KILN_DSQRT(a) sqrt(a)
#endif

// ---- f16 / bf16 rounding and storage ----------------------------------------------------------

#ifndef KILN_DEVICE_CODE
// Software conversions with support/DType.cpp's rounding (nearest even, overflow to inf, NaN kept,
// f16 subnormals kept), standing in for the hardware conversions on the host.
inline unsigned short kiln_host_f32_to_f16(float f) {
  unsigned int x = kiln_bits_f32(f);
  unsigned int sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<unsigned short>(sign | 0x7e00u);
  if (absx >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);
  if (absx < 0x38800000u) {
    float scaled = kiln_f32_bits(absx) * 16777216.0f;  // exact: one f16 subnormal ulp is 2^-24
    return static_cast<unsigned short>(sign | static_cast<unsigned int>(nearbyintf(scaled)));
  }
  unsigned int h = ((((absx >> 23) - 127u + 15u)) << 10) | ((absx & 0x7fffffu) >> 13);
  unsigned int rest = absx & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<unsigned short>(sign | h);
}
inline float kiln_host_f16_to_f32(unsigned short h) {
  unsigned int sign = (static_cast<unsigned int>(h) & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return kiln_f32_bits(sign | 0x7f800000u | (mant << 13));
  return kiln_f32_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}
inline unsigned short kiln_host_f32_to_bf16(float f) {
  unsigned int x = kiln_bits_f32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<unsigned short>(x >> 16);
}
#endif

/// x rounded to the nearest f16 / bf16 value (ties to even), as a float.
KILN_FN float kiln_round_f16(float x) {
#ifdef KILN_DEVICE_CODE
  return __half2float(__float2half_rn(x));
#else
  return kiln_host_f16_to_f32(kiln_host_f32_to_f16(x));
#endif
}
KILN_FN float kiln_round_bf16(float x) {
#ifdef KILN_DEVICE_CODE
  return __bfloat162float(__float2bfloat16_rn(x));
#else
  return kiln_f32_bits(static_cast<unsigned int>(kiln_host_f32_to_bf16(x)) << 16);
#endif
}
/// An i64 value wrapped to i32 (two's complement), as the interpreter stores i32 results.
KILN_FN long long kiln_round_i32(long long x) {
  return static_cast<long long>(static_cast<int>(static_cast<unsigned int>(static_cast<unsigned long long>(x))));
}

/// Loads: a storage element as its compute type (exact).
KILN_FN float kiln_ld(float x) { return x; }
KILN_FN double kiln_ld(double x) { return x; }
KILN_FN long long kiln_ld(int x) { return x; }
KILN_FN long long kiln_ld(long long x) { return x; }
KILN_FN bool kiln_ld(bool x) { return x; }
KILN_FN float kiln_ld(__half x) {
#ifdef KILN_DEVICE_CODE
  return __half2float(x);
#else
  return kiln_host_f16_to_f32(x.x);
#endif
}
KILN_FN float kiln_ld(__nv_bfloat16 x) {
#ifdef KILN_DEVICE_CODE
  return __bfloat162float(x);
#else
  return kiln_f32_bits(static_cast<unsigned int>(x.x) << 16);
#endif
}

/// Stores: a compute value already representable in the storage type (rounded by the op that made
/// it) written to `p`.
KILN_FN void kiln_st(float* p, float v) { *p = v; }
KILN_FN void kiln_st(double* p, double v) { *p = v; }
KILN_FN void kiln_st(int* p, long long v) { *p = static_cast<int>(v); }
KILN_FN void kiln_st(long long* p, long long v) { *p = v; }
KILN_FN void kiln_st(bool* p, bool v) { *p = v; }
KILN_FN void kiln_st(__half* p, float v) {
#ifdef KILN_DEVICE_CODE
  *p = __float2half_rn(v);
#else
  p->x = kiln_host_f32_to_f16(v);
#endif
}
KILN_FN void kiln_st(__nv_bfloat16* p, float v) {
#ifdef KILN_DEVICE_CODE
  *p = __float2bfloat16_rn(v);
#else
  p->x = kiln_host_f32_to_bf16(v);
#endif
}

// ---- unary ops --------------------------------------------------------------------------------

KILN_FN unsigned long long kiln_u64(long long x) { return static_cast<unsigned long long>(x); }
KILN_FN long long kiln_s64(unsigned long long x) { return static_cast<long long>(x); }

KILN_FN float kiln_neg(float x) { return -x; }
KILN_FN double kiln_neg(double x) { return -x; }
KILN_FN long long kiln_neg(long long x) { return kiln_s64(0ull - kiln_u64(x)); }

KILN_FN float kiln_abs(float x) { return fabsf(x); }
KILN_FN double kiln_abs(double x) { return fabs(x); }
KILN_FN long long kiln_abs(long long x) { return x < 0 ? kiln_neg(x) : x; }

KILN_FN float kiln_exp(float x) { return expf(x); }
KILN_FN double kiln_exp(double x) { return exp(x); }
KILN_FN float kiln_log(float x) { return logf(x); }
KILN_FN double kiln_log(double x) { return log(x); }
KILN_FN float kiln_sqrt(float x) { return KILN_FSQRT(x); }
KILN_FN double kiln_sqrt(double x) { return KILN_DSQRT(x); }
KILN_FN float kiln_rsqrt(float x) { return KILN_FDIV(1.0f, KILN_FSQRT(x)); }
KILN_FN double kiln_rsqrt(double x) { return KILN_DDIV(1.0, KILN_DSQRT(x)); }
KILN_FN float kiln_reciprocal(float x) { return KILN_FDIV(1.0f, x); }
KILN_FN double kiln_reciprocal(double x) { return KILN_DDIV(1.0, x); }
KILN_FN float kiln_tanh(float x) { return tanhf(x); }
KILN_FN double kiln_tanh(double x) { return tanh(x); }
KILN_FN float kiln_sin(float x) { return sinf(x); }
KILN_FN double kiln_sin(double x) { return sin(x); }
KILN_FN float kiln_cos(float x) { return cosf(x); }
KILN_FN double kiln_cos(double x) { return cos(x); }
KILN_FN float kiln_erf(float x) { return erff(x); }
KILN_FN double kiln_erf(double x) { return erf(x); }
KILN_FN float kiln_floor(float x) { return floorf(x); }
KILN_FN double kiln_floor(double x) { return floor(x); }

// Only ever exponentiate a non-positive number, so neither branch overflows (NaN takes the second).
KILN_FN float kiln_sigmoid(float x) {
  if (x >= 0.0f) return KILN_FDIV(1.0f, KILN_FADD(1.0f, expf(-x)));
  float e = expf(x);
  return KILN_FDIV(e, KILN_FADD(1.0f, e));
}
KILN_FN double kiln_sigmoid(double x) {
  if (x >= 0.0) return KILN_DDIV(1.0, KILN_DADD(1.0, exp(-x)));
  double e = exp(x);
  return KILN_DDIV(e, KILN_DADD(1.0, e));
}

// x > 0 is false for NaN and -0.0: NaN passes through, -0.0 becomes +0.0.
KILN_FN float kiln_relu(float x) { return x > 0.0f || x != x ? x : 0.0f; }
KILN_FN double kiln_relu(double x) { return x > 0.0 || x != x ? x : 0.0; }
KILN_FN long long kiln_relu(long long x) { return x > 0 ? x : 0; }

KILN_FN bool kiln_not(bool x) { return !x; }

/// stop_gradient is the identity (views usually fold it away before a kernel sees it).
template <typename T>
KILN_FN T kiln_stop_gradient(T x) {
  return x;
}

// ---- binary ops -------------------------------------------------------------------------------

KILN_FN float kiln_add(float a, float b) { return KILN_FADD(a, b); }
KILN_FN double kiln_add(double a, double b) { return KILN_DADD(a, b); }
KILN_FN long long kiln_add(long long a, long long b) { return kiln_s64(kiln_u64(a) + kiln_u64(b)); }
KILN_FN float kiln_sub(float a, float b) { return KILN_FSUB(a, b); }
KILN_FN double kiln_sub(double a, double b) { return KILN_DSUB(a, b); }
KILN_FN long long kiln_sub(long long a, long long b) { return kiln_s64(kiln_u64(a) - kiln_u64(b)); }
KILN_FN float kiln_mul(float a, float b) { return KILN_FMUL(a, b); }
KILN_FN double kiln_mul(double a, double b) { return KILN_DMUL(a, b); }
KILN_FN long long kiln_mul(long long a, long long b) { return kiln_s64(kiln_u64(a) * kiln_u64(b)); }
KILN_FN float kiln_div(float a, float b) { return KILN_FDIV(a, b); }
KILN_FN double kiln_div(double a, double b) { return KILN_DDIV(a, b); }
// x / 0 = 0; x / -1 wraps (INT64_MIN / -1 would trap); C++ division truncates toward zero.
KILN_FN long long kiln_div(long long a, long long b) {
  if (b == 0) return 0;
  if (b == -1) return kiln_neg(a);
  return a / b;
}
KILN_FN float kiln_pow(float a, float b) { return powf(a, b); }
KILN_FN double kiln_pow(double a, double b) { return pow(a, b); }

KILN_FN float kiln_max(float a, float b) { return a != a || b != b ? kiln_nanf() : (a > b ? a : b); }
KILN_FN double kiln_max(double a, double b) { return a != a || b != b ? kiln_nan() : (a > b ? a : b); }
KILN_FN long long kiln_max(long long a, long long b) { return a > b ? a : b; }
KILN_FN float kiln_min(float a, float b) { return a != a || b != b ? kiln_nanf() : (a < b ? a : b); }
KILN_FN double kiln_min(double a, double b) { return a != a || b != b ? kiln_nan() : (a < b ? a : b); }
KILN_FN long long kiln_min(long long a, long long b) { return a < b ? a : b; }

KILN_FN bool kiln_and(bool a, bool b) { return a && b; }
KILN_FN bool kiln_or(bool a, bool b) { return a || b; }

// IEEE comparisons give the documented NaN results (only != is true with a NaN); bools compare as
// 0 < 1.
#define KILN_COMPARISON(name, op)                                 \
  KILN_FN bool kiln_##name(float a, float b) { return a op b; }   \
  KILN_FN bool kiln_##name(double a, double b) { return a op b; } \
  KILN_FN bool kiln_##name(long long a, long long b) { return a op b; } \
  KILN_FN bool kiln_##name(bool a, bool b) { return static_cast<int>(a) op static_cast<int>(b); }
KILN_COMPARISON(eq, ==)
KILN_COMPARISON(ne, !=)
KILN_COMPARISON(lt, <)
KILN_COMPARISON(le, <=)
KILN_COMPARISON(gt, >)
KILN_COMPARISON(ge, >=)
#undef KILN_COMPARISON

template <typename T>
KILN_FN T kiln_select(bool c, T a, T b) {
  return c ? a : b;
}

// ---- casts ------------------------------------------------------------------------------------

/// f64 → f32 rounded to odd (support/DType.h roundToOddF32): truncated toward zero, the last bit
/// set when inexact; beyond f32's range ±inf. Rounding it to f16/bf16 equals rounding d directly.
KILN_FN float kiln_round_to_odd_f32(double d) {
  float f = static_cast<float>(d);
  if (d != d || (kiln_bits_f32(f) & 0x7fffffffu) == 0x7f800000u) return f;
  double back = static_cast<double>(f);
  if (back == d) return f;
  unsigned int bits = kiln_bits_f32(f);
  if (fabs(back) > fabs(d)) bits -= 1;  // nearest went away from zero: one ulp back
  return kiln_f32_bits(bits | 1u);
}

/// i64 → f32 rounded to odd: the top 24 significant bits, the last one set when bits below were
/// dropped (exact in f32, scaled by a power of two).
KILN_FN float kiln_round_to_odd_f32(long long v) {
  unsigned long long u = v < 0 ? 0ull - kiln_u64(v) : kiln_u64(v);
  if (u < (1ull << 24)) return static_cast<float>(v);
#ifdef KILN_DEVICE_CODE
  int shift = 64 - __clzll(static_cast<long long>(u)) - 24;
#else
  int shift = 64 - __builtin_clzll(u) - 24;
#endif
  unsigned long long m = u >> shift;
  if ((m << shift) != u) m |= 1ull;
  float r = KILN_FMUL(static_cast<float>(m), kiln_f32_bits(static_cast<unsigned int>(127 + shift) << 23));
  return v < 0 ? -r : r;
}

// Float → integer: truncation toward zero, saturated at the type's limits, NaN → 0 (the
// thresholds are the interpreter's, compared in the source type where they are exact).
KILN_FN long long kiln_f_to_i32(double x) {
  if (x != x) return 0;
  if (x <= -2147483648.0) return -2147483647LL - 1;
  if (x >= 2147483647.0) return 2147483647LL;
  return static_cast<long long>(static_cast<int>(x));
}
KILN_FN long long kiln_f_to_i64(double x) {
  if (x != x) return 0;
  if (x <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  if (x >= 9223372036854775808.0) return 9223372036854775807LL;
  return static_cast<long long>(x);
}

KILN_FN float kiln_cast_f32(float x) { return x; }
KILN_FN float kiln_cast_f32(double x) { return static_cast<float>(x); }
KILN_FN float kiln_cast_f32(long long x) { return static_cast<float>(x); }
KILN_FN float kiln_cast_f32(bool x) { return x ? 1.0f : 0.0f; }

KILN_FN float kiln_cast_f16(float x) { return kiln_round_f16(x); }
KILN_FN float kiln_cast_f16(double x) { return kiln_round_f16(kiln_round_to_odd_f32(x)); }
KILN_FN float kiln_cast_f16(long long x) { return kiln_round_f16(kiln_round_to_odd_f32(x)); }
KILN_FN float kiln_cast_f16(bool x) { return x ? 1.0f : 0.0f; }

KILN_FN float kiln_cast_bf16(float x) { return kiln_round_bf16(x); }
KILN_FN float kiln_cast_bf16(double x) { return kiln_round_bf16(kiln_round_to_odd_f32(x)); }
KILN_FN float kiln_cast_bf16(long long x) { return kiln_round_bf16(kiln_round_to_odd_f32(x)); }
KILN_FN float kiln_cast_bf16(bool x) { return x ? 1.0f : 0.0f; }

KILN_FN double kiln_cast_f64(float x) { return static_cast<double>(x); }
KILN_FN double kiln_cast_f64(double x) { return x; }
KILN_FN double kiln_cast_f64(long long x) { return static_cast<double>(x); }
KILN_FN double kiln_cast_f64(bool x) { return x ? 1.0 : 0.0; }

KILN_FN long long kiln_cast_i32(float x) { return kiln_f_to_i32(static_cast<double>(x)); }
KILN_FN long long kiln_cast_i32(double x) { return kiln_f_to_i32(x); }
KILN_FN long long kiln_cast_i32(long long x) {
  return x > 2147483647LL ? 2147483647LL : x < -2147483648LL ? -2147483648LL : x;
}
KILN_FN long long kiln_cast_i32(bool x) { return x ? 1 : 0; }

KILN_FN long long kiln_cast_i64(float x) { return kiln_f_to_i64(static_cast<double>(x)); }
KILN_FN long long kiln_cast_i64(double x) { return kiln_f_to_i64(x); }
KILN_FN long long kiln_cast_i64(long long x) { return x; }
KILN_FN long long kiln_cast_i64(bool x) { return x ? 1 : 0; }

KILN_FN bool kiln_cast_bool(float x) { return x != 0.0f; }
KILN_FN bool kiln_cast_bool(double x) { return x != 0.0; }
KILN_FN bool kiln_cast_bool(long long x) { return x != 0; }
KILN_FN bool kiln_cast_bool(bool x) { return x; }

// ---- Philox4x32-10 (support/Philox.h) ---------------------------------------------------------

/// Ten Philox rounds on the counter (counter lo, counter hi, high lo, high hi) with key (seed lo,
/// seed hi); writes the four output words.
KILN_FN void kiln_philox(unsigned long long seed, unsigned long long counter, unsigned long long high,
                         unsigned int out[4]) {
  unsigned int c0 = static_cast<unsigned int>(counter), c1 = static_cast<unsigned int>(counter >> 32);
  unsigned int c2 = static_cast<unsigned int>(high), c3 = static_cast<unsigned int>(high >> 32);
  unsigned int k0 = static_cast<unsigned int>(seed), k1 = static_cast<unsigned int>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    unsigned long long p0 = 0xD2511F53ull * c0;
    unsigned long long p1 = 0xCD9E8D57ull * c2;
    unsigned int n0 = static_cast<unsigned int>(p1 >> 32) ^ c1 ^ k0;
    unsigned int n2 = static_cast<unsigned int>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<unsigned int>(p1);
    c3 = static_cast<unsigned int>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// A uniform float in [0, 1) with 24 random bits: bit-identical to kiln::philoxUniform.
KILN_FN float kiln_philox_uniform(unsigned long long seed, unsigned long long counter, unsigned long long step) {
  unsigned int r[4];
  kiln_philox(seed, counter, step, r);
  return KILN_FMUL(static_cast<float>(r[0] >> 8), 5.9604644775390625e-8f);  // 2^-24, exact
}

/// A standard normal float by Box-Muller, as kiln::philoxNormal: sqrt(-2 log u1) cos(2π u2) in f32
/// with u1, u2 the same 24-bit uniforms. log and cos are evaluated in f64 and rounded to f32, so
/// they are the correctly rounded f32 values in all but vanishingly rare cases (the host's logf and
/// cosf are within a fraction of an ulp of them; CUDA's logf/cosf could be 1–2 ulp away).
KILN_FN float kiln_philox_normal(unsigned long long seed, unsigned long long counter, unsigned long long step) {
  unsigned int r[4];
  kiln_philox(seed, counter, step, r);
  float u1 = KILN_FMUL(static_cast<float>((r[0] >> 8) + 1u), 5.9604644775390625e-8f);
  float u2 = KILN_FMUL(static_cast<float>(r[1] >> 8), 5.9604644775390625e-8f);
  float lg = static_cast<float>(log(static_cast<double>(u1)));
  float angle = KILN_FMUL(6.283185307179586f, u2);
  float c = static_cast<float>(cos(static_cast<double>(angle)));
  return KILN_FMUL(KILN_FSQRT(KILN_FMUL(-2.0f, lg)), c);
}

#endif  // KILN_CUDA_PRELUDE_CUH
