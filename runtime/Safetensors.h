// Reading and writing the Hugging Face safetensors format
// (https://huggingface.co/docs/safetensors), the weight format of kiln programs and AOT libraries.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
// then the data buffer; [b, e) are byte offsets into that buffer, tensors are row-major and little
// endian. Supported dtypes: F32 F16 BF16 F64 I32 I64 BOOL (kiln's own). Other safetensors dtypes
// (U8, I8, F8_E4M3, ...) are reported as unsupported.
//
// Reading trusts nothing: the header length, the JSON, every dtype, shape and offset are checked
// (as the reference implementation does: the tensors must tile the data buffer exactly, without
// gaps or overlaps) and every problem is a kiln::Error naming the file and the tensor. Bool bytes
// must be 0 or 1.
//
// Writing follows the reference implementation: compact JSON with "__metadata__" first (only when
// non-empty), then the tensors ordered by element size (largest first, so each tensor's data is
// aligned to its element size) and then by name; the header is padded with spaces to a multiple of
// 8 bytes. The output is a pure function of the input (deterministic).
#pragma once

#include "runtime/HostTensor.h"

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

using NamedTensors = std::map<std::string, HostTensor>;
using Metadata = std::map<std::string, std::string>;

/// The safetensors dtype name of a kiln dtype ("F32", "BF16", "BOOL", ...) and back (nullopt for
/// names kiln does not support).
std::string_view safetensorsDTypeName(DType t);
std::optional<DType> dtypeFromSafetensors(std::string_view name);

/// Reads a whole file. Throws kiln::Error if it cannot be opened or is malformed.
NamedTensors loadSafetensors(const std::string& path);
/// The same, also returning the "__metadata__" map (empty when absent).
NamedTensors loadSafetensors(const std::string& path, Metadata* metadata);
/// Parses the bytes of a file; `what` (usually the path) prefixes every error message.
NamedTensors parseSafetensors(std::span<const std::byte> bytes, std::string_view what,
                              Metadata* metadata = nullptr);

/// The bytes of a file holding `tensors` and `metadata`.
std::vector<std::byte> serializeSafetensors(const NamedTensors& tensors, const Metadata& metadata = {});
/// Writes atomically: to a temporary file in the same directory, then renamed over `path`, so a
/// failed write (full disk, bad tensor) leaves any existing file intact.
void saveSafetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

/// Upper bound on the header length, as in the reference implementation (100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

}  // namespace kiln::rt
