// Whole-file reads and atomic writes with kiln::Error messages that name the file and the OS reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::rt {

/// The bytes of a file. Throws kiln::Error "cannot open 'PATH': REASON" and the like.
std::vector<std::byte> readFileBytes(const std::string& path);

/// The bytes of a file, decompressed when it is gzip data (recognised by its magic bytes 1f 8b, not
/// by its name, so a mis-named file still reads). A corrupt or truncated gzip stream and output
/// beyond `maxBytes` (a guard against decompression bombs) are errors.
std::vector<std::byte> readMaybeGzipFile(const std::string& path, uint64_t maxBytes = uint64_t{1} << 34);

/// Decompresses gzip data held in memory (all concatenated members); `what` names it in errors.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const std::string& what,
                              uint64_t maxBytes = uint64_t{1} << 34);
/// Gzip-compresses `bytes` (deterministic: no file name or time stamp in the gzip header).
std::vector<std::byte> gzip(std::span<const std::byte> bytes);

/// Writes `bytes` to a fresh temporary file next to `path`, flushes it to disk and renames it over
/// `path`. On any failure the temporary file is removed, `path` is untouched, and kiln::Error says why.
void writeFileAtomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace kiln::rt
