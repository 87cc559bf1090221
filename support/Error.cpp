#include "support/Error.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

std::string SourceLoc::str() const {
  if (!known()) return {};
  if (col > 0) return fmt::format("{}:{}:{}", file, line, col);
  return fmt::format("{}:{}", file, line);
}

Error::Error(const SourceLoc& loc, const std::string& message)
    : std::runtime_error(loc.known() ? loc.str() + ": " + message : message) {}

void internalError(const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "kiln internal error at %s:%d: %s\n", file, line, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kiln
