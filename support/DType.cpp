#include "support/DType.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == name) return t;
  return std::nullopt;
}

int dtypeSize(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::f64: case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (absx < 0x38800000u) {
    // Subnormal or zero in f16: scale into the integer range and round to nearest even.
    float a = std::bit_cast<float>(absx);
    float scaled = a * 16777216.0f;  // 2^24: one f16 subnormal ulp is 2^-24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  int32_t exp = static_cast<int32_t>(absx >> 23) - 127 + 15;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t floatToBFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

namespace {
float makeOdd(float rounded, bool inexact, bool roundedAwayFromZero) {
  if (!inexact || std::isinf(rounded)) return rounded;
  if (roundedAwayFromZero) rounded = std::nextafter(rounded, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(rounded) | 1u);
}
}  // namespace

float roundToOddF32(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v)) return f;
  // Beyond f32's range the value overflows to ±inf whichever way it is rounded.
  return makeOdd(f, static_cast<double>(f) != v, std::fabs(static_cast<double>(f)) > std::fabs(v));
}

float roundToOddF32(int64_t v) {
  float f = static_cast<float>(v);  // correctly rounded (once) from the exact integer
  __int128 back = static_cast<__int128>(f);
  __int128 exact = v;
  auto magnitude = [](__int128 x) { return x < 0 ? -x : x; };
  return makeOdd(f, back != exact, magnitude(back) > magnitude(exact));
}

namespace {
template <typename I>
I saturatingInt(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);  // truncates toward zero
}
}  // namespace

double loadAsDouble(DType t, const void* p) {
  switch (t) {
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::f16: { uint16_t v; std::memcpy(&v, p, 2); return halfToFloat(v); }
    case DType::bf16: { uint16_t v; std::memcpy(&v, p, 2); return bfloat16ToFloat(v); }
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::boolean: return *static_cast<const uint8_t*>(p) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

void storeFromDouble(DType t, void* p, double v) {
  switch (t) {
    case DType::f32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::f64: std::memcpy(p, &v, 8); return;
    case DType::f16: { uint16_t h = floatToHalf(roundToOddF32(v)); std::memcpy(p, &h, 2); return; }
    case DType::bf16: { uint16_t h = floatToBFloat16(roundToOddF32(v)); std::memcpy(p, &h, 2); return; }
    case DType::i32: { int32_t i = saturatingInt<int32_t>(v); std::memcpy(p, &i, 4); return; }
    case DType::i64: { int64_t i = saturatingInt<int64_t>(v); std::memcpy(p, &i, 8); return; }
    case DType::boolean: *static_cast<uint8_t*>(p) = v != 0 ? 1 : 0; return;
  }
}

double roundTo(DType t, double v) {
  alignas(8) unsigned char buf[8];
  storeFromDouble(t, buf, v);
  return loadAsDouble(t, buf);
}

}  // namespace kiln
