// kiln::Error — the one exception type for user errors (bad shapes, malformed files, missing data,
// no device). Internal invariants use KILN_ASSERT instead, which aborts with a message: a failed
// assert is a bug in kiln, an Error is a mistake in the input.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

/// A position in a user's file: a C++ source (DSL) or a .kir text file. line/col are 1-based;
/// line == 0 means "unknown".
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;

  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col", or "" when unknown
  static SourceLoc from(const std::source_location& l) {
    return SourceLoc{l.file_name(), static_cast<int>(l.line()), static_cast<int>(l.column())};
  }
  bool operator==(const SourceLoc&) const = default;
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}
  /// Prefixes the message with "file:line:col: " when the location is known.
  Error(const SourceLoc& loc, const std::string& message);
};

[[noreturn]] void internalError(const char* file, int line, const std::string& message);

}  // namespace kiln

/// User error: throws kiln::Error with a formatted message.
#define KILN_THROW(...) throw ::kiln::Error(::fmt::format(__VA_ARGS__))
#define KILN_CHECK(cond, ...)      \
  do {                             \
    if (!(cond)) KILN_THROW(__VA_ARGS__); \
  } while (0)

/// Internal invariant: a bug in kiln if it fails. Always on (the cost is negligible next to the
/// work kiln does), prints the message and aborts.
#define KILN_ASSERT(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond))                                                                      \
      ::kiln::internalError(__FILE__, __LINE__,                                       \
                            "assertion `" #cond "` failed: " + ::fmt::format(__VA_ARGS__)); \
  } while (0)
