// Gzip-aware file reading for the data set readers (plain reads and atomic writes: support/File.h).
#pragma once

#include "support/File.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::rt {

using kiln::readFileBytes;         // support/File.h
using kiln::writeFileAtomically;

/// The bytes of a file, decompressed when it is gzip data (recognised by its magic bytes 1f 8b, not
/// by its name, so a mis-named file still reads). A corrupt or truncated gzip stream and output
/// beyond `maxBytes` (a guard against decompression bombs) are errors.
std::vector<std::byte> readMaybeGzipFile(const std::string& path, uint64_t maxBytes = uint64_t{1} << 34);

/// Decompresses gzip data held in memory (all concatenated members); `what` names it in errors.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const std::string& what,
                              uint64_t maxBytes = uint64_t{1} << 34);
/// Gzip-compresses `bytes` (deterministic: no file name or time stamp in the gzip header).
std::vector<std::byte> gzip(std::span<const std::byte> bytes);


}  // namespace kiln::rt
