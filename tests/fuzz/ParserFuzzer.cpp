// libFuzzer target for the .kir parser. Any input may be rejected with a kiln::Error; anything
// else (a crash, a sanitizer report, another exception, a hang) is a bug. An accepted input must
// also round-trip: its printed form parses back and prints identically.
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string printed;
  try {
    printed = kiln::ir::printGraph(kiln::ir::parseGraph(text, "fuzz.kir"));
  } catch (const kiln::Error&) {
    return 0;
  }
  try {
    std::string again = kiln::ir::printGraph(kiln::ir::parseGraph(printed, "printed.kir"));
    if (again != printed) {
      std::fprintf(stderr, "round trip changed the text:\n%s\n---\n%s\n", printed.c_str(), again.c_str());
      std::abort();
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  return 0;
}
