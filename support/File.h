// Whole-file reads and atomic writes with kiln::Error messages that name the file and the OS reason.
// Every reader and writer of user files in kiln goes through these two functions.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The most bytes read from a file that is not a regular one (a pipe, a device): 1 GiB.
constexpr size_t kMaxStreamBytes = size_t{1} << 30;

/// The bytes of a file. Throws kiln::Error "cannot open 'PATH': REASON", "cannot read 'PATH': it is
/// a directory", out of memory or past kMaxStreamBytes from a stream (naming the file) and the like.
std::vector<std::byte> readFileBytes(const std::string& path);
/// The same as text.
std::string readTextFile(const std::string& path);

/// Writes `bytes` to a fresh temporary file next to `path`, flushes it to disk and renames it over
/// `path`. On any failure the temporary file is removed, `path` is untouched, and kiln::Error says why.
/// A symbolic link's target is what gets replaced (the link stays); a device, pipe or socket at
/// `path` is written through as it is (/dev/null stays a device); a directory is an error.
void writeFileAtomically(const std::string& path, std::span<const std::byte> bytes);
/// The file a chain of symbolic links at `path` ends in (`path` itself when it is no link): what
/// writeFileAtomically replaces. Throws on a loop of links.
std::string linkTarget(const std::string& path);
void writeFileAtomically(const std::string& path, std::string_view text);

/// Where a backend keeps compiled code across processes: $KILN_CACHE_DIR/`backend` ("cpu",
/// "cuda") when KILN_CACHE_DIR is set and not empty, else "" (no disk cache: it is opt-in).
std::string codeCacheDir(std::string_view backend);

/// `payload` followed by a 64-bit hash of it: what a cache entry holds, so that a damaged entry is
/// told from a good one (a flipped byte in machine code keeps an object's ELF structure whole).
std::string sealCacheEntry(std::string payload);
/// The payload of a sealed entry, or nothing when its hash does not match (damaged, truncated).
std::optional<std::string> unsealCacheEntry(std::string bytes);

/// A cache entry's bytes, or "" when the file is missing or cannot be read (a cache miss).
std::string readCacheFile(const std::string& path);
/// Writes a cache entry atomically, creating its folder; a failure leaves the cache without it.
void writeCacheFile(const std::string& path, std::string_view bytes);

/// Whether `bytes` can be a whole 64-bit little-endian ELF image (an object file, a cubin): the
/// header is there and the section header table lies within the bytes — a cheap check that a
/// cached image is not truncated or something else.
bool looksLikeElf64(std::string_view bytes);

}  // namespace kiln
