// The IDX format of the MNIST family (http://yann.lecun.com/exdb/mnist/): bytes 0 0, an element
// type code, the number of dimensions, one big-endian u32 per dimension, then the elements, big
// endian, row-major. Files may be gzip-compressed (recognised by content, whatever the name).
#pragma once

#include "runtime/HostTensor.h"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

/// IDX element type codes (the third byte of the file).
enum class IdxType : uint8_t { u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

/// The header of an IDX file and a view of its (still big-endian) elements.
struct IdxView {
  IdxType type = IdxType::u8;
  std::vector<int64_t> dims;
  int64_t numel = 0;
  std::span<const std::byte> payload;  // numel * element size bytes

  /// Element i converted to double (exact for every IDX type).
  double at(int64_t i) const;
};

/// Validates the header and the payload size (exactly numel elements, no trailing bytes) of the
/// decompressed bytes of an IDX file. The view points into `bytes`. `what` prefixes errors.
IdxView parseIdxHeader(std::span<const std::byte> bytes, std::string_view what);

/// Reads an IDX file (plain or gzip) into a tensor of the same shape. Element types map to kiln
/// dtypes without loss: ubyte, byte, short and int → i32; float → f32; double → f64. (Callers that
/// want scaled floats, like loadFashionMnist, convert themselves; this reader does not guess.)
HostTensor readIdx(const std::string& path);
/// The same for bytes already in memory (decompressed).
HostTensor parseIdx(std::span<const std::byte> bytes, std::string_view what);

}  // namespace kiln::rt
