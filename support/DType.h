// Element types of kiln tensors, their sizes and names, and the f16/bf16 conversions every part of
// kiln shares (so the interpreter, the runtime and generated code round the same way).
//
// Rounding: conversions to f16 and bf16 round to nearest, ties to even; values beyond the largest
// finite number become ±inf; NaN stays NaN (a quiet NaN). f16 subnormals are kept.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, boolean };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                       DType::i32, DType::i64, DType::boolean};

/// Text name: "f32", "f16", "bf16", "f64", "i32", "i64", "bool".
std::string_view dtypeName(DType t);
std::optional<DType> parseDType(std::string_view name);
/// Size in bytes of one element (bool is one byte, 0 or 1).
int dtypeSize(DType t);
inline bool isFloat(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
inline bool isInteger(DType t) { return t == DType::i32 || t == DType::i64; }

/// IEEE binary16 / bfloat16 bit patterns <-> float.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBFloat16(float f);
float bfloat16ToFloat(uint16_t b);

/// `v` rounded to f32 with round-to-odd (truncate, then set the last bit when inexact). Rounding
/// that result to f16 or bf16 (nearest even) equals rounding `v` to them directly — f32 keeps
/// more than two extra bits — so conversions to 16-bit floats round once, never twice.
float roundToOddF32(double v);
float roundToOddF32(int64_t v);

/// Reads/writes one element of type `t` at `p` as a double. Integers convert exactly up to 2^53;
/// bool reads as 0/1 and writes `v != 0`. Float→integer writes truncate toward zero, saturate at
/// the type's limits and write 0 for NaN (the documented semantics of `cast`).
double loadAsDouble(DType t, const void* p);
void storeFromDouble(DType t, void* p, double v);
/// Rounds `v` to the nearest value representable in `t` (the value a store then load gives).
double roundTo(DType t, double v);

}  // namespace kiln
