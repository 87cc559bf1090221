#include "runtime/Idx.h"

#include "runtime/FileIO.h"
#include "support/Error.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace kiln::rt {

namespace {

int elementSize(IdxType t) {
  switch (t) {
    case IdxType::u8: case IdxType::i8: return 1;
    case IdxType::i16: return 2;
    case IdxType::i32: case IdxType::f32: return 4;
    case IdxType::f64: return 8;
  }
  return 0;
}

uint32_t bigEndian32(const std::byte* p) {
  return (std::to_integer<uint32_t>(p[0]) << 24) | (std::to_integer<uint32_t>(p[1]) << 16) |
         (std::to_integer<uint32_t>(p[2]) << 8) | std::to_integer<uint32_t>(p[3]);
}

uint64_t bigEndian64(const std::byte* p) {
  return (uint64_t{bigEndian32(p)} << 32) | bigEndian32(p + 4);
}

}  // namespace

double IdxView::at(int64_t i) const {
  const std::byte* p = payload.data() + static_cast<size_t>(i) * elementSize(type);
  switch (type) {
    case IdxType::u8: return std::to_integer<uint8_t>(p[0]);
    case IdxType::i8: return static_cast<int8_t>(std::to_integer<uint8_t>(p[0]));
    case IdxType::i16:
      return static_cast<int16_t>((std::to_integer<uint16_t>(p[0]) << 8) | std::to_integer<uint16_t>(p[1]));
    case IdxType::i32: return static_cast<int32_t>(bigEndian32(p));
    case IdxType::f32: return std::bit_cast<float>(bigEndian32(p));
    case IdxType::f64: return std::bit_cast<double>(bigEndian64(p));
  }
  return 0;
}

IdxView parseIdxHeader(std::span<const std::byte> bytes, std::string_view what) {
  KILN_CHECK(bytes.size() >= 4, "{}: not an idx file: only {} bytes", what, bytes.size());
  KILN_CHECK(bytes[0] == std::byte{0} && bytes[1] == std::byte{0},
             "{}: not an idx file: the first two bytes must be zero (magic number 0x{:08x})", what,
             bigEndian32(bytes.data()));
  IdxView v;
  uint8_t code = std::to_integer<uint8_t>(bytes[2]);
  switch (code) {
    case 0x08: case 0x09: case 0x0B: case 0x0C: case 0x0D: case 0x0E: v.type = static_cast<IdxType>(code); break;
    default: KILN_THROW("{}: unknown idx element type code 0x{:02x} (expected 08, 09, 0b, 0c, 0d or 0e)", what, code);
  }
  int rank = std::to_integer<int>(bytes[3]);
  size_t headerBytes = 4 + 4 * static_cast<size_t>(rank);
  KILN_CHECK(bytes.size() >= headerBytes, "{}: truncated idx header: {} dimensions need {} bytes, the file has {}",
             what, rank, headerBytes, bytes.size());
  // The product of the non-zero dimensions must fit even when a zero makes the array empty, so
  // element counts never overflow downstream.
  uint64_t numel = 1;
  bool overflow = false, empty = false;
  for (int i = 0; i < rank; ++i) {
    uint32_t d = bigEndian32(bytes.data() + 4 + 4 * i);
    v.dims.push_back(d);
    if (d == 0) empty = true;
    else if (numel > (uint64_t{1} << 40) / d) overflow = true;
    else numel *= d;
  }
  KILN_CHECK(!overflow, "{}: idx dimensions [{}] are too large", what, fmt::join(v.dims, ","));
  if (empty) numel = 0;
  uint64_t payloadBytes = numel * static_cast<uint64_t>(elementSize(v.type));
  uint64_t available = bytes.size() - headerBytes;
  KILN_CHECK(payloadBytes == available,
             "{}: idx dimensions [{}] of {}-byte elements need {} bytes of data, the file has {}{}", what,
             fmt::join(v.dims, ","), elementSize(v.type), payloadBytes, available,
             available < payloadBytes ? " (truncated?)" : "");
  v.numel = static_cast<int64_t>(numel);
  v.payload = bytes.subspan(headerBytes);
  return v;
}

HostTensor parseIdx(std::span<const std::byte> bytes, std::string_view what) {
  IdxView v = parseIdxHeader(bytes, what);
  DType dtype = v.type == IdxType::f32 ? DType::f32 : v.type == IdxType::f64 ? DType::f64 : DType::i32;
  HostTensor t(dtype, v.dims);
  switch (dtype) {
    case DType::f32: {
      float* out = t.as<float>();
      for (int64_t i = 0; i < v.numel; ++i) out[i] = static_cast<float>(v.at(i));
      break;
    }
    case DType::f64: {
      double* out = t.as<double>();
      for (int64_t i = 0; i < v.numel; ++i) out[i] = v.at(i);
      break;
    }
    default: {
      int32_t* out = t.as<int32_t>();
      for (int64_t i = 0; i < v.numel; ++i) out[i] = static_cast<int32_t>(v.at(i));
      break;
    }
  }
  return t;
}

HostTensor readIdx(const std::string& path) {
  std::vector<std::byte> bytes = readMaybeGzipFile(path);
  return parseIdx(bytes, "'" + path + "'");
}

}  // namespace kiln::rt
