// Whole-file reads and atomic writes with kiln::Error messages that name the file and the OS reason.
// Every reader and writer of user files in kiln goes through these two functions.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The bytes of a file. Throws kiln::Error "cannot open 'PATH': REASON", "cannot read 'PATH': it is
/// a directory" and the like.
std::vector<std::byte> readFileBytes(const std::string& path);
/// The same as text.
std::string readTextFile(const std::string& path);

/// Writes `bytes` to a fresh temporary file next to `path`, flushes it to disk and renames it over
/// `path`. On any failure the temporary file is removed, `path` is untouched, and kiln::Error says why.
void writeFileAtomically(const std::string& path, std::span<const std::byte> bytes);
void writeFileAtomically(const std::string& path, std::string_view text);

}  // namespace kiln
